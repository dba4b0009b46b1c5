"""The summary of a run on your own data (`hnclip summary --scale own`, hnclip.analysis.own_results), on
hand-built ranks: HN-CLIP minus plain fine-tuning against a numpy percentile bootstrap over test images written
here (and, where every resample gives the same number, against that number exactly), the captions whose rank
changed most against a hand count, the last-epoch rise against hand-made per-epoch ranks."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from hnclip import plan
from hnclip.analysis.bootstrap import BootstrapSettings
from hnclip.analysis.own_results import changed_captions, own_results, run_rises
from hnclip.cli import main
from hnclip.workflow_config import load_config

ROOT = Path(__file__).resolve().parents[1]


def _spec(tmp_path, methods=("longclip", "hnclip")) -> dict:
    overlay = tmp_path / "mine.yaml"
    overlay.write_text(f"benchmarks:\n  my_captions: {{label: Mine, root: {tmp_path}}}\n"
                       f"experiments:\n  main: {{benchmarks: [my_captions], methods: [{', '.join(methods)}]}}\n")
    return plan.experiment_spec(load_config([ROOT / "config/finetune.yaml", overlay]), "main")


def _record(i2t_rank, t2i_rank, text_image) -> dict:
    """An evaluation record whose metrics are its ranks' R@1 (rank 0: own image / caption first)."""
    i2t, t2i = np.asarray(i2t_rank), np.asarray(t2i_rank)
    return {"eval_benchmark": "my_captions", "split": "test",
            "metrics": {"i2t_r1": 100.0 * np.mean(i2t == 0), "t2i_r1": 100.0 * np.mean(t2i == 0)},
            "ranks": {"i2t": i2t.tolist(), "t2i": t2i.tolist(), "text_image": list(text_image)}}


def _numpy_paired_bootstrap(hn: dict, plain: dict, resamples: int, seed: int) -> tuple[float, float, float]:
    """Reference: resample test images with replacement (an image's captions with it), average R@1 of both
    directions of each model on the same draw, 2.5th and 97.5th percentiles of the difference."""
    text_image = np.asarray(hn["ranks"]["text_image"])
    n = len(hn["ranks"]["i2t"])

    def per_image(record):
        i2t = (np.asarray(record["ranks"]["i2t"]) == 0).astype(float)
        t2i_hits = np.bincount(text_image, weights=(np.asarray(record["ranks"]["t2i"]) == 0), minlength=n)
        return i2t, t2i_hits

    counts = np.bincount(text_image, minlength=n).astype(float)
    (hi, ht), (pi, pt) = per_image(hn), per_image(plain)
    rng = np.random.default_rng(seed)

    def avg(i2t, t2i, idx):
        return 50.0 * (i2t[idx].mean() + t2i[idx].sum() / counts[idx].sum())

    draws = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        draws.append(avg(hi, ht, idx) - avg(pi, pt, idx))
    point = 50.0 * (hi.mean() + ht.sum() / counts.sum()) - 50.0 * (pi.mean() + pt.sum() / counts.sum())
    return point, float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))


def _records_for(spec, records_by_method) -> dict:
    return {c["eval_path"]: records_by_method[c["run"]["method"]] for c in spec["cells"]}


def test_hn_minus_plain_fine_tuning_matches_a_numpy_paired_bootstrap(tmp_path):
    spec = _spec(tmp_path)
    rng = np.random.default_rng(11)
    n = 300
    text_image = list(range(n)) + list(range(0, n, 3))  # every third image has a second caption
    plain = _record(rng.integers(0, 3, n) * (rng.random(n) < 0.6), rng.integers(0, 2, len(text_image)), text_image)
    hn = _record(rng.integers(0, 3, n) * (rng.random(n) < 0.5), rng.integers(0, 2, len(text_image)) *
                 (rng.random(len(text_image)) < 0.7), text_image)
    zeroshot = _record(rng.integers(0, 5, n), rng.integers(0, 5, len(text_image)), text_image)
    records = _records_for(spec, {"hnclip": hn, "longclip": plain, "zeroshot": zeroshot})
    result = own_results(spec, records, BootstrapSettings(resamples=4000))["my_captions"]
    point, low, high = _numpy_paired_bootstrap(hn, plain, 4000, seed=5)
    diff = result["difference"]
    assert diff["difference"] == pytest.approx(point, abs=1e-9)
    assert diff["interval"][0] == pytest.approx(low, abs=0.8) and diff["interval"][1] == pytest.approx(high, abs=0.8)
    assert (diff["method"], diff["against"], diff["label"], diff["against_label"]) == \
        ("hnclip", "longclip", "HN-CLIP", "Fine-tuned (CLIP loss)")
    averages = {r["method"]: r["average"] for r in result["rows"]}
    assert averages["hnclip"] - averages["longclip"] == pytest.approx(point, abs=1e-9)
    assert list(averages) == ["zeroshot", "longclip", "hnclip"] and result["missing"] == []


