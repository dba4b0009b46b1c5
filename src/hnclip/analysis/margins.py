"""Measure §2.4's gradient ratio on the library's own loss, so the report compares code, not algebra.

With equal image-text cosine, two negatives whose captions' similarities to the positive caption differ
by dG receive gradients (softmax weights) in the ratio exp(s * gamma * dG): e^5 ~ 148 for dG = 0.1,
s = 100, gamma = 0.5. We build a 3-caption batch with exactly that geometry, differentiate the image->text
cross-entropy of :func:`hnclip.losses.contrastive_logits` with autograd, and divide the two negatives'
logit gradients.
"""

from __future__ import annotations

import math

__all__ = ["measure_gradient_ratio"]


def measure_gradient_ratio(logit_scale: float = 100.0, gamma: float = 0.5, delta_g: float = 0.1,
                           negative_cosine: float = 0.3, base_similarity: float = 0.5) -> float:
    """Ratio of the i2t loss gradient on negative 1's logit to negative 2's, where G_01 - G_02 = ``delta_g``."""
    import torch
    import torch.nn.functional as F

    from hnclip.losses import caption_similarity, contrastive_logits

    if not 0 < base_similarity < base_similarity + delta_g < 1:
        raise ValueError(f"base_similarity {base_similarity} + delta_g {delta_g} must stay inside (0, 1)")
    dtype = torch.float64
    eye = torch.eye(4, dtype=dtype)
    sin = math.sqrt(1 - negative_cosine**2)
    images = eye[:3].clone()
    # captions 1 and 2 have the same cosine to image 0, so only the margin tells their logits apart
    texts = torch.stack([eye[0], negative_cosine * eye[0] + sin * eye[1], negative_cosine * eye[0] + sin * eye[2]])

    def unit(c):  # a caption-margin feature with cosine c to caption 0's
        return c * eye[0] + math.sqrt(1 - c**2) * eye[3]

    margin_features = torch.stack([eye[0], unit(base_similarity + delta_g), unit(base_similarity)])
    margin = caption_similarity(margin_features)
    logits_i2t, _ = contrastive_logits(images, texts, logit_scale, gamma, margin)
    logits_i2t = logits_i2t.detach().requires_grad_(True)
    F.cross_entropy(logits_i2t[:1], torch.zeros(1, dtype=torch.long)).backward()
    grad = logits_i2t.grad[0]
    return float(grad[1] / grad[2])
