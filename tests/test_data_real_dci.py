"""DCI adapter on fixtures in DCI's exact layout (densely_captioned_images/annotations/*.json + photos/) and
GOAL's exact split-file format (datasets/DCI_test.json: an indented JSON list of {"filename", "caption"})."""

from __future__ import annotations

from pathlib import Path

import pytest

from hnclip.data import dci, load_benchmark
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.rehearsal.publisher_files import write_dci, write_goal_split

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
    return write_dci(root, annotations)


# GOAL's filenames are paths on its authors' machine; only the last component names the photo.
GOAL_PREFIX = "../DCI/dataset/densely_captioned_images/dataset/scripts/densely_captioned_images/photos/"
# five annotated images; GOAL's list names two of them
SPLIT_ANNOTATIONS = {
    **ANNOTATIONS,
    "3-data.json": {"image": "sa_1543990.jpg", "short_caption": "A warehouse.", "extra_caption": "Boxes."},
    "11-data.json": {"image": "sa_1543978.jpg", "short_caption": "A sculpture.", "extra_caption": "Balls."},
}
GOAL_TEST = [
    {
        "filename": GOAL_PREFIX + "sa_1543977.jpg",
        "caption": "Statues stand around it; a large building on its left.",
    },
    {"filename": GOAL_PREFIX + "sa_1543990.jpg", "caption": "Boxes."},
]


def _write_goal(path: Path, records=GOAL_TEST) -> Path:
    return write_goal_split(path, records)  # GOAL's file is indented by 4


def _write_split(root: Path, records=GOAL_TEST) -> Path:
    _write(root, SPLIT_ANNOTATIONS)
    _write_goal(root / "DCI_test.json", records)
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
    monkeypatch.setitem(dci.EXPECTED_COUNTS["all"], "test", 3)
    assert len(load_benchmark("dci", _write(tmp_path), "test")) == 3


def test_protocol_counts_are_all_7805_or_goals_1999_test_and_the_rest_train():
    assert dci.EXPECTED_COUNTS == {"all": {"test": 7805}, "goal": {"train": 5806, "test": 1999}}
    assert 7805 - 1999 == 5806


def test_count_differing_from_the_protocol_fails_with_both_numbers(tmp_path):
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 7805"):
        dci.load_dci(_write(tmp_path), "test")


def test_goal_count_differing_from_the_protocol_fails_naming_the_split_file(tmp_path):
    with pytest.raises(
        CountMismatchError, match=r"\(test\) under .*DCI_test\.json: found 2 records, the protocol lists 1999"
    ):
        dci.load_dci(_write_split(tmp_path), "test")
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 5806"):
        dci.load_dci(tmp_path, "train")


def test_train_split_without_goals_file_fails_naming_the_file_and_where_to_get_it(tmp_path):
    _write(tmp_path)
    with pytest.raises(
        FileNotFoundError, match=r"DCI_test\.json is not in .*github\.com/PerceptualAI-Lab/GOAL"
    ):
        dci.load_dci(tmp_path, "train", expected_count=None)
    with pytest.raises(FileNotFoundError, match=r"DCI_test\.json is not in"):
        load_benchmark("dci", tmp_path, "train")


def test_explicit_goal_protocol_without_the_file_fails_for_test_too(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"DCI_test\.json is not in"):
        dci.load_dci(_write(tmp_path), "test", protocol="goal", expected_count=None)


def test_all_protocol_has_no_train_split(tmp_path):
    with pytest.raises(ValueError, match="protocol 'all' has no train split"):
        dci.load_dci(_write_split(tmp_path), "train", protocol="all", expected_count=None)


def test_unknown_protocol_or_split_is_refused_naming_it(tmp_path):
    _write(tmp_path)
    with pytest.raises(ValueError, match="unknown protocol 'lotlip'"):
        dci.load_dci(tmp_path, "test", protocol="lotlip", expected_count=None)
    with pytest.raises(ValueError, match="unknown split 'val'"):
        dci.load_dci(tmp_path, "val", expected_count=None)


def test_goal_test_is_the_listed_photos_and_train_all_other_annotated_ones(tmp_path):
    _write_split(tmp_path)
    test = dci.load_dci(tmp_path, "test", expected_count=None)
    train = dci.load_dci(tmp_path, "train", expected_count=None)
    # sorted annotation order: 10- < 11- < 2- < 3- < 7-
    assert list(test["image_id"]) == ["sa_1543977", "sa_1543990"]
    assert list(train["image_id"]) == ["sa_1543972", "sa_1543978", "sa_1543980"]
    assert test.attrs["protocol"] == train.attrs["protocol"] == "goal"


def test_goal_split_keeps_dcis_extended_caption_not_goals_caption_field(tmp_path):
    test = dci.load_dci(_write_split(tmp_path), "test", expected_count=None)
    assert list(test["caption"]) == [
        "A stone fountain.\nStatues stand around it; a large building on its left.",
        "A warehouse.\nBoxes.",
    ]


