"""DOCCI (Onoe et al., ECCV 2024): Google's descriptions file and image archive -> manifest.

Layout parsed (``root`` = the folder holding the two downloads, the archive unpacked in place)::

    root/docci_descriptions.jsonlines   one JSON object per line:
                                        {"example_id": "test_01234", "split": "test",
                                         "image_file": "test_01234.jpg", "description": "..."}
    root/images/<image_file>            from docci_images.tar.gz (its members are ``images/*.jpg``)

Where this comes from: the project page https://google.github.io/docci/ (github.com/google/docci,
``index.html``: download links under https://storage.googleapis.com/docci/data/, the field table
``example_id, split, image_file, description``, licence CC BY 4.0), and the Hub loader
``google/docci`` (``docci.py``), which downloads the same two files from the same bucket and reads
``images/<image_file>``; the Hub repository holds only that script, so its layout is this one (we
never run it: no ``trust_remote_code``). Splits in the file: train 9,647, test 5,000, qual_dev 100,
qual_test 100.

Protocol: ``test`` = the 5,000 records with ``split == "test"``; ``train`` = the 9,647 with
``split == "train"``; qual_dev/qual_test are unused. GOAL's evaluation file (PerceptualAI-Lab/GOAL
``datasets/docci_test.json``) holds 5,100 records: it adds the 100 ``qual_test`` images (we counted its
file names: 5,000 ``test_*``, 100 ``qual_test_*``), so GOAL's DOCCI numbers are over 5,100 pairs, ours
over the publisher's 5,000.

Test variant (``TEST_VARIANTS``, for the report's protocol table, never the default): ``test_goal`` =
the ``test`` and ``qual_test`` records in file order, GOAL's 5,100.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    iter_json_lines,
    make_manifest,
    require_image,
    require_text,
    resolve_expected,
    safe_relative_path,
)

__all__ = ["DESCRIPTIONS_FILE", "EXPECTED_COUNTS", "IMAGES_DIR", "PROTOCOL_SPLITS", "TEST_VARIANTS", "load",
           "load_docci"]

DESCRIPTIONS_FILE = "docci_descriptions.jsonlines"
IMAGES_DIR = "images"
# our split -> the publisher's ``split`` values it takes
PROTOCOL_SPLITS = {"train": ("train",), "test": ("test",), "test_goal": ("test", "qual_test")}
EXPECTED_COUNTS = {"train": 9647, "test": 5000, "test_goal": 5100}
# test splits of other published protocols: split name -> what it is (shown in the protocol table)
TEST_VARIANTS = {"test_goal": "GOAL's 5,100: test + qual_test (GOAL datasets/docci_test.json)"}


def load_docci(
    root: Path, split: str, *, expected_count=PROTOCOL, verify_images: bool = False
) -> pd.DataFrame:
    """DOCCI ``split`` as a manifest in file order; ``image_id`` is the publisher's ``example_id``.

    Raises BenchmarkFormatError naming the file and line for a malformed line, an empty description or
    a missing image, and CountMismatchError when the split's size is not the protocol's.
    """
    if split not in PROTOCOL_SPLITS:
        raise ValueError(f"docci: unknown split {split!r}; known: {sorted(PROTOCOL_SPLITS)}")
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "docci", split)
    root = Path(root)
    descriptions = root / DESCRIPTIONS_FILE
    wanted = PROTOCOL_SPLITS[split]
    rows = []
    for line_no, record in iter_json_lines(descriptions, "docci"):
        where = f"docci: {descriptions} line {line_no}"
        record_split = require_text(record, "split", where)
        if record_split not in wanted:
            continue
        example_id = require_text(record, "example_id", where)
        where = f"{where} (example_id {example_id!r})"
        image_file = safe_relative_path(require_text(record, "image_file", where), where)
        caption = require_text(record, "description", where)
        image_path = require_image(root / IMAGES_DIR / image_file, where)
        rows.append((example_id, image_path, caption))
    if not rows and expected != 0:
        raise BenchmarkFormatError(f"docci: {descriptions} has no record with split in {list(wanted)}")
    check_count("docci", split, len(rows), expected, descriptions)
    manifest = make_manifest(rows, "docci", descriptions)
    if verify_images:
        decode_all_images(manifest, "docci")
    return manifest


load = load_docci
