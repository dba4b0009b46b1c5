"""GOAL's segment product: area filter, boxes, store geometry and matching on hand-made masks; SAM once.

The segment logic is checked on scenes whose masks are known (a tiny random SAM finds meaningless
segments); the SAM call path runs once with a randomly initialised tiny SAM on a 64 px image.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image
from test_preprocess_support import build_products, scene_boxes

from hnclip.data.image_store import resize_center_crop, to_model_input
from hnclip.models import load_model, tokenize
from hnclip.models.tokenizer import _tokenizer
from hnclip.preprocess.segments import (
    WHOLE_IMAGE,
    SegmentIndex,
    box_in_store,
    build_segments,
    crop_segment,
    filter_segments,
    load_mask_generator,
    mask_box,
    match_sentences,
    save_random_sam,
)
from hnclip.preprocess.sentences import split_sentences


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    return build_products(tmp_path_factory.mktemp("segments"), n=6)


# ------------------------------------------------------------------------------------------ pure parts
def test_mask_box_is_tight_with_exclusive_ends():
    mask = np.zeros((10, 12), dtype=bool)
    mask[2, 3] = mask[6, 9] = True
    assert mask_box(mask) == (3, 2, 10, 7)
    assert mask_box(np.zeros((4, 4), dtype=bool)) is None


def test_area_filter_bounds_are_inclusive():
    def mask_with(n_pixels):
        mask = np.zeros(100, dtype=bool)
        mask[:n_pixels] = True
        return mask.reshape(10, 10)

    kept = filter_segments([mask_with(n) for n in (0, 1, 2, 80, 81)], min_area_ratio=0.01, max_area_ratio=0.8)
    assert [round(s.area_ratio, 2) for s in kept] == [0.01, 0.02, 0.8]
    assert kept[2].box == (0, 0, 10, 8)
    with pytest.raises(ValueError, match="min_area_ratio"):
        filter_segments([], 0.5, 0.1)


@pytest.mark.parametrize("size, box, store, expected", [
    # landscape 100x60 -> 50x30, centre crop offset 10 px: x -> x / 2 - 10, y -> y / 2
    ((100, 60), (20, 6, 70, 54), 30, (0.0, 0.1, 25 / 30, 0.9)),
    ((100, 60), (0, 0, 10, 60), 30, None),  # entirely left of the crop
    ((100, 60), (70, 0, 100, 30), 30, (25 / 30, 0.0, 1.0, 0.5)),  # clipped at the right edge
    # portrait 60x100: the same, transposed
    ((60, 100), (6, 20, 54, 70), 30, (0.1, 0.0, 0.9, 25 / 30)),
    # 63x40 -> 31x20 (int(31.5): truncation), offset round(5.5) = 6
    ((63, 40), (30, 0, 63, 40), 20, ((30 * 31 / 63 - 6) / 20, 0.0, 1.0, 1.0)),
    # 58x40 -> 29x20, offset round(4.5) = 4: half to even, not 5
    ((58, 40), (20, 0, 58, 40), 20, (0.3, 0.0, 1.0, 1.0)),
])
def test_box_in_store_follows_resize_and_centre_crop(size, box, store, expected):
    got = box_in_store(box, *size, store)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_box_in_store_agrees_with_rendered_store_pixels():
    image = Image.new("RGB", (120, 70), (0, 0, 0))
    image.paste((255, 255, 255), (40, 10, 100, 50))
    stored = np.asarray(resize_center_crop(image, 35, "bilinear"))[..., 0]
    ys, xs = np.nonzero(stored > 127)
    fx1, fy1, fx2, fy2 = box_in_store((40, 10, 100, 50), 120, 70, 35)
    assert abs(xs.min() - fx1 * 35) <= 1 and abs(xs.max() + 1 - fx2 * 35) <= 1
    assert abs(ys.min() - fy1 * 35) <= 1 and abs(ys.max() + 1 - fy2 * 35) <= 1


def test_matching_drops_sentences_that_prefer_the_whole_image():
    similarity = np.array([[0.9, 0.1, 0.2, 0.5],   # whole image
                           [0.1, 0.6, 0.3, 0.5],
                           [0.2, 0.3, 0.7, 0.1]])
    pairs, how = match_sentences(similarity)
    # sentence 0 goes to the whole image and is dropped; sentence 3 ties whole image vs segment 1: lower index wins
    assert how == "segments"
    assert pairs == [(2, 2, 0.7), (1, 1, 0.6)]


def test_matching_rematches_among_segments_when_every_sentence_prefers_the_whole_image():
    similarity = np.array([[0.9, 0.8], [0.1, 0.5], [0.3, 0.2]])
    assert match_sentences(similarity) == ([(1, 1, 0.5), (0, 2, 0.3)], "rematched")


def test_matching_without_segments_pairs_every_sentence_with_the_whole_image():
    assert match_sentences(np.array([[0.2, 0.4, 0.4]])) == ([(1, 0, 0.4), (2, 0, 0.4), (0, 0, 0.2)], "whole_image")


# ------------------------------------------------------------------------------------------ the product
def test_product_records_match_independent_recomputation(products):
    manifest, _, model_dir, segments_dir, _ = products
    index = SegmentIndex(segments_dir)
    model = load_model(model_dir).eval()
    assert index.image_size == 32 and len(index) == len(manifest)
    for i, (image_id, path, caption) in enumerate(zip(manifest["image_id"], manifest["image_path"],
                                                      manifest["caption"], strict=True)):
        record = index.record(image_id)
        image = Image.open(path).convert("RGB")
        assert [tuple(s["box"]) for s in record["segments"]] == scene_boxes(i, image.width, image.height)
        boxes = [(0, 0, image.width, image.height)] + [tuple(s["box"]) for s in record["segments"]]
        candidates = np.stack([np.asarray(resize_center_crop(image.crop(b), 32)) for b in boxes])
        sentences = split_sentences(caption)
        with torch.no_grad():
            crops_f = model.encode_image(to_model_input(candidates, model.image_mean, model.image_std)).double()
            sentences_f = model.encode_text(tokenize([s.text for s in sentences], 77)).double()
        cosine = (crops_f @ sentences_f.T).numpy()  # [candidate, sentence]
        ids = tokenize(caption, 77)[0].tolist()
        scores = [p["score"] for p in record["pairs"]]
        assert scores == sorted(scores, reverse=True) and 1 <= len(scores) <= 3
        for pair in record["pairs"]:
            start, end = pair["char_span"]
            assert caption[start:end] == pair["sentence"]
            j = [s.text for s in sentences].index(pair["sentence"])
            candidate = 0 if pair["segment"] == WHOLE_IMAGE else pair["segment"] + 1
            assert pair["score"] == pytest.approx(cosine[candidate, j], abs=1e-5)
            if index.stats["images_rematched"] == 0:  # the normal rule: the argmax, never the whole image
                assert candidate != 0 and cosine[candidate, j] >= cosine[:, j].max() - 1e-6
            token_start, token_end = pair["token_span"]
            assert ids[token_start:token_end] == _tokenizer().encode(pair["sentence"])
            np.testing.assert_array_equal(index.crops[pair["crop"]], candidates[candidate])
            assert pair["box_store"] == pytest.approx(box_in_store(boxes[candidate], image.width, image.height, 32))


def test_index_counts_and_crops_are_consistent(products):
    segments_dir = products[3]
    index = json.loads((segments_dir / "index.json").read_text())
    records = [json.loads(line) for line in (segments_dir / "segments.jsonl").read_text().splitlines()]
    assert index["stats"]["pairs"] == sum(len(r["pairs"]) for r in records)
    assert index["stats"]["images_without_segments"] == 0
    rows = sorted({p["crop"] for r in records for p in r["pairs"]})
    assert rows == list(range(index["crops"]))  # every crop row is used, none is stored twice per image


def test_pairs_sharing_a_segment_share_its_crop(products):
    index = SegmentIndex(products[3])
    for record in index.records.values():
        by_segment = {}
        for pair in record["pairs"]:
            assert by_segment.setdefault(pair["segment"], pair["crop"]) == pair["crop"]


def test_missing_image_and_malformed_products_are_named(products, tmp_path):
    segments_dir = products[3]
    with pytest.raises(KeyError, match="'absent'.*segments.jsonl"):
        SegmentIndex(segments_dir).record("absent")
    copy = tmp_path / "segments"
    shutil.copytree(segments_dir, copy)
    lines = (copy / "segments.jsonl").read_text().splitlines()
    broken = json.loads(lines[1])
    broken["pairs"][0]["crop"] = 10_000
    lines[1] = json.dumps(broken)
    (copy / "segments.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="segments.jsonl, line 2.*crop row 10000"):
        SegmentIndex(copy / "index.json")
    (copy / "index.json").unlink()
    with pytest.raises(FileNotFoundError, match="no index.json"):
        SegmentIndex(copy)


def test_crop_segment_uses_the_store_geometry():
    image = Image.fromarray(np.random.default_rng(0).integers(0, 255, (50, 70, 3), dtype=np.uint8))
    np.testing.assert_array_equal(crop_segment(image, (5, 5, 45, 25), 16),
                                  np.asarray(resize_center_crop(image.crop((5, 5, 45, 25)), 16)))


def test_images_without_segments_pair_every_sentence_with_the_whole_image(products, tmp_path):
    manifest, _, model_dir, _, _ = products
    index = build_segments(manifest.iloc[:2], model_dir, tmp_path / "none", device="cpu",
                           mask_generator=lambda image, image_id: [])
    assert index["stats"]["images_without_segments"] == 2
    record = SegmentIndex(tmp_path / "none").record(manifest["image_id"][0])
    assert {p["segment"] for p in record["pairs"]} == {WHOLE_IMAGE} and record["segments"] == []
    assert record["pairs"][0]["box_store"] == pytest.approx((0.0, 0.0, 1.0, 1.0))


# ------------------------------------------------------------------------------------------ SAM, once
def test_tiny_random_sam_runs_through_the_pipeline_and_the_product(products, tmp_path):
    manifest, _, model_dir, _, _ = products
    save_random_sam(tmp_path / "sam", image_size=64)
    generate = load_mask_generator(tmp_path / "sam", points_per_batch=16, points_per_crop=4,
                                   pred_iou_thresh=0.0, stability_score_thresh=0.0)
    image = Image.fromarray(np.random.default_rng(1).integers(0, 255, (64, 64, 3), dtype=np.uint8))
    masks = generate(image)
    assert all(m.shape == (64, 64) and m.dtype == bool for m in masks)
    index = build_segments(manifest.iloc[:1], model_dir, tmp_path / "out", sam_dir=tmp_path / "sam", device="cpu",
                           sam_kwargs={"points_per_batch": 16, "points_per_crop": 4, "pred_iou_thresh": 0.0,
                                       "stability_score_thresh": 0.0}, min_area_ratio=0.0, max_area_ratio=1.0)
    assert index["count"] == 1 and index["stats"]["pairs"] >= 1
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_mask_generator(tmp_path / "no_sam")


# ------------------------------------------------------------------------------------------ oracle
def test_synthetic_oracle_boxes_enclose_the_rendered_objects(tmp_path):
    from hnclip.data.synthetic import STYLES, generate_synthetic
    from hnclip.preprocess.oracle import synthetic_mask_generator

    generate_synthetic(tmp_path, "synthetic", n_train=3, n_test=1, image_size=64, seed=3)
    generate = synthetic_mask_generator(tmp_path)
    for line in (tmp_path / "captions.jsonl").read_text().splitlines():
        record = json.loads(line)
        image = Image.open(tmp_path / "images" / f"{record['image_id']}.png").convert("RGB")
        masks = generate(image, record["image_id"])
        assert len(masks) == len(record["objects"])
        background = np.array(STYLES["synthetic"].backgrounds[record["background"]][1])
        drawn = np.abs(np.asarray(image, dtype=int) - background).sum(-1) > 30
        union = np.any(masks, axis=0)
        assert not (drawn & ~union).any()  # every drawn pixel lies in some object's box
        for mask in masks:
            assert (drawn & mask).any() and 0.01 <= mask.mean() <= 0.8
    with pytest.raises(KeyError, match="'nope'"):
        generate(image, "nope")


def test_object_sentences_are_the_captions_object_sentences():
    from hnclip.data.synthetic.captions import describe_scene, object_sentences
    from hnclip.data.synthetic.scenes import Scene, SceneObject

    hexagon = SceneObject(shape="hexagon", colour="blue", size="large", pattern="dotted", cell=4)
    square = SceneObject(shape="square", colour="black", size="medium", pattern="striped", cell=5)
    circle = SceneObject(shape="circle", colour="red", size="small", pattern="outlined", cell=0)
    triangle = SceneObject(shape="triangle", colour="yellow", size="small", pattern="solid", cell=8)
    scene = Scene("synthetic", "pale blue", (hexagon, square, circle, triangle), ((0, 1),), 0)
    own = object_sentences(scene)
    assert own[:2] == ["In the center there is a large dotted blue hexagon.",
                       "In the middle right there is a medium striped black square."]
    caption = describe_scene(scene)
    assert caption.startswith(
        "A synthetic scene on a pale blue background with four objects arranged on a three by three grid. "
        "In the center there is a large dotted blue hexagon. In the middle right there is a medium striped "
        "black square. In the top left corner there is a small ")
    assert caption.endswith(" yellow triangle. The blue hexagon is to the left of the black square.")
    assert [s.text for s in split_sentences(caption)][1:5] == own


def test_oracle_matcher_pairs_each_object_crop_with_its_own_sentence(tmp_path):
    """Every kept pair is an object's box with that object's own sentence, scored by the backbone's cosine of
    that crop and sentence (recomputed here), best first; the relation and scene sentences get no pair."""
    from test_preprocess_support import save_micro_model

    from hnclip.data.synthetic import generate_synthetic
    from hnclip.data.synthetic.captions import object_sentences
    from hnclip.data.synthetic.scenes import scene_from_record
    from hnclip.preprocess.oracle import object_boxes, synthetic_mask_generator, synthetic_sentence_matcher

    generate_synthetic(tmp_path / "bench", "synthetic", n_train=4, n_test=1, image_size=64, seed=3)
    records = [json.loads(line) for line in (tmp_path / "bench" / "captions.jsonl").read_text().splitlines()]
    train = [r for r in records if r["split"] == "train"]
    manifest = pd.DataFrame({"image_id": [r["image_id"] for r in train], "caption": [r["caption"] for r in train],
                             "image_path": [str(tmp_path / "bench" / "images" / f"{r['image_id']}.png") for r in train]})
    model_dir = tmp_path / "model"
    save_micro_model(model_dir)
    build_segments(manifest, model_dir, tmp_path / "seg", max_pairs=10, device="cpu",
                   mask_generator=synthetic_mask_generator(tmp_path / "bench"),
                   sentence_matcher=synthetic_sentence_matcher(tmp_path / "bench"))
    index, model = SegmentIndex(tmp_path / "seg"), load_model(model_dir).eval()
    assert json.loads((tmp_path / "seg" / "index.json").read_text())["settings"]["matcher"] == "named"
    for record in train:
        image = Image.open(tmp_path / "bench" / "images" / f"{record['image_id']}.png").convert("RGB")
        boxes = object_boxes(record["objects"], image.width)
        own = object_sentences(scene_from_record(record))
        pairs = index.record(record["image_id"])["pairs"]
        assert len(pairs) == len(record["objects"])  # one per object, nothing to the whole image
        assert sorted(own.index(p["sentence"]) for p in pairs) == list(range(len(own)))
        for pair in pairs:
            box = boxes[own.index(pair["sentence"])]
            assert tuple(index.record(record["image_id"])["segments"][pair["segment"]]["box"]) == box
            crop = np.asarray(resize_center_crop(image.crop(box), index.image_size))[None]
            with torch.no_grad():
                a = model.encode_image(to_model_input(crop, model.image_mean, model.image_std)).double()
                b = model.encode_text(tokenize([pair["sentence"]], 77)).double()
            assert pair["score"] == pytest.approx(float(a[0] @ b[0]), abs=1e-5)
        assert [p["score"] for p in pairs] == sorted((p["score"] for p in pairs), reverse=True)


def test_oracle_matcher_refuses_a_box_it_names_no_sentence_for():
    from hnclip.preprocess.segments import Segment, named_pairs

    similarity = np.array([[0.1, 0.2], [0.3, 0.4]])
    with pytest.raises(ValueError, match="'x'.*segment box \\(1, 1, 5, 5\\).*segmenter oracle"):
        named_pairs("x", [Segment((1, 1, 5, 5), 0.1)], ["A.", "B."], similarity, {})
    assert named_pairs("x", [Segment((1, 1, 5, 5), 0.1)], ["A.", "B."], similarity, {(1, 1, 5, 5): "B."}) == (
        [(1, 1, 0.4)], "named")
