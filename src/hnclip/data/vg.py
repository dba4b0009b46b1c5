"""Visual Genome paragraphs (Krause et al., CVPR 2017, "im2p"): paragraphs + split lists + VG photos -> manifest.

Layout parsed (``root`` = one folder holding the im2p files and the two unpacked VG image archives)::

    root/paragraphs_v1.json       a JSON list of {"url": ".../VG_100K_2/2388350.jpg", "image_id": 2388350,
                                                   "paragraph": "On a white plastic cutting board ..."}
    root/train_split.json         a JSON list of image ids (ints); also val_split.json, test_split.json
    root/VG_100K/<image_id>.jpg   from https://cs.stanford.edu/people/rak248/VG_100K_2/images.zip
    root/VG_100K_2/<image_id>.jpg from .../images2.zip

Where this comes from: the im2p page https://cs.stanford.edu/people/ranjaykrishna/im2p/index.html
(``paragraphs_v1.json`` and the three split files; the record layout above is quoted by public
paragraph-captioning loaders, e.g. the VisualGenomeIM2PDataset loaders that read ``image_id`` and
``paragraph`` and select by ``train_split.json``); the Visual Genome image archives and their
``VG_100K/``, ``VG_100K_2/`` folders from visualgenome.org (CC BY 4.0). Krause et al. split 19,551
images into 14,575 train, 2,487 val and 2,489 test.

Protocol: ``train`` = the ids of ``train_split.json`` in file order, ``test`` = ``test_split.json``
(val unused). Each image is looked for first in the folder its ``url`` names, then in the other; a
listed image missing from both is an error, never a silent drop.

Repeated image ids: the published ``paragraphs_v1.json`` holds 19,561 records for the 19,551 images of
the three split files, so a few ids have two records. The reference preprocessing keeps the first
record of an id and skips the rest (lukemelas/image-paragraph-captioning ``scripts/prepro_text.py``,
"Skip duplicate paragraph captions"); so do we, and the number skipped is logged and kept in
``manifest.attrs["skipped_repeated_records"]``. A repeated record still needs an integer ``image_id``
(that is how it is recognised); its other fields are not read, as in the reference.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

import pandas as pd

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    make_manifest,
    read_json,
    require_text,
    resolve_expected,
)

__all__ = ["EXPECTED_COUNTS", "IMAGE_DIRS", "PARAGRAPHS_FILE", "SPLIT_FILES", "load", "load_vg"]

PARAGRAPHS_FILE = "paragraphs_v1.json"
SPLIT_FILES = {"train": "train_split.json", "test": "test_split.json"}
IMAGE_DIRS = ("VG_100K", "VG_100K_2")
EXPECTED_COUNTS = {"train": 14575, "test": 2489}

log = logging.getLogger(__name__)


def load_vg(root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False) -> pd.DataFrame:
    """VG paragraph ``split`` as a manifest in split-file order; ``image_id`` is the VG id as a string.

    Raises BenchmarkFormatError naming the file and record for a malformed record, an id listed
    twice in the split file, a split id without a paragraph, an empty paragraph or a missing image, and
    CountMismatchError when the split's size is not the protocol's. A repeated paragraph record of an
    image is skipped (the first one is kept) and counted.
    """
    if split not in SPLIT_FILES:
        raise ValueError(f"vg: unknown split {split!r}; known: {sorted(SPLIT_FILES)}")
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "vg", split)
    root = Path(root)
    paragraphs, skipped = _read_paragraphs(root / PARAGRAPHS_FILE)
    split_file = root / SPLIT_FILES[split]
    ids = read_json(split_file, "vg")
    if not isinstance(ids, list):
        raise BenchmarkFormatError(
            f"vg: {split_file} is a JSON {type(ids).__name__}, not a list of image ids"
        )
    rows = []
    for position, image_id in enumerate(ids):
        where = f"vg: {split_file} entry {position} (image_id {image_id!r})"
        if isinstance(image_id, bool) or not isinstance(image_id, int):
            raise BenchmarkFormatError(f"{where}: not an integer image id")
        if image_id not in paragraphs:
            raise BenchmarkFormatError(f"{where}: no paragraph for this image in {root / PARAGRAPHS_FILE}")
        caption, url_dir = paragraphs[image_id]
        rows.append((str(image_id), _find_image(root, image_id, url_dir, where), caption))
    check_count("vg", split, len(rows), expected, split_file)
    manifest = make_manifest(rows, "vg", split_file)
    manifest.attrs["skipped_repeated_records"] = skipped
    if verify_images:
        decode_all_images(manifest, "vg")
    return manifest


def _read_paragraphs(path: Path) -> tuple[dict[int, tuple[str, str | None]], int]:
    """(image_id -> (paragraph, the VG folder named by its url, if any), repeated records skipped)."""
    records = read_json(path, "vg")
    if not isinstance(records, list):
        raise BenchmarkFormatError(f"vg: {path} is a JSON {type(records).__name__}, not a list of records")
    paragraphs: dict[int, tuple[str, str | None]] = {}
    repeated: dict[int, int] = {}  # image_id -> records skipped
    for position, record in enumerate(records):
        where = f"vg: {path} record {position}"
        if not isinstance(record, dict):
            raise BenchmarkFormatError(f"{where}: a JSON {type(record).__name__}, not an object")
        image_id = record.get("image_id")
        if isinstance(image_id, bool) or not isinstance(image_id, int):
            raise BenchmarkFormatError(f"{where}: image_id {image_id!r} is not an integer")
        where = f"{where} (image_id {image_id})"
        if image_id in paragraphs:
            repeated[image_id] = repeated.get(image_id, 0) + 1
            continue
        caption = require_text(record, "paragraph", where)
        url = record.get("url")
        url_dir = PurePosixPath(url).parent.name if isinstance(url, str) else None
        paragraphs[image_id] = (caption, url_dir if url_dir in IMAGE_DIRS else None)
    skipped = sum(repeated.values())
    if skipped:
        shown = ", ".join(str(i) for i in list(repeated)[:10]) + (", ..." if len(repeated) > 10 else "")
        log.info("vg: %s: skipped %d repeated record(s) of %d image id(s) (%s), keeping each id's first record",
                 path, skipped, len(repeated), shown)
    return paragraphs, skipped


def _find_image(root: Path, image_id: int, url_dir: str | None, where: str) -> Path:
    folders = sorted(IMAGE_DIRS, key=lambda d: d != url_dir)  # the url's folder first
    candidates = [root / folder / f"{image_id}.jpg" for folder in folders]
    for path in candidates:
        if path.is_file():
            return path
    raise BenchmarkFormatError(f"{where}: image not found at any of {[str(p) for p in candidates]}")


load = load_vg
