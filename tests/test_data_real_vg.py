"""VG paragraph adapter on a fixture in im2p's exact format (paragraphs_v1.json, *_split.json, VG_100K*/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image

from hnclip.data import load_benchmark, vg
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.rehearsal.publisher_files import write_vg

URL = "https://cs.stanford.edu/people/rak248/{folder}/{id}.jpg"
PARAGRAPHS = [
    {
        "url": URL.format(folder="VG_100K_2", id=2388350),
        "image_id": 2388350,
        "paragraph": "On a white plastic cutting board is a bunch of chopped vegetables.  ",
    },
    {
        "url": URL.format(folder="VG_100K", id=2356347),
        "image_id": 2356347,
        "paragraph": "A man rides a brown horse. The horse has a white stripe.",
    },
    {"url": URL.format(folder="VG_100K", id=61), "image_id": 61, "paragraph": "A test-split kitchen."},
    {
        "url": URL.format(folder="VG_100K_2", id=2400000),
        "image_id": 2400000,
        "paragraph": "A train at a platform, people waiting.",
    },
    # paragraphs_v1.json repeats a few image ids (19,561 records for 19,551 images); the reference
    # preprocessing keeps the first record, so this one must never reach the manifest
    {
        "url": URL.format(folder="VG_100K", id=2356347),
        "image_id": 2356347,
        "paragraph": "A second description of the horse that the loader must skip.",
    },
]
SPLITS = {"train": [2356347, 2388350, 2400000], "val": [], "test": [61]}
# where the fixture puts each image; 2400000's url says VG_100K_2 but the file sits in VG_100K
FOLDERS = {2388350: "VG_100K_2", 2356347: "VG_100K", 61: "VG_100K", 2400000: "VG_100K"}


def _write(root: Path, paragraphs=PARAGRAPHS, splits=SPLITS) -> Path:
    return write_vg(root, paragraphs, splits, FOLDERS)


def test_train_split_follows_the_split_file_order_with_paragraph_text(tmp_path):
    manifest = vg.load_vg(_write(tmp_path), "train", expected_count=None)
    assert list(manifest["image_id"]) == ["2356347", "2388350", "2400000"]
    assert list(manifest["caption"]) == [
        "A man rides a brown horse. The horse has a white stripe.",
        "On a white plastic cutting board is a bunch of chopped vegetables.",
        "A train at a platform, people waiting.",
    ]
    expected_paths = [
        tmp_path / "VG_100K" / "2356347.jpg",
        tmp_path / "VG_100K_2" / "2388350.jpg",
        tmp_path / "VG_100K" / "2400000.jpg",
    ]
    assert list(manifest["image_path"]) == [str(p.resolve()) for p in expected_paths]


def test_the_folder_named_by_the_url_wins_when_both_hold_the_image(tmp_path):
    _write(tmp_path)
    Image.new("RGB", (8, 8)).save(tmp_path / "VG_100K" / "2388350.jpg", format="JPEG")  # url says VG_100K_2
    manifest = vg.load_vg(tmp_path, "train", expected_count=None)
    assert manifest["image_path"].iloc[1] == str((tmp_path / "VG_100K_2" / "2388350.jpg").resolve())


def test_test_split_is_test_split_json(tmp_path):
    manifest = vg.load_vg(_write(tmp_path), "test", expected_count=None)
    assert list(manifest["image_id"]) == ["61"]


def test_registry_loads_vg_when_the_count_matches_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(vg.EXPECTED_COUNTS, "train", 3)
    assert len(load_benchmark("vg", _write(tmp_path), "train")) == 3


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    assert vg.EXPECTED_COUNTS == {"train": 14575, "test": 2489}
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 14575"):
        vg.load_vg(_write(tmp_path), "train")


def test_missing_image_is_an_error_naming_the_id_and_both_folders(tmp_path):
    _write(tmp_path)
    (tmp_path / "VG_100K_2" / "2388350.jpg").unlink()
    with pytest.raises(
        BenchmarkFormatError, match=r"image_id 2388350\): image not found .*VG_100K_2.*VG_100K"
    ):
        vg.load_vg(tmp_path, "train", expected_count=None)


def test_split_id_without_a_paragraph_names_the_split_file(tmp_path):
    with pytest.raises(
        BenchmarkFormatError, match=r"train_split\.json entry 1 \(image_id 99\): no paragraph"
    ):
        vg.load_vg(_write(tmp_path, splits={**SPLITS, "train": [2356347, 99]}), "train", expected_count=None)


def test_a_repeated_image_id_keeps_its_first_record_and_counts_the_skipped_ones(tmp_path, caplog):
    paragraphs = [*PARAGRAPHS, {**PARAGRAPHS[1], "paragraph": ""}]  # a third record, malformed: never read
    with caplog.at_level("INFO", logger="hnclip.data.vg"):
        manifest = vg.load_vg(_write(tmp_path, paragraphs), "train", expected_count=None)
    assert manifest["caption"].iloc[0] == "A man rides a brown horse. The horse has a white stripe."
    assert manifest.attrs["skipped_repeated_records"] == 2
    assert "skipped 2 repeated record(s) of 1 image id(s) (2356347)" in caplog.text


def test_a_file_without_repeats_skips_nothing(tmp_path):
    manifest = vg.load_vg(_write(tmp_path, PARAGRAPHS[:4]), "train", expected_count=None)
    assert manifest.attrs["skipped_repeated_records"] == 0


def test_empty_paragraph_names_the_record(tmp_path):
    paragraphs = [dict(p) for p in PARAGRAPHS]
    paragraphs[2]["paragraph"] = " "
    with pytest.raises(BenchmarkFormatError, match=r"record 2 \(image_id 61\): field 'paragraph' is empty"):
        vg.load_vg(_write(tmp_path, paragraphs), "test", expected_count=None)


def test_non_integer_image_id_is_a_malformed_record(tmp_path):
    paragraphs = [dict(p) for p in PARAGRAPHS]
    paragraphs[0]["image_id"] = "2388350"
    with pytest.raises(
        BenchmarkFormatError, match=r"paragraphs_v1\.json record 0: image_id '2388350' is not an integer"
    ):
        vg.load_vg(_write(tmp_path, paragraphs), "train", expected_count=None)


def test_split_listing_an_image_twice_is_an_error(tmp_path):
    with pytest.raises(BenchmarkFormatError, match="lists image '61' twice"):
        vg.load_vg(_write(tmp_path, splits={**SPLITS, "test": [61, 61]}), "test", expected_count=None)


def test_unknown_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown split 'val'"):
        vg.load_vg(_write(tmp_path), "val")
