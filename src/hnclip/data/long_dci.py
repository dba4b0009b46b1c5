"""Long-DCI (TULIP, Najdenkoska et al., ICLR 2025): the Hub's tab-separated caption file + DCI's photos.

Layout parsed (``root`` = the folder the Hub dataset ``mderakhshani/Long-DCI`` was downloaded into)::

    root/dci_long.csv     tab-separated, header ``filepath<TAB>title``, one row per DCI image:
                          ``sa_1543972.jpg<TAB><the image's extra_caption>``; fields holding a tab,
                          quote or newline are double-quoted (pandas ``to_csv(sep="\\t")``)
    the photos, found at the first existing one of (see ``IMAGE_DIRS``):
      root/<filepath>                                    TULIP's evaluation layout
      root/photos/<filepath>                             SA-1B's sa_000138.tar unpacked beside the file
      root/densely_captioned_images/photos/<filepath>    a DCI download in the same root

Where this comes from: github.com/ivonajdenkoska/tulip (README links the Hub dataset as "Long-DCI
benchmark"; ``eval/dci_long.py`` reads ``<data_path>/dci_long.csv`` with ``pd.read_csv(sep='\\t')``,
columns ``filepath`` and ``title``, images at ``<data_path>/<filepath>``;
``open_clip/data_prep/dci_long_part.py`` builds the file from DCI's sorted annotation JSONs with
``title = extra_caption``). The Hub card gives CC-BY-NC 4.0 (not verifiable offline).

Protocol: every listed row is a test pair, in file order; rows whose caption is empty are dropped
and counted (logged, and in ``manifest.attrs["dropped_empty_captions"]``). DCI has 7,805 annotated
images of which 203 have an empty ``extra_caption``, so 7,805 rows may be listed and 7,602 pairs
remain (TULIP's constructor already skips them; either file gives the same 7,602). The protocol
count is checked on the pairs kept. Evaluation-only: the images are DCI's.

Test variant (``TEST_VARIANTS``, for the report's protocol table): ``test_keep_empty`` keeps every
listed row, an empty caption encoded as the empty text, so all 7,805 listed images count. We know of no
released evaluation code that does this (TULIP drops them); it shows how much the 203 captionless
images would move the numbers of a paper that counts 7,805 Long-DCI images.
"""

from __future__ import annotations

import csv
import logging
from pathlib import Path

import pandas as pd

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    make_manifest,
    resolve_expected,
    safe_relative_path,
)

__all__ = ["ANNOTATION_FILE", "COLUMNS", "EXPECTED_COUNTS", "IMAGE_DIRS", "TEST_VARIANTS", "load",
           "load_long_dci"]

log = logging.getLogger(__name__)

ANNOTATION_FILE = "dci_long.csv"
COLUMNS = ("filepath", "title")
IMAGE_DIRS = (".", "photos", "densely_captioned_images/photos")
# pairs kept after dropping empty captions (7,805 DCI images - 203 empty extra_captions)
EXPECTED_COUNTS = {"test": 7602, "test_keep_empty": 7805}
TEST_VARIANTS = {"test_keep_empty": "every listed row, empty captions kept as empty text (7,805)"}


def load_long_dci(
    root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False
) -> pd.DataFrame:
    """Long-DCI's (image, extra_caption) pairs with empty captions dropped and counted.

    Raises ValueError for ``split="train"``, BenchmarkFormatError naming the file and line for a
    wrong header, a row with a missing or extra field or a missing image, and CountMismatchError when
    the number of pairs kept is not the protocol's.
    """
    if split not in ("test", *TEST_VARIANTS):
        raise ValueError(
            f"long_dci: split {split!r} is not part of the protocol: Long-DCI is a test set only "
            f"(splits: test, {', '.join(TEST_VARIANTS)})"
        )
    keep_empty = split == "test_keep_empty"
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "long_dci", split)
    root = Path(root)
    table = root / ANNOTATION_FILE
    if not table.is_file():
        present = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        raise FileNotFoundError(f"long_dci: {table} does not exist (the folder holds {present})")
    rows, listed, dropped = [], 0, 0
    with open(table, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f, delimiter="\t")
        if reader.fieldnames is None or any(c not in reader.fieldnames for c in COLUMNS):
            raise BenchmarkFormatError(
                f"long_dci: {table} header is {reader.fieldnames}, expected the columns {list(COLUMNS)}"
            )
        try:
            for record in reader:
                listed += 1
                where = f"long_dci: {table} line {reader.line_num}"
                if None in record or any(record[c] is None for c in COLUMNS):
                    raise BenchmarkFormatError(
                        f"{where}: expected {len(reader.fieldnames)} tab-separated fields, got a different number"
                    )
                filepath = record["filepath"].strip()
                where = f"{where} (filepath {filepath!r})"
                caption = record["title"].strip()
                if not caption and not keep_empty:
                    dropped += 1
                    continue
                image = safe_relative_path(filepath, where)
                rows.append((image.stem, _find_image(root, image, where), caption))
        except csv.Error as e:
            raise BenchmarkFormatError(
                f"long_dci: {table} line {reader.line_num} is not valid TSV ({e})"
            ) from e
    log.info(
        "long_dci: %s lists %d rows; dropped %d with an empty caption; kept %d",
        table,
        listed,
        dropped,
        len(rows),
    )
    check_count("long_dci", split, len(rows), expected, table)
    manifest = make_manifest(rows, "long_dci", table)
    manifest.attrs["dropped_empty_captions"] = dropped
    if verify_images:
        decode_all_images(manifest, "long_dci")
    return manifest


def _find_image(root: Path, image: Path, where: str) -> Path:
    candidates = [root / folder / image for folder in IMAGE_DIRS]
    for path in candidates:
        if path.is_file():
            return path
    raise BenchmarkFormatError(f"{where}: image not found at any of {[str(p) for p in candidates]}")


load = load_long_dci
