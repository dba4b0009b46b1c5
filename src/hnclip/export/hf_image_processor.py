"""hnclip's image processor for transformers: CLIP's, with the centre crop where torchvision puts it.

This file is copied into every transformers export as ``hnclip_image_processing.py`` and named in its
``processor_config.json`` (``auto_map``), so ``CLIPProcessor.from_pretrained(folder, trust_remote_code=True)``
(or ``AutoProcessor``/``AutoImageProcessor`` with ``trust_remote_code=True``) loads it. It imports nothing
but transformers and numpy.

Why: hnclip's image store crops as open_clip's evaluation transform does, with torchvision's
``CenterCrop``, whose top/left edge is ``round(margin / 2)`` (Python's round, half to even);
transformers' ``CLIPImageProcessor`` (both backends) puts it at ``floor(margin / 2)``. The two differ by
one pixel whenever the margin is 3 mod 4: an image resized to 43 x 32 and cropped to 32 starts at column 6
in open_clip and hnclip, at 5 in transformers, and the features move by ~5e-3. This class is transformers'
PIL-backend CLIP processor (PIL's bicubic resize, as hnclip's store) with torchvision's crop offsets, for
either backend asked for: its pixel values are hnclip's. Without ``trust_remote_code`` transformers loads
its own ``CLIPImageProcessor`` from the same settings (the offsets above, and the torchvision backend's
own bicubic resize).
"""

from transformers import CLIPImageProcessorPil


class HNClipImageProcessor(CLIPImageProcessorPil):
    """CLIP's PIL-backend image processor whose centre crop starts at ``round(margin / 2)``, as
    torchvision's ``CenterCrop`` (open_clip's evaluation transform, hnclip's image store)."""

    def center_crop(self, image, size, **kwargs):
        height, width = image.shape[-2:]  # the PIL backend works on channels-first arrays
        if size.height > height or size.width > width:  # padded, as transformers pads
            return super().center_crop(image, size, **kwargs)
        top = int(round((height - size.height) / 2.0))
        left = int(round((width - size.width) / 2.0))
        return image[..., top:top + size.height, left:left + size.width]
