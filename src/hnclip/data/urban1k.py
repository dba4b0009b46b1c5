"""Urban-1K (Long-CLIP, Zhang et al., ECCV 2024): ``Urban1k.zip`` from the Hub -> manifest.

Layout parsed (``root`` = the folder ``Urban1k.zip`` was unpacked into, or its ``Urban1k/`` itself)::

    root/Urban1k/image/<n>.jpg      1,000 photos, n = 1..1000
    root/Urban1k/caption/<n>.txt    the long caption of <n>.jpg (UTF-8; its first line is the caption)

Where this comes from: the Hub dataset ``BeichenZhang/Urban1k`` (file ``Urban1k.zip``, linked from
github.com/beichenzbc/Long-CLIP's README); Long-CLIP's ``eval/retrieval/Urban1k.py`` lists
``Urban1k/caption/``, pairs ``<n>.txt`` with ``Urban1k/image/<n>.jpg`` and takes
``readlines()[0]`` as the caption; TULIP's and FineLIP's evaluation code read the same layout.
Licence: released for research use; treat as non-commercial (the card's terms were not verifiable
offline).

Protocol: the 1,000 pairs are a test set only (a train split is an error). Rows are ordered by the
number in the file name, since the publishers' ``os.listdir`` order is not stable; a caption file
without its image, an image without its caption file, or an empty first line is an error.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    find_layout_root,
    make_manifest,
    resolve_expected,
)

__all__ = ["CAPTION_DIR", "EXPECTED_COUNTS", "IMAGE_DIR", "TOP_FOLDER", "load", "load_urban1k"]

TOP_FOLDER = "Urban1k"
IMAGE_DIR = "image"
CAPTION_DIR = "caption"
EXPECTED_COUNTS = {"test": 1000}


def load_urban1k(
    root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False
) -> pd.DataFrame:
    """Urban-1K's 1,000 (image, caption) pairs; ``image_id`` is the file stem (``"17"``).

    Raises ValueError for ``split="train"``, BenchmarkFormatError naming the caption or image file for
    an unpaired file, an empty caption or undecodable text, and CountMismatchError when the count is
    not the protocol's.
    """
    if split != "test":
        raise ValueError(f"urban1k: split {split!r} is not part of the protocol: Urban-1K is a test set only")
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "urban1k", split)
    base = find_layout_root(Path(root), CAPTION_DIR, (TOP_FOLDER,), "urban1k")
    captions = {p.stem: p for p in (base / CAPTION_DIR).glob("*.txt")}
    images_dir = base / IMAGE_DIR
    images = {p.stem: p for p in images_dir.glob("*.jpg")} if images_dir.is_dir() else {}
    orphans = sorted(set(images) - set(captions), key=_numeric_key)
    if orphans:
        raise BenchmarkFormatError(
            f"urban1k: image {images[orphans[0]]} has no caption file {base / CAPTION_DIR / (orphans[0] + '.txt')}"
            f" ({len(orphans)} image(s) without a caption)"
        )
    rows = []
    for stem in sorted(captions, key=_numeric_key):
        path = captions[stem]
        image = images.get(stem)
        if image is None:
            raise BenchmarkFormatError(f"urban1k: caption {path} has no image {images_dir / (stem + '.jpg')}")
        rows.append((stem, image, _first_line(path)))
    check_count("urban1k", split, len(rows), expected, base)
    manifest = make_manifest(rows, "urban1k", base)
    if verify_images:
        decode_all_images(manifest, "urban1k")
    return manifest


def _first_line(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8-sig")  # tolerate a BOM
    except UnicodeDecodeError as e:
        raise BenchmarkFormatError(f"urban1k: caption {path} is not UTF-8 text ({e})") from e
    lines = text.splitlines()
    caption = lines[0].strip() if lines else ""
    if not caption:
        raise BenchmarkFormatError(f"urban1k: caption {path} has an empty first line")
    return caption


def _numeric_key(stem: str) -> tuple:
    return (0, int(stem), "") if stem.isdigit() else (1, 0, stem)


load = load_urban1k
