"""Long-DCI adapter on a fixture in TULIP's format (dci_long.csv, tab-separated, pandas-quoted) + photos."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from PIL import Image

from hnclip.data import load_benchmark, long_dci
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.rehearsal.publisher_files import jpeg_bytes, long_dci_csv

ROWS = [
    ("sa_1543972.jpg", "Planters line both sides of the escalators.\nThe floor is polished."),
    ("sa_1543977.jpg", ""),  # DCI image whose extra_caption is empty
    ("sa_1543978.jpg", 'Balls in a "ball pit",\tcolours: red, blue.'),
    ("sa_1543980.jpg", "A lone tree; the sky is pale."),
]


def _write(root: Path, rows=ROWS, image_dir: str = "photos") -> Path:
    # the file is written exactly as TULIP's dci_long_part.py writes it: pandas, sep="\t", no index
    root.mkdir(parents=True, exist_ok=True)
    (root / "dci_long.csv").write_bytes(long_dci_csv(rows))
    (root / image_dir).mkdir(parents=True, exist_ok=True)
    for i, (name, _) in enumerate(rows):
        (root / image_dir / name).write_bytes(jpeg_bytes(Image.new("RGB", (9, 9), (0, i * 50, 0))))
    return root


def test_pairs_keep_file_order_and_exact_text_and_empty_captions_are_dropped_and_counted(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="hnclip.data.long_dci"):
        manifest = long_dci.load_long_dci(_write(tmp_path), "test", expected_count=None)
    assert list(manifest["image_id"]) == ["sa_1543972", "sa_1543978", "sa_1543980"]
    assert list(manifest["caption"]) == [ROWS[0][1], ROWS[2][1], ROWS[3][1]]
    assert manifest.attrs["dropped_empty_captions"] == 1
    assert "lists 4 rows; dropped 1 with an empty caption; kept 3" in caplog.text


@pytest.mark.parametrize("image_dir", [".", "photos", "densely_captioned_images/photos"])
def test_photos_are_found_in_each_documented_folder(tmp_path, image_dir):
    manifest = long_dci.load_long_dci(_write(tmp_path, image_dir=image_dir), "test", expected_count=None)
    assert manifest["image_path"].iloc[0] == str((tmp_path / image_dir / "sa_1543972.jpg").resolve())


def test_registry_loads_long_dci_when_the_kept_count_matches_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(long_dci.EXPECTED_COUNTS, "test", 3)
    assert len(load_benchmark("long_dci", _write(tmp_path), "test")) == 3


def test_protocol_count_is_7805_listed_minus_203_empty():
    assert long_dci.EXPECTED_COUNTS == {"test": 7805 - 203, "test_keep_empty": 7805}


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 7602"):
        long_dci.load_long_dci(_write(tmp_path), "test")


def test_train_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="test set only"):
        long_dci.load_long_dci(_write(tmp_path), "train")


def test_wrong_header_names_the_file_and_the_columns_found(tmp_path):
    _write(tmp_path)
    (tmp_path / "dci_long.csv").write_text("image\tcaption\nsa_1543972.jpg\tx\n")
    with pytest.raises(BenchmarkFormatError, match=r"dci_long\.csv header is \['image', 'caption'\]"):
        long_dci.load_long_dci(tmp_path, "test", expected_count=None)


def test_row_with_a_missing_field_names_the_line(tmp_path):
    _write(tmp_path)
    (tmp_path / "dci_long.csv").write_text("filepath\ttitle\nsa_1543972.jpg\tok\nsa_1543978.jpg\n")
    with pytest.raises(BenchmarkFormatError, match=r"dci_long\.csv line 3: expected 2 tab-separated fields"):
        long_dci.load_long_dci(tmp_path, "test", expected_count=None)


def test_missing_photo_names_the_line_and_every_place_looked(tmp_path):
    _write(tmp_path)
    (tmp_path / "photos" / "sa_1543980.jpg").unlink()
    with pytest.raises(
        BenchmarkFormatError, match=r"line \d+ \(filepath 'sa_1543980\.jpg'\): image not found"
    ):
        long_dci.load_long_dci(tmp_path, "test", expected_count=None)


def test_missing_table_lists_what_the_folder_holds(tmp_path):
    (tmp_path / "README.md").write_text("x")
    with pytest.raises(
        FileNotFoundError, match=r"dci_long\.csv does not exist \(the folder holds \['README\.md'\]\)"
    ):
        long_dci.load_long_dci(tmp_path, "test", expected_count=None)


def test_keep_empty_variant_counts_every_listed_row_with_its_empty_caption(tmp_path):
    manifest = long_dci.load_long_dci(_write(tmp_path), "test_keep_empty", expected_count=None)
    assert list(manifest["image_id"]) == ["sa_1543972", "sa_1543977", "sa_1543978", "sa_1543980"]
    assert list(manifest["caption"]) == [ROWS[0][1], "", ROWS[2][1], ROWS[3][1]]
    assert manifest.attrs["dropped_empty_captions"] == 0
    with pytest.raises(CountMismatchError, match="found 4 records, the protocol lists 7805"):
        long_dci.load_long_dci(_write(tmp_path), "test_keep_empty")
