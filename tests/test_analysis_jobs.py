"""The model-facing glue of ``hnclip geometry`` and ``hnclip gallery`` on a micro model and a 6-image split."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from hnclip.analysis.gallery_job import choose_runs, run_gallery
from hnclip.analysis.geometry import caption_geometry
from hnclip.analysis.geometry_job import encode_captions, run_geometry
from hnclip.data.image_store import build_store
from hnclip.data.manifest import write_manifest
from hnclip.models import create_model, load_model, save_model

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
CAPTIONS = [f"a {c} square above a small {s} circle" for c, s in
            (("red", "blue"), ("green", "red"), ("blue", "green"), ("red", "red"), ("yellow", "blue"), ("green", "green"))]


@pytest.fixture
def split(tmp_path):
    rows = []
    for i, caption in enumerate(CAPTIONS):
        path = tmp_path / "raw" / f"{i}.png"
        path.parent.mkdir(exist_ok=True)
        Image.new("RGB", (40, 40), (40 * i, 255 - 40 * i, 90)).save(path)
        rows.append({"image_id": f"img{i}", "image_path": str(path), "caption": caption})
    manifest = pd.DataFrame(rows)
    data = tmp_path / "results/data/synthetic"
    write_manifest(manifest, data / "test.csv")
    build_store(manifest, data / "test_images", image_size=32)
    return tmp_path


def test_run_geometry_writes_json_and_figure_of_the_models_caption_features(split):
    model_dir = save_model(create_model("micro", seed=0), split / "model")
    out = run_geometry(model_dir, split / "results/data/synthetic/test.csv", "synthetic", batch_size=64,
                       n_batches=3, seed=0, out_json=split / "geo/synthetic.json", out_figure=split / "geo/synthetic.png")
    saved = json.loads((split / "geo/synthetic.json").read_text())
    assert saved["batch_size"] == len(CAPTIONS)  # clamped: the split is smaller than one batch
    assert (split / "geo/synthetic.png").stat().st_size > 0 and (split / "geo/synthetic.svg").stat().st_size > 0
    # the same statistics from features encoded independently through the model's public API
    model = load_model(model_dir).eval()
    with torch.no_grad():
        feats = torch.nn.functional.normalize(model.encode_text(model.tokenize(CAPTIONS)).float(), dim=-1)
    expected = caption_geometry(feats.numpy(), len(CAPTIONS), 3, 0)
    assert saved["mean_offdiag"] == pytest.approx(expected["mean_offdiag"], abs=1e-5)
    assert out["mean_hardest"] == pytest.approx(expected["mean_hardest"], abs=1e-5)
    assert encode_captions(model, CAPTIONS, batch_size=4).shape == (len(CAPTIONS), 32)


def test_geometry_is_measured_at_the_losss_micro_batch_beside_the_larger_batch(split):
    # the loss and G span micro-batches of 3 here; geometry.batch_size asks for 5: both measured, the top
    # level is the loss's batch, each equal to caption_geometry at its size on independently encoded features
    model_dir = save_model(create_model("micro", seed=0), split / "model")
    saved = run_geometry(model_dir, split / "results/data/synthetic/test.csv", "synthetic", batch_size=5,
                         n_batches=4, seed=0, out_json=split / "geo/s.json", out_figure=split / "geo/s.png",
                         loss_batch_size=3)
    model = load_model(model_dir).eval()
    with torch.no_grad():
        feats = torch.nn.functional.normalize(model.encode_text(model.tokenize(CAPTIONS)).float(), dim=-1).numpy()
    assert saved["batch_size"] == 3 and saved["loss_batch"] is True
    assert [(b["batch_size"], b["loss_batch"]) for b in saved["batches"]] == [(3, True), (5, False)]
    for b in saved["batches"]:
        expected = caption_geometry(feats, b["batch_size"], 4, 0)
        assert b["mean_hardest"] == pytest.approx(expected["mean_hardest"], abs=1e-5)
    assert saved["mean_offdiag"] == pytest.approx(caption_geometry(feats, 3, 4, 0)["mean_offdiag"], abs=1e-5)


def _main_spec(root):
    cells = []
    for row, method, gamma, r1 in (("Long-CLIP FT", "longclip", 0.0, 20.0), ("LoRA", "lora", 0.0, 30.0),
                                   ("HN-CLIP", "hnclip", 0.5, 35.0)):
        run = {"train_set": "synthetic", "method": method, "gamma": gamma, "fraction": 1.0, "seed": 0}
        run_dir = root / f"results/runs/synthetic/{method}/g{gamma:g}/f1/s0"
        save_model(create_model("micro", seed=len(cells)), run_dir / "model")
        eval_path = root / f"results/evals/synthetic/{method}/g{gamma:g}/f1/s0/synthetic.json"
        eval_path.parent.mkdir(parents=True)
        eval_path.write_text(json.dumps({"run": run, "eval_benchmark": "synthetic",
                                         "metrics": dict.fromkeys(METRICS, r1)}))
        cells.append({"row": row, "group": "Synthetic", "variant": None, "x": None, "run": run,
                      "eval_benchmark": "synthetic", "eval_path": str(eval_path), "run_dir": str(run_dir)})
    return {"experiment": "main", "scale": "toy", "cells": cells}


def _with_competitor(spec, competitor):
    spec["roles"] = {"reference": "hnclip", "baseline": "longclip", "frozen": "hnclip_frozen", "competitor": competitor}
    return spec


def test_gallery_compares_hn_clip_with_the_competitor_chosen_on_val_never_on_test(split):
    spec = _main_spec(split)
    group, hn, base = choose_runs(spec)
    # no competitor chosen on val: plain fine-tuning, though LoRA scores 30 > 20 on test
    assert (group, hn["row"], base["row"]) == ("Synthetic", "HN-CLIP", "Long-CLIP FT")
    spec = _with_competitor(spec, "lora")
    assert choose_runs(spec)[2]["row"] == "LoRA"
    paths = run_gallery(spec, n_captions=3, out_prefix=split / "fig/gallery", k=4,
                        data_root=split / "results/data")
    assert [p.suffix for p in paths] == [".png", ".svg"] and all(p.stat().st_size > 0 for p in paths)
    with Image.open(paths[0]) as im:
        assert np.asarray(im).std() > 0


def test_gallery_never_takes_the_zero_shot_row_for_the_strongest_baseline(split):
    spec = _main_spec(split)
    run = {"train_set": "none", "method": "zeroshot", "gamma": 0.0, "fraction": 0.0, "seed": 0}
    eval_path = split / "results/evals/zeroshot/synthetic.json"
    eval_path.parent.mkdir(parents=True, exist_ok=True)
    eval_path.write_text(json.dumps({"run": run, "eval_benchmark": "synthetic", "metrics": dict.fromkeys(METRICS, 99.0)}))
    spec["cells"].insert(0, {"row": "Zero-shot backbone", "group": "Synthetic", "variant": None, "x": None, "run": run,
                             "eval_benchmark": "synthetic", "eval_path": str(eval_path), "run_dir": None,
                             "zeroshot": True})
    _, _, base = choose_runs(_with_competitor(spec, "lora"))
    assert base["row"] == "LoRA"  # 99 on the backbone's row, but it is a reference, not a baseline


def test_gallery_finds_hn_clip_by_its_method_key_when_its_label_is_renamed(split):
    spec = _main_spec(split)
    for cell in spec["cells"]:
        if cell["run"]["method"] == "hnclip":
            cell["row"] = "Ours (HN)"  # methods.hnclip.label renamed
    group, hn, base = choose_runs(_with_competitor(spec, "lora"))
    assert (group, hn["row"], hn["run"]["method"], base["row"]) == ("Synthetic", "Ours (HN)", "hnclip", "LoRA")


def test_gallery_without_a_baseline_draws_a_note_instead_of_failing(split):
    spec = _main_spec(split)
    spec["cells"] = [c for c in spec["cells"] if c["run"]["method"] == "hnclip"]
    paths = run_gallery(spec, n_captions=2, out_prefix=split / "fig/gallery", data_root=split / "results/data")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    assert "No data" in paths[1].read_text() and "competitor" in paths[1].read_text()


def test_the_gallery_shows_disagreements_by_a_stated_rule():
    from hnclip.analysis.gallery import choose_disagreements, disagreements

    hn = [1, 1, 3, 2, 1, 1, 5, 1, 9, 1]
    rival = [1, 4, 1, 1, 2, 1, 6, 7, 1, 3]
    kinds = disagreements(hn, rival)
    # by hand: HN alone right at 1, 4, 7, 9; the competitor alone at 2, 3, 8; both wrong at 6 (0 and 5 agree)
    assert kinds == {"first alone right": [1, 4, 7, 9], "second alone right": [2, 3, 8], "both wrong": [6]}
    # 4 shown: 2 / 1 / 1 (the first kind takes the remainder), evenly spaced inside each kind
    assert choose_disagreements(kinds, 4) == [1, 9, 2, 6]
    # 6 shown: both wrong has one query, its share passes on: 3 / 2 / 1
    assert choose_disagreements(kinds, 6) == [1, 7, 9, 2, 8, 6]
    assert sorted(choose_disagreements(kinds, 100)) == [1, 2, 3, 4, 6, 7, 8, 9]
    assert choose_disagreements(disagreements([1, 1], [1, 1]), 4) == []
    with pytest.raises(ValueError, match="different queries"):
        disagreements([1], [1, 2])
