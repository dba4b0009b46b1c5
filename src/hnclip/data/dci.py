"""DCI, Densely Captioned Images (Urbanek et al., CVPR 2024): annotation JSONs + SA-1B photos -> manifest.

Layout parsed (``root`` = the folder ``dci.tar.gz`` was unpacked into, or its top folder itself)::

    root/densely_captioned_images/annotations/<key>.json   one JSON object per annotated image:
        {"image": "sa_1543972.jpg", "short_caption": "...", "extra_caption": "...",
         "mask_data": {...}, "mask_keys": [...], "summaries": {...}, ...}
    root/densely_captioned_images/photos/<image>           the JPEGs of SA-1B's ``sa_000138.tar``
    root/densely_captioned_images/splits.json, complete/   (sDCI's 77-token material, not read here)

Where this comes from: github.com/facebookresearch/DCI (README "Dataset" section: 7,805 images, the
annotation JSON schema, "download the archive sa_000138.tar and extract the images in the photos
folder"; ``dataset/densely_captioned_images/dataset/config.py`` for ``annotations/`` and ``photos/``;
``scripts/download.py`` for ``dci.tar.gz``; licence CC-BY-NC 4.0 in ``LICENSE``).

Protocol (long-caption retrieval): DCI's own "extended caption" (``DenseCaptionedImage.
get_extended_caption`` in ``dense_image.py``) is ``short_caption + "\\n" + extra_caption``; the public
long-text retrieval evaluation of DCI (LoTLIP, github.com/wuw2019/LoTLIP
``dataloaders/dci_retrieval.py``, reused by later long-caption CLIP papers) pairs every annotated
image with that caption, 7,805 pairs. We do the same, reading every annotation file in sorted file
name order (TULIP's Long-DCI constructor uses the same order), with each part stripped and an empty
``extra_caption`` contributing nothing. DCI is evaluation-only here: its publisher split
(``splits.json``) belongs to the 77-token sDCI task, GOAL's 1,999-image test subset
(PerceptualAI-Lab/GOAL ``datasets/DCI_test.json``) is a list not derivable from the publisher's
files, and any training split would overlap the 7,805 evaluation images.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from tqdm import tqdm

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    find_layout_root,
    make_manifest,
    read_json,
    require_image,
    require_text,
    resolve_expected,
    safe_relative_path,
)

__all__ = [
    "ANNOTATIONS_DIR",
    "EXPECTED_COUNTS",
    "PHOTOS_DIR",
    "TOP_FOLDER",
    "join_caption",
    "load",
    "load_dci",
]

TOP_FOLDER = "densely_captioned_images"
ANNOTATIONS_DIR = "annotations"
PHOTOS_DIR = "photos"
EXPECTED_COUNTS = {"test": 7805}


def join_caption(short_caption: str, extra_caption: str) -> str:
    """DCI's extended caption: the standard caption, a newline, the extra description (stripped parts)."""
    return "\n".join(part for part in (short_caption.strip(), extra_caption.strip()) if part)


def load_dci(root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False) -> pd.DataFrame:
    """DCI's 7,805 (image, short + extra caption) pairs; ``image_id`` is the photo's stem (``sa_1543972``).

    Raises ValueError for ``split="train"`` (evaluation-only, see the module docstring),
    BenchmarkFormatError naming the annotation file for malformed JSON, a missing field, an empty
    caption or a missing photo, and CountMismatchError when the count is not the protocol's.
    """
    if split != "test":
        raise ValueError(
            f"dci: split {split!r} is not part of the protocol: DCI is evaluation-only (all 7,805 annotated "
            "images are the test set, as in the public long-caption retrieval protocol); train on DOCCI or VG"
        )
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "dci", split)
    base = find_layout_root(Path(root), ANNOTATIONS_DIR, (TOP_FOLDER,), "dci")
    annotations = base / ANNOTATIONS_DIR
    files = sorted(annotations.glob("*.json"))
    if not files:
        raise BenchmarkFormatError(f"dci: {annotations} holds no annotation *.json file")
    rows = []
    for path in tqdm(files, desc="dci annotations", unit="file", disable=len(files) < 1000):
        record = read_json(path, "dci")
        where = f"dci: annotation {path}"
        if not isinstance(record, dict):
            raise BenchmarkFormatError(f"{where} is a JSON {type(record).__name__}, not an object")
        image = safe_relative_path(require_text(record, "image", where), where)
        short = require_text(record, "short_caption", where, allow_empty=True)
        extra = require_text(record, "extra_caption", where, allow_empty=True)
        caption = join_caption(short, extra)
        if not caption:
            raise BenchmarkFormatError(f"{where}: short_caption and extra_caption are both empty")
        image_path = require_image(base / PHOTOS_DIR / image, where)
        rows.append((image.stem, image_path, caption))
    check_count("dci", split, len(rows), expected, annotations)
    manifest = make_manifest(rows, "dci", annotations)
    if verify_images:
        decode_all_images(manifest, "dci")
    return manifest


load = load_dci
