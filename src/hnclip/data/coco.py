"""COCO 5k (Karpathy's test split of COCO val2014): Karpathy's ``dataset_coco.json`` + COCO's ``val2014/``.

Layout parsed (``root`` = one folder holding both downloads, unpacked in place)::

    root/dataset_coco.json          from https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip
    root/val2014/<filename>         from http://images.cocodataset.org/zips/val2014.zip (COCO, cocodataset.org)

Each record's image is ``root/<filepath>/<filename>``; every Karpathy test image is in ``val2014/``.
Protocol and manifest: :mod:`hnclip.data.karpathy` (the 5,000 records whose ``split`` is ``test``, five
captions each: 25,000 rows; ``restval`` is never a test split). Licence: COCO's annotations CC BY 4.0,
its images under Flickr's terms of use; Karpathy's split file carries no licence of its own.
A short-caption benchmark, evaluated only (the ``retention`` experiment): there is no train split.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .adapter_utils import PROTOCOL
from .karpathy import load_karpathy

__all__ = ["ANNOTATION_FILE", "EXPECTED_COUNTS", "SEVERAL_CAPTIONS_PER_IMAGE", "load", "load_coco"]

ANNOTATION_FILE = "dataset_coco.json"
EXPECTED_COUNTS = {"test": 25000}  # manifest rows: 5,000 images x 5 captions
# test manifests list each image once per caption: hnclip.data.load_benchmark allows the repeated ids
SEVERAL_CAPTIONS_PER_IMAGE = True


def load_coco(root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False) -> pd.DataFrame:
    """COCO 5k test as a grouped manifest; ``image_id`` is the file stem (``COCO_val2014_000000391895``)."""
    return load_karpathy(root, split, benchmark="coco", annotation_file=ANNOTATION_FILE, image_dir=None,
                         expected_count=expected_count, counts=EXPECTED_COUNTS, verify_images=verify_images)


load = load_coco
