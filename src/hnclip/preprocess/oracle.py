"""A stand-in for SAM on the synthetic benchmark: each object's box, from the scene metadata.

The embedded default runs offline on a CPU, where no SAM checkpoint exists; a randomly initialised SAM
gives meaningless masks, which would make GOAL's and StructXLIP's local pairs noise. The synthetic
generator knows where it drew every object (``captions.jsonl``: grid cell and size of each object),
so this generator returns one box-shaped mask per object, computed with
:func:`hnclip.data.synthetic.render_scene`'s geometry. Boxes, not shape silhouettes: the segment
product uses a mask only through its bounding box and its area (the area filter), and a box's area
(at most 0.9^2 / 9 of the image) stays inside GOAL's [0.01, 0.8] window.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["object_boxes", "synthetic_mask_generator"]


def object_boxes(objects: list[dict], image_size: int) -> list[tuple[int, int, int, int]]:
    """Box ``(x1, y1, x2, y2)`` (ends exclusive, output pixels) of each object of a synthetic scene."""
    from hnclip.data.synthetic import SIZE_FRACTION, SUPERSAMPLE

    side = image_size * SUPERSAMPLE
    cell = side / 3
    boxes = []
    for obj in objects:
        d = int(SIZE_FRACTION[obj["size"]] * cell)
        row, col = divmod(int(obj["cell"]), 3)
        left, top = int(col * cell + (cell - d) / 2), int(row * cell + (cell - d) / 2)
        boxes.append((left // SUPERSAMPLE, top // SUPERSAMPLE, -(-(left + d) // SUPERSAMPLE),
                      -(-(top + d) // SUPERSAMPLE)))
    return boxes


def synthetic_mask_generator(benchmark_root):
    """``(image, image_id) -> masks`` for :func:`hnclip.preprocess.segments.build_segments` on a synthetic
    benchmark folder (the one holding ``captions.jsonl``)."""
    path = Path(benchmark_root) / "captions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the oracle segmenter needs a synthetic benchmark folder")
    objects = {}
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
                objects[str(record["image_id"])] = record["objects"]
            except (json.JSONDecodeError, KeyError, TypeError) as err:
                raise ValueError(f"{path}, line {line_number}: malformed record ({err!r})") from err

    def generate(image, image_id: str) -> list[np.ndarray]:
        if image_id not in objects:
            raise KeyError(f"image_id {image_id!r} is not in {path}")
        if image.width != image.height:
            raise ValueError(f"image_id {image_id!r}: synthetic scenes are square, got {image.size}")
        masks = []
        for x1, y1, x2, y2 in object_boxes(objects[image_id], image.width):
            mask = np.zeros((image.height, image.width), dtype=bool)
            mask[y1:y2, x1:x2] = True
            masks.append(mask)
        return masks

    return generate