def test_an_all_or_nothing_difference_has_a_point_interval_and_a_missing_method_is_named(tmp_path):
    spec = _spec(tmp_path)
    text_image = [0, 1, 2, 3, 3]
    hn = _record([0, 0, 0, 0], [0, 0, 0, 0, 0], text_image)
    plain = _record([1, 2, 1, 3], [1, 1, 2, 1, 1], text_image)
    records = _records_for(spec, {"hnclip": hn, "longclip": plain, "zeroshot": plain})
    diff = own_results(spec, records)["my_captions"]["difference"]
    assert diff["difference"] == 100.0 and diff["interval"] == [100.0, 100.0]

    only_plain = _spec(tmp_path, methods=("longclip",))
    result = own_results(only_plain, _records_for(only_plain, {"longclip": plain, "zeroshot": plain}))["my_captions"]
    assert result["difference"] is None and result["missing"] == ["hnclip"] and result["changed"] == []


def test_changed_captions_are_the_largest_rank_changes_either_way():
    text_image = [0, 1, 2, 3, 4]
    hn = _record([0] * 5, [0, 7, 2, 3, 1], text_image)
    plain = _record([0] * 5, [5, 7, 0, 3, 9], text_image)
    changed = changed_captions(hn, plain, ["a", "b", "c", "d", "e"], n=3)
    # changes (plain - hn): +5, 0, -2, 0, +8 -> e, a, c; ranks shown 1-based
    assert [(c["caption"], c["rank_plain"], c["rank_hn"], c["change"]) for c in changed] == \
        [("e", 10, 2, 8), ("a", 6, 1, 5), ("c", 1, 3, -2)]


