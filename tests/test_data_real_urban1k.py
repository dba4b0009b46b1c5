"""Urban-1K adapter on a fixture in Urban1k.zip's exact layout (Urban1k/image/<n>.jpg, Urban1k/caption/<n>.txt)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hnclip.data import load_benchmark, urban1k
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.rehearsal.publisher_files import write_urban1k

CAPTIONS = {
    "10": "A busy crosswalk at twilight; a yellow light signals caution.\nsecond line, not part of the caption\n",
    "2": "An outdoor cafe under an off-white umbrella on cobblestones.\n",
    "1": "A tram passes a red-brick station.",  # no trailing newline
}


def _write(root: Path, captions=CAPTIONS) -> Path:
    return write_urban1k(root, captions)


def test_pairs_in_numeric_order_with_the_first_line_as_caption(tmp_path):
    manifest = urban1k.load_urban1k(_write(tmp_path), "test", expected_count=None)
    assert list(manifest["image_id"]) == ["1", "2", "10"]
    assert list(manifest["caption"]) == [
        "A tram passes a red-brick station.",
        "An outdoor cafe under an off-white umbrella on cobblestones.",
        "A busy crosswalk at twilight; a yellow light signals caution.",
    ]
    assert manifest["image_path"].iloc[2] == str((tmp_path / "Urban1k" / "image" / "10.jpg").resolve())


def test_root_may_be_the_unpack_folder_or_urban1k_itself(tmp_path):
    _write(tmp_path)
    a = urban1k.load_urban1k(tmp_path, "test", expected_count=None)
    assert a.equals(urban1k.load_urban1k(tmp_path / "Urban1k", "test", expected_count=None))


def test_registry_loads_urban1k_when_the_count_matches_the_protocol(tmp_path, monkeypatch):
    monkeypatch.setitem(urban1k.EXPECTED_COUNTS, "test", 3)
    assert len(load_benchmark("urban1k", _write(tmp_path), "test")) == 3


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    assert urban1k.EXPECTED_COUNTS == {"test": 1000}
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 1000"):
        urban1k.load_urban1k(_write(tmp_path), "test")


def test_train_split_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="urban1k: split 'train' is not part of the protocol"):
        load_benchmark("urban1k", _write(tmp_path), "train")


def test_caption_without_its_image_names_both_files(tmp_path):
    _write(tmp_path)
    (tmp_path / "Urban1k" / "image" / "2.jpg").unlink()
    with pytest.raises(BenchmarkFormatError, match=r"caption .*caption/2\.txt has no image .*image/2\.jpg"):
        urban1k.load_urban1k(tmp_path, "test", expected_count=None)


def test_image_without_its_caption_names_both_files(tmp_path):
    _write(tmp_path)
    (tmp_path / "Urban1k" / "caption" / "10.txt").unlink()
    with pytest.raises(
        BenchmarkFormatError, match=r"image .*image/10\.jpg has no caption file .*caption/10\.txt"
    ):
        urban1k.load_urban1k(tmp_path, "test", expected_count=None)


def test_empty_caption_names_the_file(tmp_path):
    _write(tmp_path, {**CAPTIONS, "2": "\n\nlater text\n"})
    with pytest.raises(BenchmarkFormatError, match=r"caption .*caption/2\.txt has an empty first line"):
        urban1k.load_urban1k(tmp_path, "test", expected_count=None)


def test_corrupt_image_is_caught_when_images_are_verified(tmp_path):
    _write(tmp_path)
    path = tmp_path / "Urban1k" / "image" / "1.jpg"
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3])
    with pytest.raises(BenchmarkFormatError, match=r"1\.jpg \(record '1'\) cannot be decoded"):
        urban1k.load_urban1k(tmp_path, "test", expected_count=None, verify_images=True)


def test_wrong_root_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"Urban1k/caption"):
        urban1k.load_urban1k(tmp_path, "test", expected_count=None)
