"""Flickr30k 1k (Karpathy's test split): Karpathy's ``dataset_flickr30k.json`` + ``flickr30k-images/``.

Layout parsed (``root`` = one folder holding both)::

    root/dataset_flickr30k.json         from https://cs.stanford.edu/people/karpathy/deepimagesent/caption_datasets.zip
    root/flickr30k-images/<filename>    the Flickr30k photos (Young et al., TACL 2014), obtained by a request
                                        form at https://shannon.cs.illinois.edu/DenotationGraph/

Flickr30k's records have no ``filepath``: every image is ``root/flickr30k-images/<filename>``.
Protocol and manifest: :mod:`hnclip.data.karpathy` (the 1,000 records whose ``split`` is ``test``, five
captions each: 5,000 rows). Licence: the photos are Flickr users' under Flickr's terms, released for
non-commercial research; the captions with them; Karpathy's split file carries no licence of its own.
A short-caption benchmark, evaluated only (the ``retention`` experiment): there is no train split.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .adapter_utils import PROTOCOL
from .karpathy import load_karpathy

__all__ = ["ANNOTATION_FILE", "EXPECTED_COUNTS", "IMAGE_DIR", "SEVERAL_CAPTIONS_PER_IMAGE", "load", "load_flickr30k"]

ANNOTATION_FILE = "dataset_flickr30k.json"
IMAGE_DIR = "flickr30k-images"
EXPECTED_COUNTS = {"test": 5000}  # manifest rows: 1,000 images x 5 captions
# test manifests list each image once per caption: hnclip.data.load_benchmark allows the repeated ids
SEVERAL_CAPTIONS_PER_IMAGE = True


def load_flickr30k(root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False) -> pd.DataFrame:
    """Flickr30k 1k test as a grouped manifest; ``image_id`` is the file stem (``1000092795``)."""
    return load_karpathy(root, split, benchmark="flickr30k", annotation_file=ANNOTATION_FILE, image_dir=IMAGE_DIR,
                         expected_count=expected_count, counts=EXPECTED_COUNTS, verify_images=verify_images)


load = load_flickr30k