def test_auto_protocol_tests_on_every_image_when_goals_file_is_absent(tmp_path):
    _write(tmp_path, SPLIT_ANNOTATIONS)
    auto = dci.load_dci(tmp_path, "test", expected_count=None)
    assert len(auto) == 5 and auto.attrs["protocol"] == "all"
    _write_goal(tmp_path / "DCI_test.json")
    assert len(dci.load_dci(tmp_path, "test", protocol="all", expected_count=None)) == 5
    assert len(dci.load_dci(tmp_path, "test", expected_count=None)) == 2


def test_registry_default_follows_goals_split_when_the_file_is_present(tmp_path, monkeypatch):
    monkeypatch.setitem(dci.EXPECTED_COUNTS["goal"], "train", 3)
    monkeypatch.setitem(dci.EXPECTED_COUNTS["goal"], "test", 2)
    _write_split(tmp_path)
    assert list(load_benchmark("dci", tmp_path, "train")["image_id"]) == [
        "sa_1543972",
        "sa_1543978",
        "sa_1543980",
    ]
    assert list(load_benchmark("dci", tmp_path, "test")["image_id"]) == ["sa_1543977", "sa_1543990"]


def test_goals_file_may_sit_in_the_archive_top_folder_and_root_may_be_that_folder(tmp_path):
    _write(tmp_path, SPLIT_ANNOTATIONS)
    _write_goal(tmp_path / "densely_captioned_images" / "DCI_test.json")
    for root in (tmp_path, tmp_path / "densely_captioned_images"):
        assert list(dci.load_dci(root, "test", expected_count=None)["image_id"]) == [
            "sa_1543977",
            "sa_1543990",
        ]


def test_two_copies_of_goals_file_are_an_error_naming_both(tmp_path):
    _write_split(tmp_path)
    _write_goal(tmp_path / "densely_captioned_images" / "DCI_test.json", GOAL_TEST[:1])
    with pytest.raises(
        ValueError, match=r"present twice .*DCI_test\.json and .*densely_captioned_images/DCI_test\.json"
    ):
        dci.load_dci(tmp_path, "test", expected_count=None)


def test_goal_listed_photo_without_annotation_is_an_error_naming_it(tmp_path):
    _write_split(tmp_path, [*GOAL_TEST, {"filename": GOAL_PREFIX + "sa_9999999.jpg", "caption": "x"}])
    with pytest.raises(
        BenchmarkFormatError, match=r"DCI_test\.json lists 1 photo\(s\) .* e\.g\. 'sa_9999999\.jpg'"
    ):
        dci.load_dci(tmp_path, "train", expected_count=None)


def test_goal_file_listing_a_photo_twice_names_both_records(tmp_path):
    _write_split(tmp_path, [*GOAL_TEST, {"filename": "elsewhere/sa_1543977.jpg", "caption": "again"}])
    with pytest.raises(
        BenchmarkFormatError, match=r"lists photo 'sa_1543977\.jpg' twice \(records 0 and 2\)"
    ):
        dci.load_dci(tmp_path, "test", expected_count=None)


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ({"filename": "sa_1543977.jpg"}, r"DCI_test\.json is a JSON dict, not a list"),
        ([GOAL_TEST[0], "sa_1543990.jpg"], r"DCI_test\.json record 1 is a JSON str, not an object"),
        ([GOAL_TEST[0], {"caption": "Boxes."}], r"DCI_test\.json record 1: missing field 'filename'"),
        ([GOAL_TEST[0], {"filename": 7, "caption": ""}], r"record 1: field 'filename' is int 7"),
        ([], r"DCI_test\.json lists no image"),
    ],
)
def test_malformed_goal_file_names_the_file_and_record(tmp_path, records, message):
    _write_split(tmp_path, records)
    with pytest.raises(BenchmarkFormatError, match=message):
        dci.load_dci(tmp_path, "test", expected_count=None)


def test_goal_file_that_is_not_json_names_the_file(tmp_path):
    _write_split(tmp_path)
    (tmp_path / "DCI_test.json").write_text('[\n    {\n        "filename": ')
    with pytest.raises(BenchmarkFormatError, match=r"DCI_test\.json is not valid JSON"):
        dci.load_dci(tmp_path, "train", expected_count=None)


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


def test_all_images_variant_tests_every_image_even_when_goals_file_is_present(tmp_path, monkeypatch):
    # GOAL's file present: "test" follows GOAL (2 images), "test_all" still tests every annotated image
    _write_split(tmp_path)
    monkeypatch.setitem(dci.EXPECTED_COUNTS["all"], "test", 5)
    monkeypatch.setitem(dci.EXPECTED_COUNTS["goal"], "test", 2)
    every = load_benchmark("dci", tmp_path, "test_all")
    assert len(every) == 5 and every.attrs["protocol"] == "all"
    assert list(load_benchmark("dci", tmp_path, "test")["image_id"]) == ["sa_1543977", "sa_1543990"]
