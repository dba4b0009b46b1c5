"""DCI adapter on a fixture in DCI's exact layout (densely_captioned_images/annotations/*.json + photos/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from hnclip.data import dci, load_benchmark
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError

# annotation file name -> content; names chosen so that sorted order differs from creation order
ANNOTATIONS = {
    "2-data.json": {
        "image": "sa_1543977.jpg",
        "short_caption": "A stone fountain.",
        "extra_caption": "Statues stand around it; a large building on its left.",
    },
    "10-data.json": {
        "image": "sa_1543972.jpg",
        "short_caption": "An indoor mall with escalators.",
        "extra_caption": "Planters line both sides.\nThe floor is polished.",
    },
    "7-data.json": {
        "image": "sa_1543980.jpg",
        "short_caption": " A lone tree on a hill. ",
        "extra_caption": "",
    },
}


def _write(root: Path, annotations=ANNOTATIONS) -> Path:
    base = root / "densely_captioned_images"
    (base / "annotations").mkdir(parents=True, exist_ok=True)
    (base / "photos").mkdir(exist_ok=True)
    (base / "splits.json").write_text(json.dumps({"train": [], "valid": [], "test": list(annotations)}))
    for i, (name, record) in enumerate(annotations.items()):
        full = {
            **record,
            "mask_data": {
                "0": {
                    "idx": 0,
                    "label": "x",
                    "caption": "y",
                    "parent": -1,
                    "requirements": [],
                    "mask_quality": 0,
                }
            },
            "mask_keys": ["0"],
            "summaries": {"base": ["short"]},
        }
        (base / "annotations" / name).write_text(json.dumps(full), encoding="utf-8")
        if "image" in record:
            Image.new("RGB", (10, 10), (i * 60, 0, 0)).save(base / "photos" / record["image"], format="JPEG")
    return root


def test_captions_are_short_newline_extra_in_sorted_annotation_order(tmp_path):
    manifest = dci.load_dci(_write(tmp_path), "test", expected_count=None)
    assert list(manifest["image_id"]) == ["sa_1543972", "sa_1543977", "sa_1543980"]  # 10- < 2- < 7-
    assert list(manifest["caption"]) == [
        "An indoor mall with escalators.\nPlanters line both sides.\nThe floor is polished.",
        "A stone fountain.\nStatues stand around it; a large building on its left.",
        "A lone tree on a hill.",
    ]
    photos = tmp_path / "densely_captioned_images" / "photos"
    assert manifest["image_path"].iloc[0] == str((photos / "sa_1543972.jpg").resolve())


def test_root_may_be_the_unpack_folder_or_the_archive_top_folder(tmp_path):
    _write(tmp_path)
    a = dci.load_dci(tmp_path, "test", expected_count=None)
    b = dci.load_dci(tmp_path / "densely_captioned_images", "test", expected_count=None)
    assert a.equals(b)


def test_registry_loads_dci_when_the_count_matches_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(dci.EXPECTED_COUNTS, "test", 3)
    assert len(load_benchmark("dci", _write(tmp_path), "test")) == 3


def test_protocol_count_is_all_7805_annotated_images():
    assert dci.EXPECTED_COUNTS == {"test": 7805}


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 7805"):
        dci.load_dci(_write(tmp_path), "test")


def test_train_split_is_refused_as_evaluation_only(tmp_path):
    with pytest.raises(ValueError, match="evaluation-only"):
        dci.load_dci(_write(tmp_path), "train")


def test_malformed_annotation_json_names_the_file(tmp_path):
    _write(tmp_path)
    bad = tmp_path / "densely_captioned_images" / "annotations" / "7-data.json"
    bad.write_text('{"image": "sa_1543980.jpg", "short_caption": ')
    with pytest.raises(BenchmarkFormatError, match=r"7-data\.json is not valid JSON"):
        dci.load_dci(tmp_path, "test", expected_count=None)


def test_missing_caption_field_names_the_file(tmp_path):
    annotations = dict(ANNOTATIONS)
    annotations["2-data.json"] = {"image": "sa_1543977.jpg", "short_caption": "A stone fountain."}
    with pytest.raises(BenchmarkFormatError, match=r"2-data\.json: missing field 'extra_caption'"):
        dci.load_dci(_write(tmp_path, annotations), "test", expected_count=None)


def test_both_captions_empty_is_an_error_naming_the_file(tmp_path):
    annotations = dict(ANNOTATIONS)
    annotations["2-data.json"] = {"image": "sa_1543977.jpg", "short_caption": " ", "extra_caption": ""}
    with pytest.raises(
        BenchmarkFormatError, match=r"2-data\.json: short_caption and extra_caption are both empty"
    ):
        dci.load_dci(_write(tmp_path, annotations), "test", expected_count=None)


def test_missing_photo_names_the_annotation_and_the_photo(tmp_path):
    _write(tmp_path)
    (tmp_path / "densely_captioned_images" / "photos" / "sa_1543977.jpg").unlink()
    with pytest.raises(
        BenchmarkFormatError, match=r"2-data\.json: image .*photos/sa_1543977\.jpg does not exist"
    ):
        dci.load_dci(tmp_path, "test", expected_count=None)


def test_corrupt_photo_is_caught_when_images_are_verified(tmp_path):
    _write(tmp_path)
    (tmp_path / "densely_captioned_images" / "photos" / "sa_1543980.jpg").write_bytes(
        b"\xff\xd8\xff\xe0 not a jpeg"
    )
    with pytest.raises(
        BenchmarkFormatError, match=r"sa_1543980\.jpg \(record 'sa_1543980'\) cannot be decoded"
    ):
        dci.load_dci(tmp_path, "test", expected_count=None, verify_images=True)


def test_two_annotations_of_one_photo_are_an_error(tmp_path):
    annotations = dict(ANNOTATIONS)
    annotations["9-data.json"] = {"image": "sa_1543977.jpg", "short_caption": "Again.", "extra_caption": ""}
    with pytest.raises(BenchmarkFormatError, match="lists image 'sa_1543977' twice"):
        dci.load_dci(_write(tmp_path, annotations), "test", expected_count=None)
