"""A stand-in for SAM on the synthetic benchmark: each object's box, from the scene metadata.

The embedded default runs offline on a CPU, where no SAM checkpoint exists; a randomly initialised SAM
gives meaningless masks, which would make GOAL's and StructXLIP's local pairs noise. The synthetic
generator knows where it drew every object (``captions.jsonl``: grid cell and size of each object),
so this generator returns one box-shaped mask per object, computed with
:func:`hnclip.data.synthetic.render_scene`'s geometry. Boxes, not shape silhouettes: the segment
product uses a mask only through its bounding box and its area (the area filter), and a box's area
(at most 0.9^2 / 9 of the image) stays inside GOAL's [0.01, 0.8] window.

The same metadata stands in for GOAL's sentence matcher (:func:`synthetic_sentence_matcher`): GOAL gives each
caption sentence to the segment a separate natural-image CLIP finds most similar, a matcher that reads crops.
The toy's backbone reads single-object crops poorly and gives most crops a relation sentence about two objects
(docs/toy-design.md, "Why GOAL and StructXLIP fall on the toy"); the oracle pairs each object's box with its
object's own sentence, what GOAL's matcher is meant to find.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

__all__ = ["object_boxes", "synthetic_mask_generator", "synthetic_sentence_matcher"]


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


def _scene_records(benchmark_root, what: str) -> tuple[Path, dict]:
    """``captions.jsonl``'s path and its records by image id, each line checked."""
    path = Path(benchmark_root) / "captions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: the oracle {what} needs a synthetic benchmark folder")
    records = {}
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
                if not isinstance(record.get("objects"), list):
                    raise KeyError("objects")
                records[str(record["image_id"])] = record
            except (json.JSONDecodeError, KeyError, TypeError, AttributeError) as err:
                raise ValueError(f"{path}, line {line_number}: malformed record ({err!r})") from err
    return path, records


def synthetic_sentence_matcher(benchmark_root):
    """``(image, image_id) -> {box: sentence}``: each object's box (as :func:`synthetic_mask_generator` draws
    it) with its object's own caption sentence (:func:`hnclip.data.synthetic.captions.object_sentences`)."""
    from hnclip.data.synthetic.captions import object_sentences
    from hnclip.data.synthetic.scenes import scene_from_record

    path, records = _scene_records(benchmark_root, "sentence matcher")

    def match(image, image_id: str) -> dict[tuple[int, int, int, int], str]:
        if image_id not in records:
            raise KeyError(f"image_id {image_id!r} is not in {path}")
        record = records[image_id]
        boxes = object_boxes(record["objects"], image.width)
        return dict(zip(boxes, object_sentences(scene_from_record(record)), strict=True))

    return match


def synthetic_mask_generator(benchmark_root):
    """``(image, image_id) -> masks`` for :func:`hnclip.preprocess.segments.build_segments` on a synthetic
    benchmark folder (the one holding ``captions.jsonl``)."""
    path, records = _scene_records(benchmark_root, "segmenter")
    objects = {image_id: record["objects"] for image_id, record in records.items()}

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
