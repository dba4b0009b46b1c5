"""DOCCI adapter on a fixture in Google's exact format (docci_descriptions.jsonlines + images/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hnclip.data import docci, load_benchmark
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.rehearsal.publisher_files import write_docci

RECORDS = [
    {
        "example_id": "train_00000",
        "split": "train",
        "image_file": "train_00000.jpg",
        "description": "A gray tabby cat sleeps on a red blanket.",
    },
    {
        "example_id": "test_00000",
        "split": "test",
        "image_file": "test_00000.jpg",
        "description": "An outdoor close-up of a metal daisy sculpture, white petals, yellow center.",
    },
    {
        "example_id": "qual_test_00000",
        "split": "qual_test",
        "image_file": "qual_test_00000.jpg",
        "description": "A qualitative test image of three horse toys.",
    },
    {
        "example_id": "test_00001",
        "split": "test",
        "image_file": "test_00001.jpg",
        "description": '  Two blue mugs, "left" one chipped, on a wooden shelf.  ',
    },
    {
        "example_id": "qual_dev_00000",
        "split": "qual_dev",
        "image_file": "qual_dev_00000.jpg",
        "description": "A qualitative dev image.",
    },
    {
        "example_id": "train_00001",
        "split": "train",
        "image_file": "train_00001.jpg",
        "description": "A street sign reading 'STOP' at dusk.",
    },
]


def _write(root: Path, records=RECORDS, lines: list[str] | None = None) -> Path:
    return write_docci(root, records, lines=lines)


def test_test_split_is_the_publisher_test_records_in_file_order(tmp_path):
    manifest = docci.load_docci(_write(tmp_path), "test", expected_count=None)
    assert list(manifest.columns) == ["image_id", "image_path", "caption"]
    assert list(manifest["image_id"]) == ["test_00000", "test_00001"]  # qual_test is not in the protocol
    assert list(manifest["caption"]) == [
        "An outdoor close-up of a metal daisy sculpture, white petals, yellow center.",
        'Two blue mugs, "left" one chipped, on a wooden shelf.',
    ]
    assert list(manifest["image_path"]) == [
        str((tmp_path / "images" / f"test_0000{i}.jpg").resolve()) for i in (0, 1)
    ]


def test_train_split_is_the_publisher_train_records(tmp_path):
    manifest = docci.load_docci(_write(tmp_path), "train", expected_count=None)
    assert list(manifest["image_id"]) == ["train_00000", "train_00001"]


def test_registry_loads_docci_when_the_count_matches_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(docci.EXPECTED_COUNTS, "test", 2)
    manifest = load_benchmark("docci", _write(tmp_path), "test")
    assert len(manifest) == 2


def test_protocol_counts_are_the_publisher_split_sizes():
    assert docci.EXPECTED_COUNTS == {"train": 9647, "test": 5000, "test_goal": 5100}


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    with pytest.raises(CountMismatchError, match=r"found 2 records, the protocol lists 5000"):
        docci.load_docci(_write(tmp_path), "test")


def test_malformed_json_line_names_file_and_line(tmp_path):
    lines = [json.dumps(r) for r in RECORDS]
    lines[3] = lines[3][:-5]
    with pytest.raises(BenchmarkFormatError, match=r"docci_descriptions\.jsonlines line 4 is not valid JSON"):
        docci.load_docci(_write(tmp_path, lines=lines), "test", expected_count=None)


def test_empty_description_names_the_record(tmp_path):
    records = [dict(r) for r in RECORDS]
    records[3]["description"] = "   "
    with pytest.raises(
        BenchmarkFormatError, match=r"line 4 \(example_id 'test_00001'\): field 'description' is empty"
    ):
        docci.load_docci(_write(tmp_path, records), "test", expected_count=None)


def test_missing_image_names_the_record_and_the_path(tmp_path):
    _write(tmp_path)
    (tmp_path / "images" / "test_00001.jpg").unlink()
    with pytest.raises(
        BenchmarkFormatError, match=r"example_id 'test_00001'.*images/test_00001\.jpg does not exist"
    ):
        docci.load_docci(tmp_path, "test", expected_count=None)


def test_corrupt_jpeg_is_caught_when_images_are_verified(tmp_path):
    _write(tmp_path)
    path = tmp_path / "images" / "test_00000.jpg"
    path.write_bytes(path.read_bytes()[:40])  # truncated JPEG
    assert len(docci.load_docci(tmp_path, "test", expected_count=None)) == 2  # existence check only
    with pytest.raises(
        BenchmarkFormatError, match=r"test_00000\.jpg \(record 'test_00000'\) cannot be decoded"
    ):
        docci.load_docci(tmp_path, "test", expected_count=None, verify_images=True)


def test_image_file_escaping_the_benchmark_folder_is_refused(tmp_path):
    records = [dict(r) for r in RECORDS]
    _write(tmp_path, records)
    records[1]["image_file"] = "../outside.jpg"
    (tmp_path / "docci_descriptions.jsonlines").write_text("\n".join(json.dumps(r) for r in records))
    with pytest.raises(BenchmarkFormatError, match="not a relative path inside the benchmark"):
        docci.load_docci(tmp_path, "test", expected_count=None)


def test_unknown_split_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown split 'qual_dev'"):
        docci.load_docci(_write(tmp_path), "qual_dev")


def test_goal_test_variant_adds_the_qual_test_records_in_file_order(tmp_path):
    # GOAL's docci_test.json: the publisher's test records plus qual_test (5,000 + 100 = 5,100)
    manifest = load_benchmark_unchecked(_write(tmp_path), "test_goal")
    assert list(manifest["image_id"]) == ["test_00000", "qual_test_00000", "test_00001"]
    assert manifest["caption"].iloc[1] == "A qualitative test image of three horse toys."


def test_goal_test_variant_is_checked_against_goals_5100(tmp_path):
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 5100"):
        docci.load_docci(_write(tmp_path), "test_goal")


def test_registry_names_the_test_variants_and_refuses_unknown_splits(tmp_path):
    from hnclip.data import test_variants

    assert set(test_variants("docci")) == {"test_goal"} and test_variants("urban1k") == {}
    with pytest.raises(ValueError, match="unknown split 'test_gaol' for benchmark 'docci'; known: train, val, test, test_goal"):
        load_benchmark("docci", _write(tmp_path), "test_gaol")


def load_benchmark_unchecked(root, split):
    return docci.load_docci(root, split, expected_count=None)
