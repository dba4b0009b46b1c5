"""COCO and Flickr30k adapters on hand-made files in Karpathy's format (dataset_*.json + images), and
recall with five captions per image checked by hand."""

from __future__ import annotations

import copy
import json

import pytest
import torch

from hnclip.data import coco, flickr30k, load_benchmark
from hnclip.data.adapter_utils import BenchmarkFormatError, CountMismatchError
from hnclip.evaluate import recall_at_k
from hnclip.rehearsal.publisher_files import write_karpathy


def _sentences(texts):
    return [{"raw": t, "tokens": t.lower().split(), "sentid": i} for i, t in enumerate(texts)]


def _coco_record(cocoid: int, split: str, texts, filepath="val2014"):
    return {"filepath": filepath, "filename": f"COCO_{filepath}_{cocoid:012d}.jpg", "split": split,
            "imgid": cocoid, "cocoid": cocoid, "sentences": _sentences(texts)}


FIVE = [f"caption {k} of the picture." for k in range(5)]
COCO_IMAGES = [
    _coco_record(11, "test", [f"a cat {k}" for k in range(5)]),
    _coco_record(12, "restval", FIVE),
    # seven sentences: the protocol keeps the first five
    _coco_record(13, "test", ["  a dog one  ", "a dog two", "a dog three", "a dog four", "a dog five",
                              "a dog six", "a dog seven"]),
    _coco_record(14, "val", FIVE),
    _coco_record(15, "train", FIVE, filepath="train2014"),
    _coco_record(16, "test", [f"a bird {k}" for k in range(5)]),
]


def _coco(tmp_path, images=COCO_IMAGES):
    return write_karpathy(tmp_path / "coco", "coco", copy.deepcopy(images))


def test_coco_test_is_the_test_records_five_captions_each_in_file_order(tmp_path):
    root = _coco(tmp_path)
    manifest = coco.load_coco(root, "test", expected_count=None)
    assert list(manifest.columns) == ["image_id", "image_path", "caption"]
    ids = ["COCO_val2014_000000000011", "COCO_val2014_000000000013", "COCO_val2014_000000000016"]
    assert list(manifest["image_id"]) == [i for i in ids for _ in range(5)]
    assert list(manifest["caption"][5:10]) == ["a dog one", "a dog two", "a dog three", "a dog four", "a dog five"]
    assert list(manifest["caption"][:5]) == [f"a cat {k}" for k in range(5)]
    assert manifest.attrs["extra_sentences_dropped"] == 2
    assert set(manifest["image_path"]) == {str((root / "val2014" / f"{i}.jpg").resolve()) for i in ids}
    # restval, val and train images are never in the test split
    assert not any(x in set(manifest["image_id"]) for x in ("COCO_val2014_000000000012", "COCO_val2014_000000000014"))


def test_load_benchmark_accepts_the_grouped_ids_and_checks_the_count_in_rows(tmp_path):
    root = _coco(tmp_path)
    assert len(load_benchmark("coco", root, "test", expected_count=15)) == 15
    with pytest.raises(CountMismatchError, match=r"3 images \(15 captions\).*2 images x 5 captions = 10"):
        load_benchmark("coco", root, "test", expected_count=10)
    with pytest.raises(CountMismatchError, match="5000 images x 5 captions = 25000"):
        load_benchmark("coco", root, "test")  # the protocol's count


def test_restval_and_train_are_refused_as_test_splits(tmp_path):
    root = _coco(tmp_path)
    with pytest.raises(ValueError, match="restval.*never a test split"):
        coco.load_coco(root, "restval", expected_count=None)
    with pytest.raises(ValueError, match="split 'train' is not part of the protocol"):
        coco.load_coco(root, "train", expected_count=None)


@pytest.mark.parametrize("drop, message", [
    ("split", r"images\[2\] \(COCO_val2014_000000000013.jpg\): missing field 'split'"),
    ("sentences", r"images\[2\] \(COCO_val2014_000000000013.jpg\): missing field 'sentences'"),
])
def test_a_record_without_split_or_sentences_is_an_error_naming_file_and_record(tmp_path, drop, message):
    images = copy.deepcopy(COCO_IMAGES)
    del images[2][drop]
    root = _coco(tmp_path, images)
    with pytest.raises(BenchmarkFormatError, match=message) as info:
        coco.load_coco(root, "test", expected_count=None)
    assert str(root / "dataset_coco.json") in str(info.value)


