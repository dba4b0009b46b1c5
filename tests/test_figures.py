"""Figures are written as non-empty PNG + SVG pairs; the gallery retrieves what brute force retrieves."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from hnclip.analysis import figures
from hnclip.analysis.gallery import plot_retrieval_gallery, top_k_retrievals
from hnclip.analysis.geometry import caption_geometry

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


def _check_pairs(paths, n_figures):
    assert len(paths) == 2 * n_figures
    pngs = [p for p in paths if p.suffix == ".png"]
    svgs = [p for p in paths if p.suffix == ".svg"]
    assert len(pngs) == len(svgs) == n_figures
    assert {p.with_suffix("") for p in pngs} == {p.with_suffix("") for p in svgs}
    for p in pngs:
        with Image.open(p) as im:
            assert im.format == "PNG" and im.width > 100 and im.height > 100
    for p in svgs:
        assert p.stat().st_size > 1000 and "<svg" in p.read_text()[:2000]


def _dynamics(steps, every, seed):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"step": np.arange(1, steps + 1), "epoch": 0, "lr": 1e-4, "logit_scale": 100.0,
                       "loss": np.linspace(3, 1, steps), "infonce": np.linspace(2.5, 0.2, steps)})
    logged = df["step"] % every == 0
    for col in ("grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero",
                "saturated_fraction"):
        df[col] = np.where(logged, rng.uniform(0.1, 2.0, steps), np.nan)
    return df


def test_gradient_dynamics_overview_alone_is_one_png_svg_pair(tmp_path):
    panels = {(f, b): _dynamics(12, 3, i) for i, (f, b) in enumerate([(0.05, "DOCCI"), (1.0, "DOCCI"),
                                                                       (0.05, "DCI"), (1.0, "DCI")])}
    paths = figures.plot_gradient_dynamics(panels, tmp_path / "dynamics", per_quantity=False)
    _check_pairs(paths, 1)
    assert paths == [tmp_path / "dynamics.png", tmp_path / "dynamics.svg"]


def test_gradient_dynamics_names_the_run_lacking_a_column(tmp_path):
    df = _dynamics(6, 2, 0).drop(columns=["grad_cosine"])
    with pytest.raises(ValueError, match="fraction 0.5, DOCCI: no column 'grad_cosine'"):
        figures.plot_gradient_dynamics({(0.5, "DOCCI"): df}, tmp_path / "d", per_quantity=False)


def _write_runs(tmp_path, experiment, entries):
    """Eval JSONs (and dynamics/epochs logs) under tmp_path for (row, group, x, method, gamma, fraction, seed, r1)."""
    cells = []
    for row, group, x, method, gamma, fraction, seed, r1 in entries:
        run = {"train_set": "docci", "method": method, "gamma": gamma, "fraction": fraction, "seed": seed}
        rel = f"docci/{method}/g{gamma:g}/f{fraction:g}/s{seed}"
        eval_path = tmp_path / "results/evals" / rel / f"{group.lower()}.json"
        eval_path.parent.mkdir(parents=True, exist_ok=True)
        metrics = dict.fromkeys(METRICS, r1)
        eval_path.write_text(json.dumps({"run": run, "eval_benchmark": group.lower(), "metrics": metrics}))
        run_dir = tmp_path / "results/runs" / rel
        run_dir.mkdir(parents=True, exist_ok=True)
        _dynamics(9, 3, seed).to_csv(run_dir / "dynamics.csv", index=False)
        pd.DataFrame([{"epoch": e, "step": 3 * e, **dict.fromkeys(METRICS, r1 - 3 + e)} for e in (1, 2, 3)]
                     ).to_csv(run_dir / "epochs.csv", index=False)
        cells.append({"row": row, "group": group, "variant": None, "x": x, "run": run,
                      "eval_benchmark": group.lower(), "eval_path": str(eval_path), "run_dir": str(run_dir)})
    return {"experiment": experiment, "scale": "toy", "cells": cells}


def test_spec_figures_write_one_png_svg_pair_each(tmp_path):
    fractions = _write_runs(tmp_path, "fractions", [
        (label, "DOCCI", f, m, g, f, s, 20 + 10 * f + g + s)
        for label, m, g in (("Long-CLIP FT", "longclip", 0.0), ("HN-CLIP", "hnclip", 0.5))
        for f in (0.05, 0.5, 1.0) for s in (0, 1)])
    _check_pairs(figures.plot_experiment(fractions, tmp_path / "fig/fractions"), 1)  # its row's figure
    gamma = _write_runs(tmp_path, "gamma_sweep", [(f"gamma={g:g}", "DOCCI", g, "hnclip", g, 1.0, 0, 30 + g)
                                                  for g in (0.0, 0.25, 0.5, 1.0)])
    _check_pairs(figures.plot_experiment(gamma, tmp_path / "fig/gamma_sweep"), 1)
    main = _write_runs(tmp_path, "main", [(label, "DOCCI", None, m, g, 1.0, 0, 30.0)
                                          for label, m, g in (("Long-CLIP FT", "longclip", 0.0),
                                                              ("HN-CLIP", "hnclip", 0.5))])
    _check_pairs(figures.plot_epochs(main, tmp_path / "fig/epochs"), 1)
    with pytest.raises(ValueError, match="experiment 'main' declares no figure"):  # its figures are its runs' logs'
        figures.plot_experiment(main, tmp_path / "fig/main")
    _check_pairs(figures.plot_convergence(main, tmp_path / "fig/convergence"), 1)
    paths = figures.plot_dynamics(fractions, tmp_path / "fig/dynamics")  # overview + one per quantity
    _check_pairs(paths, 1 + len(figures.DYNAMICS_QUANTITIES))
    assert tmp_path / "fig/dynamics.png" in paths and tmp_path / "fig/dynamics_grad_ratio.svg" in paths


def test_dynamics_panels_take_the_hn_runs_lowest_seed(tmp_path):
    spec = _write_runs(tmp_path, "fractions", [
        (label, "DOCCI", f, m, g, f, s, 30.0)
        for label, m, g in (("Long-CLIP FT", "longclip", 0.0), ("HN-CLIP", "hnclip", 0.5))
        for f in (0.05, 1.0) for s in (1, 0)])
    panels = figures.dynamics_panels(spec)
    assert sorted(panels) == [(0.05, "DOCCI"), (1.0, "DOCCI")]
    expected = _dynamics(9, 3, 0)  # seed 0 of the HN-CLIP run
    pd.testing.assert_series_equal(panels[(0.05, "DOCCI")]["grad_ratio"], expected["grad_ratio"])


def test_caption_geometry_figure(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(50, 8)) + 2
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    geos = {"synthetic": caption_geometry(x, 10, 3, 0), "synthetic_shift": caption_geometry(x[:20], 5, 2, 1)}
    _check_pairs(figures.plot_caption_geometry(geos, tmp_path / "geometry.png"), 1)


def test_top_k_matches_brute_force_ranking_with_stable_ties():
    rng = np.random.default_rng(1)
    text, images = rng.normal(size=(6, 4)), rng.normal(size=(9, 4))
    images[7] = images[2]  # a tie: row 2 must come before row 7
    rows, scores = top_k_retrievals(text, images, [0, 3, 5], k=5)
    for qi, q in enumerate([0, 3, 5]):
        pairs = [(-float(np.dot(text[q], images[j])), j) for j in range(9)]
        expected = [j for _, j in sorted(pairs)[:5]]
        assert rows[qi].tolist() == expected
        assert scores[qi] == pytest.approx([-s for s, _ in sorted(pairs)[:5]])


def test_gallery_ranks_the_ground_truth_among_all_images_by_hand():
    # query 0 scores images (0.9, 0.5, 0.7, 0.7): its own image 2 is beaten by image 0 only -> rank 2
    # (the tie with image 3 counts for it); query 1's own image 1 scores highest -> rank 1
    text = np.eye(4)[:2]
    images = np.array([[0.9, 0.1, 0, 0], [0.5, 0.8, 0, 0], [0.7, 0.2, 0, 0], [0.7, 0.0, 0, 0]])
    from hnclip.analysis.gallery import true_ranks

    assert true_ranks(text, images, [0, 1], [2, 1]) == [2, 1]
    assert true_ranks(text, images, [0], [1]) == [4]  # 0.5 is below 0.9, 0.7 and 0.7


def test_gallery_reads_each_models_top_k_rows_and_uses_the_given_score_fn(tmp_path):
    rng = np.random.default_rng(2)
    n_img, n_txt = 12, 12
    models = {name: (rng.normal(size=(n_txt, 5)), rng.normal(size=(n_img, 5))) for name in ("HN-CLIP", "Long-CLIP FT")}
    asked = []

    def read(rows):
        asked.append(list(rows))
        return [np.full((8, 8, 3), 20 * r % 255, dtype=np.uint8) for r in rows]

    def neg_l2(t, i):  # a score function other than cosine: retrieval must follow it
        return -((np.asarray(t)[:, None, :] - np.asarray(i)[None, :, :]) ** 2).sum(-1)

    queries = [1, 4]
    paths = plot_retrieval_gallery([f"caption {i} " * 30 for i in range(n_txt)], queries, [1, 4], models, read,
                                   tmp_path / "gallery", k=5, score_fn=neg_l2)
    _check_pairs(paths, 1)
    expected = []
    for q in queries:
        for t, im in models.values():
            d = [(float(((t[q] - im[j]) ** 2).sum()), j) for j in range(n_img)]
            expected.append([j for _, j in sorted(d)[:5]])
    assert asked == expected


def _spec_without_epoch_logs(tmp_path, hn_label="HN-CLIP"):
    """A main spec whose runs trained with train.eval_every_epoch: false: epochs.csv holds its header only."""
    from hnclip.analysis.records import DYNAMICS_COLUMNS
    from hnclip.training.logs import EPOCH_COLUMNS

    cells = []
    for method, gamma, row in (("longclip", 0.0, "Long-CLIP FT"), ("hnclip", 0.5, hn_label)):
        run_dir = tmp_path / "runs" / method
        run_dir.mkdir(parents=True)
        (run_dir / "epochs.csv").write_text(",".join(EPOCH_COLUMNS) + "\n")
        (run_dir / "dynamics.csv").write_text(",".join(DYNAMICS_COLUMNS) + "\n")
        run = {"train_set": "synthetic", "method": method, "gamma": gamma, "fraction": 1.0, "seed": 0}
        cells.append({"row": row, "group": "Synthetic", "variant": None, "x": None, "run": run,
                      "eval_benchmark": "synthetic", "eval_path": str(tmp_path / "e.json"), "run_dir": str(run_dir)})
    return {"experiment": "main", "scale": "toy", "cells": cells}


@pytest.mark.parametrize("draw", [figures.plot_epochs, figures.plot_convergence])
def test_per_epoch_figures_without_epoch_logs_say_why_instead_of_failing(draw, tmp_path):
    paths = draw(_spec_without_epoch_logs(tmp_path), tmp_path / "fig/out")
    assert [p.suffix for p in paths] == [".png", ".svg"]
    svg = paths[1].read_text()
    assert 'id="no-data"' in svg and "No data" in svg and "eval_every_epoch" in svg


def test_convergence_highlights_hn_clip_by_method_key_under_a_renamed_label(tmp_path):
    spec = _spec_without_epoch_logs(tmp_path, hn_label="Ours")
    assert figures.method_label(spec) == "Ours"
    assert figures.method_label(spec, "lora") is None


def test_a_figure_saved_in_two_processes_has_the_same_bytes(tmp_path):
    """matplotlib writes the time of saving into an SVG and salts its element ids at random per process; a
    rebuilt figure (PNG and SVG) now has the same sha256."""
    import hashlib
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = ("import sys\nfrom hnclip.analysis.figures import plt, save_figure\n"
              "fig, ax = plt.subplots()\nax.imshow([[0, 1], [2, 3]])\nax.plot([0, 1], [1, 0], label='a')\n"
              "ax.legend()\nsave_figure(fig, sys.argv[1])\n")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    for i in (1, 2):
        done = subprocess.run([sys.executable, "-c", script, str(tmp_path / f"p{i}" / "figure")], env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
    for name in ("figure.png", "figure.svg"):
        first, second = ((tmp_path / f"p{i}" / name).read_bytes() for i in (1, 2))
        assert hashlib.sha256(first).hexdigest() == hashlib.sha256(second).hexdigest(), name
