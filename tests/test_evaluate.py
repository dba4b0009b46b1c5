"""Recall@K against a brute-force float64 loop; encoding and the evaluation record on a micro model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from test_train_support import make_captions, write_store

from hnclip.evaluate import evaluate_checkpoint, recall_at_k


def brute_force_recall(images: np.ndarray, texts: np.ndarray, text_image_ids: np.ndarray, ks) -> dict:
    """One query at a time: rank = number of gallery items with a strictly higher float64 score."""
    images, texts = images.astype(np.float64), texts.astype(np.float64)
    result = {}
    i2t_ranks = []
    for i in range(len(images)):
        scores = [float(np.dot(images[i], t)) for t in texts]
        own = [scores[t] for t in range(len(texts)) if text_image_ids[t] == i]
        i2t_ranks.append(min(sum(s > o for s in scores) for o in own))
    t2i_ranks = []
    for t in range(len(texts)):
        scores = [float(np.dot(texts[t], im)) for im in images]
        target = scores[text_image_ids[t]]
        t2i_ranks.append(sum(s > target for s in scores))
    for k in ks:
        result[f"i2t_r{k}"] = 100.0 * sum(r < k for r in i2t_ranks) / len(i2t_ranks)
        result[f"t2i_r{k}"] = 100.0 * sum(r < k for r in t2i_ranks) / len(t2i_ranks)
    return result


def normalised(rng, n, d):
    x = rng.normal(size=(n, d))
    return x / np.linalg.norm(x, axis=1, keepdims=True)


@pytest.mark.parametrize("chunk_size", [1, 7, 1000])
def test_recall_matches_brute_force_with_several_captions_per_image(chunk_size):
    rng = np.random.default_rng(3)
    n_images, d = 23, 8
    text_image_ids = np.concatenate([np.arange(n_images), rng.integers(0, n_images, size=31)])
    rng.shuffle(text_image_ids)
    images = normalised(rng, n_images, d)
    # captions near their image, so recall is neither 0 nor 100
    texts = images[text_image_ids] + 0.9 * rng.normal(size=(len(text_image_ids), d))
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    ks = (1, 3, 5, 10)
    got = recall_at_k(torch.from_numpy(images), torch.from_numpy(texts), ks,
                      torch.from_numpy(text_image_ids), chunk_size=chunk_size)
    expected = brute_force_recall(images, texts, text_image_ids, ks)
    assert got.keys() == expected.keys()
    for key in expected:
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key
    assert 0 < expected["i2t_r1"] < 100 and 0 < expected["t2i_r1"] < 100


def test_recall_one_caption_per_image_by_default_float32():
    rng = np.random.default_rng(5)
    images = normalised(rng, 40, 16).astype(np.float32)
    texts = images + 1.2 * rng.normal(size=images.shape).astype(np.float32)
    texts /= np.linalg.norm(texts, axis=1, keepdims=True)
    got = recall_at_k(torch.from_numpy(images), torch.from_numpy(texts), chunk_size=9)
    expected = brute_force_recall(images, texts, np.arange(40), (1, 5, 10))
    for key in expected:
        assert got[key] == pytest.approx(expected[key], abs=1e-9), key


def test_recall_hand_checked_case_with_ties():
    # image 0's captions: t0 (score 0.2), t2 (0.9); t1 belongs to image 1 and scores 0.9 for image 0 too
    images = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    texts = torch.tensor([[0.2, 0.98], [0.9, 0.436], [0.9, -0.436]])
    ids = torch.tensor([0, 1, 0])
    got = recall_at_k(images, texts, ks=(1, 2), text_image_ids=ids)
    # i2t: image 0 best own is t2 at 0.9, tied with t1: strictly higher = 0 -> hit@1 (ties are optimistic).
    # image 1 scores 0.98 (t0), 0.436 (t1, own), -0.436: rank 1 -> miss@1, hit@2.
    assert got["i2t_r1"] == 50.0 and got["i2t_r2"] == 100.0
    # t2i: t0 (own image 0: 0.2 vs image 1: 0.98) rank 1; t1 (own image 1: 0.436 vs 0.9) rank 1; t2 rank 0
    assert got["t2i_r1"] == pytest.approx(100 / 3) and got["t2i_r2"] == 100.0


def test_recall_rejects_an_image_without_captions():
    with pytest.raises(ValueError, match="image 2 has no caption"):
        recall_at_k(torch.eye(3), torch.eye(3)[:2], text_image_ids=torch.tensor([0, 1]))


def test_recall_rejects_mismatched_counts_without_ids():
    with pytest.raises(ValueError, match="pass text_image_ids"):
        recall_at_k(torch.eye(3), torch.eye(3)[:2])


def test_evaluate_checkpoint_writes_the_record_and_matches_forward_features(tmp_path):
    from hnclip.data.manifest import write_manifest
    from hnclip.models import create_model, save_model

    model = create_model("micro", seed=1)
    model_dir = save_model(model, tmp_path / "model")
    image_ids = [f"im{i}" for i in range(12)]
    store_dir = write_store(tmp_path / "store", image_ids, seed=2)
    # 12 images, 18 captions: the first 6 images have a second caption
    rows = image_ids + image_ids[:6]
    captions = make_captions(len(rows), seed=4)
    manifest = pd.DataFrame({"image_id": rows, "image_path": [f"/x/{i}.jpg" for i in rows], "caption": captions})
    write_manifest(manifest, tmp_path / "test.csv")
    out = tmp_path / "eval" / "result.json"
    run_info = {"train_set": "synthetic", "method": "hnclip", "gamma": 0.5, "fraction": 1.0, "seed": 0}

    result = evaluate_checkpoint(model_dir, tmp_path / "test.csv", store_dir, out, run_info, "synthetic",
                                 batch_size=5, device="cpu")

    written = json.loads(out.read_text())
    assert written == json.loads(json.dumps(result))
    assert written["run"] == run_info and written["eval_benchmark"] == "synthetic" and written["split"] == "test"
    assert written["n_images"] == 12 and written["n_texts"] == 18 and written["wall_time_s"] >= 0
    # reference: the model's forward on the whole split at once, scored by the brute-force loop
    from hnclip.data.image_store import to_model_input

    pixels = np.load(store_dir / "images.npy")
    with torch.no_grad():
        model.eval()
        feats = model(to_model_input(pixels, model.image_mean, model.image_std), model.tokenize(captions))
    ids = np.array([int(r[2:]) for r in rows])
    expected = brute_force_recall(feats["image_features"].numpy(), feats["text_features"].numpy(), ids, (1, 5, 10))
    assert written["metrics"] == pytest.approx(expected, abs=1e-9)


def test_evaluation_records_goals_cut_offs_from_the_same_ranking_and_caption_length(tmp_path):
    from hnclip.cli import build_parser
    from hnclip.data.manifest import write_manifest
    from hnclip.evaluate import GOAL_KS, PAPER_KS, RECORDED_KS
    from hnclip.models import create_model, save_model

    assert RECORDED_KS == (1, 5, 10, 25, 50) and set(PAPER_KS) | set(GOAL_KS) == set(RECORDED_KS)
    args = build_parser().parse_args(["evaluate", "--model", "m", "--manifest", "x", "--images", "i",
                                      "--eval-benchmark", "b", "--batch-size", "128", "--out", "o"])
    assert tuple(args.ks) == RECORDED_KS and args.split == "test"  # what the workflow's rules record
    model_dir = save_model(create_model("micro", seed=1), tmp_path / "model")
    image_ids = [f"im{i}" for i in range(30)]
    store_dir = write_store(tmp_path / "store", image_ids, seed=2)
    captions = make_captions(30, seed=3)
    captions[0] = "one two three"
    write_manifest(pd.DataFrame({"image_id": image_ids, "image_path": "/x", "caption": captions}), tmp_path / "t.csv")
    out = tmp_path / "r.json"
    with_goal = evaluate_checkpoint(model_dir, tmp_path / "t.csv", store_dir, out, {}, "b", device="cpu",
                                    ks=RECORDED_KS, split="test_goal")
    paper = evaluate_checkpoint(model_dir, tmp_path / "t.csv", store_dir, tmp_path / "p.json", {}, "b", device="cpu")
    assert with_goal["split"] == "test_goal" and with_goal["ks"] == [1, 5, 10, 25, 50]
    assert set(paper["metrics"]) == {f"{d}_r{k}" for d in ("i2t", "t2i") for k in (1, 5, 10)}
    assert {k: with_goal["metrics"][k] for k in paper["metrics"]} == paper["metrics"]
    assert with_goal["metrics"]["t2i_r50"] == 100.0  # 30 images: every target ranks within 50
    words = [len(c.split()) for c in captions]
    assert with_goal["mean_caption_words"] == pytest.approx(sum(words) / 30)


def test_evaluation_record_counts_the_test_captions_the_text_tower_cut_and_the_sizes_show_them(tmp_path):
    """A test caption longer than the text tower's positions is scored on its first tokens only, without an
    error: the record counts them (against open_clip's own BPE, SOT and EOT added) and the sizes line of a
    report on your own data says how many were cut."""
    from open_clip.tokenizer import SimpleTokenizer

    from hnclip.analysis.data_sizes import data_sizes
    from hnclip.data.manifest import write_manifest
    from hnclip.models import create_model, save_model

    model_dir = save_model(create_model("micro", seed=1), tmp_path / "model")
    image_ids = [f"im{i}" for i in range(6)]
    store_dir = write_store(tmp_path / "store", image_ids, seed=2)
    captions = make_captions(6, seed=4)
    captions[1] = " ".join(["red cube left of the ball"] * 20)  # ~100 tokens
    captions[4] = " ".join(["a"] * 75)  # 75 tokens + SOT + EOT = 77: fits exactly
    captions[5] = " ".join(["a"] * 76)  # 78 positions: cut
    write_manifest(pd.DataFrame({"image_id": image_ids, "image_path": [f"/x/{i}.jpg" for i in image_ids],
                                 "caption": captions}), tmp_path / "test.csv")
    record = evaluate_checkpoint(model_dir, tmp_path / "test.csv", store_dir, tmp_path / "r.json", {}, "my_captions",
                                 device="cpu")
    bpe = SimpleTokenizer()
    expected = sum(len(bpe.encode(c)) + 2 > 77 for c in captions)
    assert expected == 2
    truncated = json.loads((tmp_path / "r.json").read_text())["captions_truncated"]
    assert (truncated["count"], truncated["captions"], truncated["context_length"]) == (expected, 6, 77)
    cells = [{"eval_benchmark": "my_captions", "group": "My captions"}]
    assert data_sizes(cells, [record]) == "My captions: 6 test images, 2 test captions cut at 77 text positions"