def _epoch_ranks(run_dir: Path, epochs: list[tuple[list[int], list[int]]], text_image: list[int]) -> None:
    run_dir.mkdir(parents=True)
    with open(run_dir / "epoch_ranks.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["epoch", "i2t", "t2i", "text_image"])
        writer.writeheader()
        for epoch, (i2t, t2i) in enumerate(epochs, start=1):
            writer.writerow({"epoch": epoch, "i2t": " ".join(map(str, i2t)), "t2i": " ".join(map(str, t2i)),
                             "text_image": " ".join(map(str, text_image))})


def test_still_improving_flags_a_rise_above_its_noise_only(tmp_path):
    text_image = list(range(40))
    nothing, everything = [1] * 40, [0] * 40
    _epoch_ranks(tmp_path / "rising", [(nothing, nothing), (nothing, nothing), (everything, everything)], text_image)
    half = [0, 1] * 20
    _epoch_ranks(tmp_path / "flat", [(half, half), (half, half)], text_image)
    cells = [{"row": "Rising", "run": {"seed": 0}, "run_dir": str(tmp_path / "rising")},
             {"row": "Flat", "run": {"seed": 1}, "run_dir": str(tmp_path / "flat")},
             {"row": "No log", "run": {"seed": 2}, "run_dir": str(tmp_path / "absent")}]
    rises = run_rises(cells, BootstrapSettings())
    assert [(r["row"], r["epochs"], r["rise"], r["interval"], r["still_improving"]) for r in rises] == [
        ("Rising", [2, 3], 100.0, [100.0, 100.0], True), ("Flat", [1, 2], 0.0, [0.0, 0.0], False)]


def test_hnclip_summary_at_scale_own_writes_markdown_and_json_without_claims(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path)
    text_image = [0, 1, 2, 3, 3]
    records = {"hnclip": _record([0, 0, 0, 0], [0, 0, 0, 0, 0], text_image),
               "longclip": _record([1, 2, 1, 3], [1, 1, 2, 1, 1], text_image),
               "zeroshot": _record([2, 2, 2, 2], [3, 3, 3, 3, 3], text_image)}
    for cell in spec["cells"]:
        Path(cell["eval_path"]).parent.mkdir(parents=True, exist_ok=True)
        Path(cell["eval_path"]).write_text(json.dumps(records[cell["run"]["method"]]))
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    manifest = tmp_path / "results/data/my_captions/test.csv"
    manifest.parent.mkdir(parents=True)
    manifest.write_text("image_id,image_path,caption\n" + "".join(f"i{i},x.png,caption {c}\n"
                                                                   for i, c in zip(text_image, "abcde", strict=True)))
    (tmp_path / "backbone").mkdir()
    (tmp_path / "backbone/model.safetensors").write_bytes(b"weights")
    out = [f"--out-{k}" for k in ("json", "md")]
    argv = ["summary", "--scale", "own", "--spec", "spec.json", "--test-manifests", str(manifest), "--backbone",
            "backbone", out[0], "summary.json", out[1], "summary.md"]
    assert main(argv) == 0
    md = (tmp_path / "summary.md").read_text()
    assert "HN-CLIP − Fine-tuned (CLIP loss) (plain fine-tuning), average R@1" in md
    assert "+100.00 [+100.00, +100.00] (1 seed)" in md
    assert "'caption a': 2 -> 1" in md and "claim" in md
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scale"] == "own" and summary["main"]["my_captions"]["difference"] == 100.0
    # sha256 of b"weights", computed independently
    import hashlib

    assert summary["backbone"]["weights_sha256"] == hashlib.sha256(b"weights").hexdigest()
    # two machines' own-data summaries compare as the toy's do
    with pytest.raises(SystemExit) as info:
        main(["summary", "--compare", "summary.json", "summary.json"])
    assert info.value.code == 0


# ------------------------------------------------------------------------------------------ figures
def _captured_figure(monkeypatch, module):
    """Replace ``module.save_figure`` by one that keeps the figure (its axes read back here)."""
    kept = {}

    def save(fig, out_prefix):
        kept["fig"] = fig
        return []

    monkeypatch.setattr(module, "save_figure", save)
    return kept


def test_epoch_figure_draws_the_zero_shot_row_as_a_line(monkeypatch):
    import pandas as pd

    from hnclip.analysis import figures

    kept = _captured_figure(monkeypatch, figures)
    index = pd.MultiIndex.from_tuples([("Plain", "Mine", 1), ("Plain", "Mine", 2)], names=["method", "benchmark", "epoch"])
    columns = pd.MultiIndex.from_tuples([(d, "R@1", s) for d in ("I->T", "T->I") for s in ("mean", "std")])
    table = pd.DataFrame([[10.0, 0.0, 12.0, 0.0], [20.0, 0.0, 22.0, 0.0]], index=index, columns=columns)
    figures.plot_epoch_recall(table, "unused", {("Mine", "I->T"): 7.5, ("Mine", "T->I"): 9.25})
    axes = kept["fig"].axes
    for ax, level in zip(axes[:2], (7.5, 9.25), strict=True):
        zero_shot = [line for line in ax.get_lines() if line.get_label() == "zero-shot"]
        assert len(zero_shot) == 1 and list(zero_shot[0].get_ydata()) == [level, level]
    figures.plt.close("all")


def test_training_figure_plots_each_runs_loss_and_learning_rate_from_its_dynamics_log(tmp_path, monkeypatch):
    from hnclip.analysis import own_figures
    from hnclip.dynamics_log import DYNAMICS_COLUMNS

    spec = _spec(tmp_path)
    logs = {}
    for cell in spec["cells"]:
        if cell.get("zeroshot"):
            continue
        cell["run_dir"] = str(tmp_path / cell["run"]["method"])
        Path(cell["run_dir"]).mkdir()
        rows = [(step, 1e-5 * step / 3, 4.0 / step + (cell["run"]["method"] == "hnclip")) for step in (1, 2, 3)]
        logs[f"{cell['row']} (seed 0)"] = rows
        with open(Path(cell["run_dir"]) / "dynamics.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(DYNAMICS_COLUMNS))
            writer.writeheader()
            for step, lr, loss in rows:
                writer.writerow({"step": step, "epoch": 1, "lr": lr, "loss": loss})
    kept = _captured_figure(monkeypatch, own_figures)
    own_figures.plot_training(spec, "unused")
    loss_ax, lr_ax = kept["fig"].axes
    for ax, column in ((loss_ax, 2), (lr_ax, 1)):
        drawn = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.get_lines()}
        assert drawn == {label: ([float(r[0]) for r in rows], [r[column] for r in rows]) for label, rows in logs.items()}
    own_figures.plt.close("all")