def test_fewer_than_five_sentences_is_an_error_naming_the_record(tmp_path):
    images = copy.deepcopy(COCO_IMAGES)
    images[5]["sentences"] = images[5]["sentences"][:4]
    with pytest.raises(BenchmarkFormatError, match=r"images\[5\] \(COCO_val2014_000000000016.jpg\): 4 sentence"):
        coco.load_coco(_coco(tmp_path, images), "test", expected_count=None)


def test_a_missing_image_is_an_error_naming_the_file_the_record_and_the_image(tmp_path):
    root = _coco(tmp_path)
    missing = root / "val2014" / "COCO_val2014_000000000016.jpg"
    missing.unlink()
    with pytest.raises(BenchmarkFormatError, match=r"dataset_coco.json images\[5\].*does not exist") as info:
        coco.load_coco(root, "test", expected_count=None)
    assert str(missing) in str(info.value)
    # a restval image may be absent: it is never read
    (root / "val2014" / "COCO_val2014_000000000012.jpg").unlink()
    write_karpathy(root, "coco", copy.deepcopy(COCO_IMAGES))
    (root / "val2014" / "COCO_val2014_000000000012.jpg").unlink()
    assert len(coco.load_coco(root, "test", expected_count=None)) == 15


def test_a_file_that_is_not_karpathys_is_refused(tmp_path):
    root = tmp_path / "coco"
    root.mkdir()
    (root / "dataset_coco.json").write_text(json.dumps({"annotations": []}))
    with pytest.raises(BenchmarkFormatError, match="has no 'images' list"):
        coco.load_coco(root, "test", expected_count=None)


def test_flickr30k_reads_images_from_flickr30k_images_without_a_filepath(tmp_path):
    images = [{"filename": f"{n}.jpg", "split": split, "imgid": i, "sentences": _sentences([f"{n} {k}" for k in range(5)])}
              for i, (n, split) in enumerate([(1000092795, "test"), (10002456, "train"), (1000268201, "test"),
                                              (1000344755, "val")])]
    root = write_karpathy(tmp_path / "f30k", "flickr30k", images, image_dir="flickr30k-images")
    manifest = load_benchmark("flickr30k", root, "test", expected_count=10)
    assert list(dict.fromkeys(manifest["image_id"])) == ["1000092795", "1000268201"]
    assert manifest["image_path"].iloc[5] == str((root / "flickr30k-images" / "1000268201.jpg").resolve())
    assert list(manifest["caption"][5:]) == [f"1000268201 {k}" for k in range(5)]
    assert flickr30k.EXPECTED_COUNTS == {"test": 5000} and coco.EXPECTED_COUNTS == {"test": 25000}


def test_recall_with_five_captions_per_image_matches_a_hand_count():
    # two images on the axes; image 0's captions: 0-4, image 1's: 5-9
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    # caption 2 and caption 7 point at the wrong image; every other caption at its own
    angles = [0.1, 0.2, 1.4, 0.3, 0.25, 1.45, 1.3, 0.15, 1.35, 1.5]
    texts = torch.tensor([[torch.cos(torch.tensor(a)), torch.sin(torch.tensor(a))] for a in angles])
    ids = torch.tensor([0] * 5 + [1] * 5)
    r = recall_at_k(images, texts, ks=(1, 5, 10), text_image_ids=ids)
    # text->image: 8 of 10 captions find their image first; both images are in every caption's top 5
    assert r["t2i_r1"] == pytest.approx(80.0) and r["t2i_r5"] == pytest.approx(100.0)
    # image->text: image 0's best caption is caption 0 (angle 0.1), but caption 7 (0.15) is not above it:
    # rank 0 -> hit at 1. Image 1's best own caption is caption 9 (1.5), nothing higher: hit at 1.
    assert r["i2t_r1"] == pytest.approx(100.0)
    # move image 0's captions away so that caption 7 (another image's) outranks all of them
    angles[:5] = [0.5, 0.6, 1.4, 0.7, 0.55]
    texts = torch.tensor([[torch.cos(torch.tensor(a)), torch.sin(torch.tensor(a))] for a in angles])
    r = recall_at_k(images, texts, ks=(1, 5, 10), text_image_ids=ids, return_ranks=True)
    assert r["ranks"]["i2t"] == [1, 0]  # only caption 7 (angle 0.15) is above image 0's best (0.5)
    assert r["i2t_r1"] == pytest.approx(50.0) and r["i2t_r5"] == pytest.approx(100.0)
