"""Tables from hand-made evaluation records: cells, seeds (mean ± sample std), bold best, missing runs.

Every expected number here is computed by hand in the test (or in a comment), never by the table code.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from hnclip.analysis.records import MissingRecordError, load_records
from hnclip.analysis.table_format import RUN_COLUMNS, read_table_csv, write_table
from hnclip.analysis.tables import build_cost_table, build_epochs_table, build_table

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


def run(method, seed=0, gamma=0.0, fraction=1.0, train_set="docci"):
    return {"train_set": train_set, "method": method, "gamma": gamma, "fraction": fraction, "seed": seed}


def record(r, bench, **metrics):
    """An evaluation record; unspecified metrics get distinct filler values."""
    values = {m: 10.0 + i for i, m in enumerate(METRICS)}
    values.update(metrics)
    return {"run": r, "eval_benchmark": bench, "split": "test", "n_images": 5, "n_texts": 5,
            "metrics": values, "wall_time_s": 1.0}


def cell(row, group, r, bench, variant=None, x=None):
    return {"row": row, "group": group, "variant": variant, "x": x, "run": r, "eval_benchmark": bench,
            "eval_path": f"results/evals/{r['train_set']}/{r['method']}/g{r['gamma']:g}/f{r['fraction']:g}"
                         f"/s{r['seed']}/{bench}.json",
            "run_dir": f"results/runs/{r['train_set']}/{r['method']}/g{r['gamma']:g}/f{r['fraction']:g}/s{r['seed']}"}


def main_fixture(seeds=(0,)):
    """Long-CLIP FT vs HN-CLIP on DOCCI and DCI; HN-CLIP's i2t_r1 is 40 (s0) and 43 (s1) on DOCCI."""
    cells, records = [], []
    for seed in seeds:
        for method, label, gamma in (("longclip", "Long-CLIP FT", 0.0), ("hnclip", "HN-CLIP", 0.5)):
            for bench, group in (("docci", "DOCCI"), ("dci", "DCI")):
                r = run(method, seed, gamma, train_set=bench)
                if method == "hnclip" and bench == "docci":
                    rec = record(r, bench, i2t_r1=40.0 + 3.0 * seed, t2i_r10=20.0)
                elif method == "longclip" and bench == "docci":
                    rec = record(r, bench, i2t_r1=30.0, t2i_r10=25.0 + seed)
                else:
                    rec = record(r, bench)
                records.append(rec)
                cells.append(cell(label, group, r, bench))
    return {"experiment": "main", "scale": "toy", "cells": cells}, records


def test_main_table_aggregates_two_seeds_to_mean_and_sample_std():
    spec, records = main_fixture(seeds=(0, 1))
    df = build_table(spec, records)
    # HN-CLIP DOCCI I->T R@1: seeds 40 and 43 -> mean 41.5, sample std |43 - 40| / sqrt(2) = 2.1213
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "mean")] == pytest.approx(41.5)
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "std")] == pytest.approx(3 / math.sqrt(2))
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "n")] == 2
    # Long-CLIP DOCCI T->I R@10: 25 and 26 -> 25.5 ± 0.7071
    assert df.loc["Long-CLIP FT", ("DOCCI", "T->I", "R@10", "mean")] == pytest.approx(25.5)
    assert df.loc["Long-CLIP FT", ("DOCCI", "T->I", "R@10", "std")] == pytest.approx(math.sqrt(0.5))


def test_main_table_has_the_papers_24_columns_for_four_benchmarks():
    cells, records = [], []
    benches = ["docci", "dci", "long_dci", "urban1k"]
    for bench in benches:
        r = run("hnclip", gamma=0.5, train_set=bench)
        records.append(record(r, bench))
        cells.append(cell("HN-CLIP", bench.upper(), r, bench))
    df = build_table({"experiment": "main", "scale": "paper", "cells": cells}, records)
    means = [c[:-1] for c in df.columns if c[-1] == "mean"]
    assert len(means) == 24
    assert means[:6] == [("DOCCI", d, f"R@{k}") for d in ("I->T", "T->I") for k in (1, 5, 10)]
    assert [c[0] for c in means[::6]] == ["DOCCI", "DCI", "LONG_DCI", "URBAN1K"]
    # DCI's t2i_r5 is the fifth filler value: 10 + 4
    assert df.loc["HN-CLIP", ("DCI", "T->I", "R@5", "mean")] == 14.0


def test_written_table_shows_mean_pm_std_bold_best_and_scale(tmp_path):
    spec, records = main_fixture(seeds=(0, 1))
    paths = write_table(build_table(spec, records), tmp_path / "main", caption="Main results")
    md = paths["md"].read_text()
    html = paths["html"].read_text()
    tex = paths["tex"].read_text()
    # HN-CLIP wins DOCCI I->T R@1 (41.5 vs 30.0); Long-CLIP wins DOCCI T->I R@10 (25.5 vs 20.0)
    assert "**41.5 ± 2.1**" in md and "| 30.0 ± 0.0 |" in md  # Long-CLIP's two seeds agree: std 0, not bold
    assert "**25.5 ± 0.7**" in md and "**20.0" not in md
    assert "<strong>41.5 ± 2.1</strong>" in html and "<strong>25.5 ± 0.7</strong>" in html
    assert r"\textbf{41.5 $\pm$ 2.1}" in tex and r"\textbf{25.5 $\pm$ 0.7}" in tex
    for text in (md, html, tex):
        assert "Main results (toy-scale run)" in text
    assert 'data-scale="toy"' in html


def test_bold_ties_are_judged_at_printed_precision(tmp_path):
    cells, records = [], []
    for method, label, value in (("a", "A", 50.04), ("b", "B", 50.01), ("c", "C", 49.0)):
        r = run(method)
        records.append(record(r, "docci", i2t_r1=value))
        cells.append(cell(label, "DOCCI", r, "docci"))
    paths = write_table(build_table({"experiment": "main", "scale": "toy", "cells": cells}, records),
                        tmp_path / "tie", caption="tie")
    md = paths["md"].read_text()
    # 50.04 and 50.01 both print as 50.0: both are best
    assert md.count("**50.0**") == 2 and "**49.0**" not in md
    # I->T R@5 is the filler 11.0 in every row: nothing to single out, so nothing bold
    assert md.count("| 11.0 |") == 3 and "**11.0**" not in md


def test_missing_evaluation_record_raises_naming_the_run():
    spec, records = main_fixture(seeds=(0, 1))
    records = [r for r in records if not (r["run"]["method"] == "hnclip" and r["run"]["seed"] == 1
                                          and r["eval_benchmark"] == "dci")]
    with pytest.raises(MissingRecordError, match=r"dci/hnclip/g0\.5/f1/s1/dci"):
        build_table(spec, records)


def test_load_records_skips_absent_files_so_the_table_names_the_missing_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec, records = main_fixture()
    for c, rec in zip(spec["cells"], records, strict=True):
        if rec["run"]["method"] == "hnclip" and rec["eval_benchmark"] == "docci":
            continue
        path = tmp_path / c["eval_path"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(rec))
    loaded = load_records(spec)
    assert len(loaded) == len(records) - 1
    with pytest.raises(MissingRecordError, match=r"docci/hnclip/g0\.5/f1/s0/docci.*expected results/evals"):
        build_table(spec, loaded)


def test_plugin_delta_is_paired_by_seed():
    cells, records = [], []
    # plain i2t_r1 10, 20 and +HN 13, 21 for seeds 0, 1 -> paired deltas 3, 1: mean 2, std sqrt(2)
    for seed, plain, hn in ((0, 10.0, 13.0), (1, 20.0, 21.0)):
        for method, variant, value, gamma in (("lora", "plain", plain, 0.0), ("lora_hn", "+HN", hn, 0.5)):
            r = run(method, seed, gamma)
            records.append(record(r, "docci", i2t_r1=value, t2i_r1=value - 1))
            cells.append(cell("LoRA", "DOCCI", r, "docci", variant=variant))
    df = build_table({"experiment": "plugin", "scale": "toy", "cells": cells}, records)
    assert df.loc["LoRA", ("DOCCI", "I->T", "R@1", "plain", "mean")] == pytest.approx(15.0)
    assert df.loc["LoRA", ("DOCCI", "I->T", "R@1", "+HN", "mean")] == pytest.approx(17.0)
    assert df.loc["LoRA", ("DOCCI", "I->T", "R@1", "Δ", "mean")] == pytest.approx(2.0)
    assert df.loc["LoRA", ("DOCCI", "I->T", "R@1", "Δ", "std")] == pytest.approx(math.sqrt(2))
    variants = [c[3] for c in df.columns if c[-1] == "mean" and c[1] == "I->T"]
    assert variants == ["plain", "+HN", "Δ"]


def test_seeds_table_shows_each_seed_and_their_difference(tmp_path):
    cells, records = [], []
    for seed, value in ((0, 30.0), (1, 33.5)):
        r = run("hnclip", seed, 0.5)
        records.append(record(r, "docci", i2t_r1=value))
        cells.append(cell("HN-CLIP", "DOCCI", r, "docci"))
    df = build_table({"experiment": "seeds", "scale": "toy", "cells": cells}, records)
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "s0", "mean")] == 30.0
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "s1", "mean")] == 33.5
    assert df.loc["HN-CLIP", ("DOCCI", "I->T", "R@1", "s1−s0", "mean")] == pytest.approx(3.5)
    md = write_table(df, tmp_path / "seeds", caption="seeds")["md"].read_text()
    assert "| HN-CLIP | 30.0 | 33.5 | 3.5 |" in md  # one row: no ranking, no ± on single seeds


def test_fractions_and_gamma_sweep_rows_follow_the_swept_value():
    cells, records = [], []
    for method, label, gamma in (("longclip", "Long-CLIP FT", 0.0), ("hnclip", "HN-CLIP", 0.5)):
        for f in (1.0, 0.05, 0.5):  # deliberately out of order
            r = run(method, gamma=gamma, fraction=f)
            records.append(record(r, "docci", i2t_r1=50 * f + (1 if gamma else 0)))
            cells.append(cell(label, "DOCCI", r, "docci", x=f))
    df = build_table({"experiment": "fractions", "scale": "toy", "cells": cells}, records)
    assert list(df.index) == [("Long-CLIP FT", 0.05), ("Long-CLIP FT", 0.5), ("Long-CLIP FT", 1.0),
                              ("HN-CLIP", 0.05), ("HN-CLIP", 0.5), ("HN-CLIP", 1.0)]
    assert df.loc[("HN-CLIP", 0.05), ("DOCCI", "I->T", "R@1", "mean")] == pytest.approx(3.5)

    cells, records = [], []
    for g in (1.0, 0.0, 0.5):
        r = run("hnclip", gamma=g)
        records.append(record(r, "docci", t2i_r1=20 + g))
        cells.append(cell(f"gamma={g:g}", "DOCCI", r, "docci", x=g))
    df = build_table({"experiment": "gamma_sweep", "scale": "toy", "cells": cells}, records)
    assert list(df.index) == [0.0, 0.5, 1.0] and df.index.name == "gamma"
    assert df.loc[0.5, ("DOCCI", "T->I", "R@1", "mean")] == 20.5


def test_transfer_columns_are_train_to_eval_pairs():
    cells, records = [], []
    for method, label in (("longclip", "Long-CLIP FT"), ("hnclip", "HN-CLIP")):
        for bench in ("urban1k", "long_dci"):
            r = run(method, train_set="docci")
            records.append(record(r, bench))
            cells.append(cell(label, f"DOCCI -> {bench}", r, bench))
    df = build_table({"experiment": "transfer", "scale": "toy", "cells": cells}, records)
    assert df.columns.names[0] == "transfer"
    assert list(dict.fromkeys(c[0] for c in df.columns)) == ["DOCCI -> urban1k", "DOCCI -> long_dci"]


def test_ablation_rows_are_variants_and_csv_is_tidy(tmp_path):
    cells, records = [], []
    for method, label, value in (("longclip", "InfoNCE", 11.0), ("hnclip", "HN + token", 12.5)):
        r = run(method)
        records.append(record(r, "docci", t2i_r5=value))
        cells.append(cell(label, "DOCCI", r, "docci"))
    df = build_table({"experiment": "ablation", "scale": "paper", "cells": cells}, records)
    paths = write_table(df, tmp_path / "ablation", caption="Ablation")
    tidy = read_table_csv(paths["csv"])
    line = tidy[(tidy["variant"] == "HN + token") & (tidy["direction"] == "T->I") & (tidy["metric"] == "R@5")]
    assert len(line) == 1 and line["mean"].iloc[0] == 12.5 and line["n"].iloc[0] == 1
    assert set(tidy["scale"]) == {"paper"} and len(tidy) == 2 * 6
    assert "(paper-scale run)" in paths["md"].read_text()


def test_epochs_table_reads_epochs_csv_and_averages_seeds(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cells = []
    for seed, base in ((0, 10.0), (1, 14.0)):
        r = run("hnclip", seed, 0.5)
        c = cell("HN-CLIP", "DOCCI", r, "docci")
        cells.append(c)
        (tmp_path / c["run_dir"]).mkdir(parents=True)
        rows = [{"epoch": e, "step": 5 * e, **{m: base + e for m in METRICS}} for e in (1, 2)]
        pd.DataFrame(rows).to_csv(tmp_path / c["run_dir"] / "epochs.csv", index=False)
    df = build_epochs_table({"experiment": "main", "scale": "toy", "cells": cells})
    # epoch 2: seeds 12 and 16 -> 14 ± 2.828
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("I->T", "R@1", "mean")] == pytest.approx(14.0)
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("I->T", "R@1", "std")] == pytest.approx(math.sqrt(8))
    (tmp_path / cells[1]["run_dir"] / "epochs.csv").unlink()
    with pytest.raises(FileNotFoundError, match=r"hnclip/g0\.5/f1/s1/epochs\.csv"):
        build_epochs_table({"experiment": "main", "scale": "toy", "cells": cells})


def _summary(tmp_path, path, wall_s, device="cpu", **extra):
    d = tmp_path / "results" / "runs" / path
    d.mkdir(parents=True)
    s = {"config": {"micro_batch": 16, "accum_steps": 8}, "config_hash": "abc", "seed": 0, "steps": 10,
         "epochs": 1, "samples_seen": 1280, "wall_time_s": wall_s, "samples_per_s": 1280 / wall_s,
         "peak_memory_mb": 1000.0, "final_loss": 1.0, "device": device, "checkpoint_sha256": "f" * 64,
         "git_commit": "deadbeef", **extra}
    (d / "summary.json").write_text(json.dumps(s))
    return d / "summary.json"


@pytest.mark.parametrize("scale, runs", [("own", "runs on your data"), ("toy", "toy-scale runs")])
def test_cost_table_caption_names_its_runs_in_plain_english(tmp_path, scale, runs):
    """``hnclip table-cost``'s caption is the plural of the scale's label: "runs on your data" on your own
    data (appending an "s" to "run on your data" gave "datas")."""
    from hnclip.cli import main

    summary = _summary(tmp_path, "my_captions/longclip/g0/f1/s0", 60.0)
    tsv = tmp_path / "results/benchmarks/train/my_captions/longclip/g0/f1/s0.tsv"
    tsv.parent.mkdir(parents=True)
    tsv.write_text("s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
                   "60.0\t0:01:00\t100\t200\t90\tNA\t1\t2\t100.0\t60.0\n")
    assert main(["table-cost", "--summaries", str(summary), "--benchmarks", str(tsv), "--scale", scale,
                 "--gamma", "0", "--out-prefix", str(tmp_path / "cost")]) in (0, None)
    written = "".join(p.read_text() for p in tmp_path.glob("cost.*") if p.suffix in (".md", ".html"))
    assert f"training cost: {runs}" in written and "datas" not in written


def test_cost_table_cpu_hours_benchmark_tsv_and_speed_ratio(tmp_path):
    summaries = [
        _summary(tmp_path, "docci/hnclip/g0.5/f1/s0", 3600.0),
        _summary(tmp_path, "docci/hnclip/g0.5/f1/s1", 7200.0),
        _summary(tmp_path, "docci/goal/g0/f1/s0", 2.4 * 5400.0),
    ]
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    tsvs = []
    for path, rss, cpu_s in (("hnclip/g0.5/f1/s0", 2048.5, 7200.0), ("hnclip/g0.5/f1/s1", 1024.5, 3600.0),
                             ("goal/g0/f1/s0", 10.0, 10.0)):
        tsv = tmp_path / f"results/benchmarks/train/docci/{path}.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(header + f"3600.0\t1:00:00\t{rss}\t4000\t1900\tNA\t1\t2\t180.0\t{cpu_s}\n")
        tsvs.append(tsv)
    with pytest.raises(ValueError, match=r"no Snakemake benchmark file for run docci/goal/g0/f1/s0"):
        build_cost_table(summaries, tsvs[:2], scale="toy", reference_gamma=0.5)
    df = build_cost_table(summaries, tsvs, scale="toy", reference_gamma=0.5)
    hn = ("docci", "hnclip", "0.5", "1")
    goal = ("docci", "goal", "0", "1")
    assert df.loc[hn, ("wall time (h)", "mean")] == pytest.approx(1.5)
    assert df.loc[hn, ("CPU-hours", "mean")] == pytest.approx(1.5)
    assert ("GPU-hours", "mean") not in df.columns
    assert df.loc[hn, ("max RSS (MB)", "mean")] == pytest.approx(1536.5)
    assert df.loc[hn, ("CPU time (h)", "mean")] == pytest.approx(1.5)
    # GOAL took 2.4 x HN-CLIP's mean wall time (1.5 h)
    assert df.loc[goal, ("time vs hnclip", "mean")] == pytest.approx(2.4)


def _timing(train_s, excess=0.0, evals=0.0):
    return {"timing": {"train_time_s": train_s, "probe_excess_s": excess, "epoch_eval_s": evals}}


def test_cost_ratios_compare_training_time_without_probes_and_with_preprocessing(tmp_path):
    # HN-CLIP's run probed (+360 s) and evaluated after each epoch (+240 s): 3,600 s of wall time, 3,000 of
    # training; GOAL's did neither: 6,000 s. GOAL at a second fraction must not hide the full-data ratio
    summaries = [
        _summary(tmp_path, "docci/hnclip/g0.5/f1/s0", 3600.0, **_timing(3000.0, 360.0, 240.0)),
        _summary(tmp_path, "docci/goal/g0/f1/s0", 6000.0, **_timing(6000.0)),
        _summary(tmp_path, "docci/structxlip/g0/f1/s0", 9000.0, **_timing(9000.0), framework="structxlip"),
        _summary(tmp_path, "docci/hnclip/g0.5/f0.2/s0", 700.0, **_timing(600.0, 100.0)),
        _summary(tmp_path, "docci/goal/g0/f0.2/s0", 1500.0, **_timing(1500.0)),
    ]
    for s in summaries[1:2] + summaries[4:]:  # what training writes: the framework's name
        data = json.loads(s.read_text()) | {"framework": "goal"}
        s.write_text(json.dumps(data))
    header = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
    made = []
    for product, seconds in (("segments", 1200.0), ("edges", 600.0)):
        tsv = tmp_path / f"results/benchmarks/{product}/docci.tsv"
        tsv.parent.mkdir(parents=True, exist_ok=True)
        tsv.write_text(header + f"{seconds}\t0:20:00\t10\t10\t10\tNA\t1\t2\t1.0\t{seconds}\n")
        made.append(tsv)
    df = build_cost_table(summaries, scale="paper", reference_gamma=0.5, preprocess=made)
    goal, structxlip = ("docci", "goal", "0", "1"), ("docci", "structxlip", "0", "1")
    assert df.loc[("docci", "hnclip", "0.5", "1"), ("training time (h)", "mean")] == pytest.approx(3000 / 3600)
    # 6,000 / 3,000 (the wall times' 6,000 / 3,600 = 1.67 would charge HN-CLIP its probe)
    assert df.loc[goal, ("time vs hnclip", "mean")] == pytest.approx(2.0)
    # GOAL needs the segments (1,200 s): 7,200 / 3,000; StructXLIP segments and edges: 10,800 / 3,000
    assert df.loc[goal, ("time vs hnclip with preprocessing", "mean")] == pytest.approx(2.4)
    assert df.loc[structxlip, ("time vs hnclip with preprocessing", "mean")] == pytest.approx(3.6)
    assert df.loc[("docci", "goal", "0", "0.2"), ("time vs hnclip", "mean")] == pytest.approx(2.5)
    # the paper-vs-ours row finds the full-data ratios among several fractions, each labelled
    from hnclip.analysis.published import _ours

    paths = write_table(df, tmp_path / "cost", caption="cost")
    entry = {"compare": {"kind": "table", "table": "cost", "select": {
        "method": "goal", "fraction": "1", "quantity": ["time vs hnclip", "time vs hnclip with preprocessing"]},
        "over": ["train_set", "quantity"]}}
    ours = _ours(entry, {"tables": {"cost": str(paths["csv"]).removesuffix(".csv")}})
    assert sorted(ours) == [("docci time vs hnclip", pytest.approx(2.0), None),
                            ("docci time vs hnclip with preprocessing", pytest.approx(2.4), None)]
    with pytest.raises(ValueError, match="no preprocessing benchmark file for edges of docci"):
        build_cost_table(summaries, scale="paper", reference_gamma=0.5, preprocess=made[:1])


def test_cost_table_gpu_hours_are_wall_time_times_gpus(tmp_path):
    s = _summary(tmp_path, "docci/hnclip/g0.5/f1/s0", 7200.0, device="cuda", world_size=4)
    df = build_cost_table([s], reference_gamma=0.5)
    assert df.loc[("docci", "hnclip", "0.5", "1"), ("GPU-hours", "mean")] == pytest.approx(8.0)
    # what training writes: the GPU's name in "device", its kind in "device_type"
    named = _summary(tmp_path, "docci/lora/g0/f1/s0", 3600.0, device="NVIDIA H200", device_type="cuda")
    assert build_cost_table([named], reference_gamma=0.5).loc[("docci", "lora", "0", "1"), ("GPU-hours", "mean")] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="unknown scale"):
        write_table(df, tmp_path / "cost", caption="cost")
    md = write_table(df, tmp_path / "cost", caption="cost", scale="paper")["md"].read_text()
    assert "(paper-scale run)" in md and "| 8.00 |" in md
    md = write_table(df, tmp_path / "cost", caption="training cost: paper-scale runs")["md"].read_text()
    assert md.startswith("*training cost: paper-scale runs*")  # already labelled: nothing appended


def test_epochs_table_leaves_out_the_zero_shot_row_and_runs_that_log_another_benchmark(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = run("hnclip", 0, 0.5)
    docci = cell("HN-CLIP", "DOCCI", r, "docci") | {"epochs_benchmark": "docci"}
    long_dci = cell("HN-CLIP", "Long-DCI", r, "long_dci") | {"epochs_benchmark": "docci"}  # same run
    zeroshot = {**cell("Zero-shot backbone", "DOCCI", run("zeroshot", fraction=0.0, train_set="none"), "docci"),
                "run_dir": None, "zeroshot": True}
    (tmp_path / docci["run_dir"]).mkdir(parents=True)
    pd.DataFrame([{"epoch": 1, "step": 5, **dict.fromkeys(METRICS, 33.0)}]).to_csv(
        tmp_path / docci["run_dir"] / "epochs.csv", index=False)
    df = build_epochs_table({"experiment": "main", "scale": "toy", "cells": [zeroshot, docci, long_dci]})
    assert list(df.index) == [("HN-CLIP", "DOCCI", 1)]  # its DOCCI log is not shown as Long-DCI's


def test_epochs_table_reads_each_benchmark_a_run_logs_after_each_epoch(tmp_path, monkeypatch):
    # one DOCCI run evaluated after each epoch on DOCCI (33, 34) and Long-DCI (21, 25): each cell reads its
    # own benchmark's rows and per-query outcomes (Long-DCI: 4 images, hits 0 1 2 3 of 4 -> R@1 25 at epoch 2)
    monkeypatch.chdir(tmp_path)
    r = run("hnclip", 0, 0.5)
    docci = cell("HN-CLIP", "DOCCI", r, "docci") | {"epochs_benchmark": "docci"}
    long_dci = cell("HN-CLIP", "Long-DCI", r, "long_dci") | {"epochs_benchmark": "long_dci"}
    d = tmp_path / docci["run_dir"]
    d.mkdir(parents=True)
    rows = [{"epoch": e, "step": 5 * e, **dict.fromkeys(METRICS, v), "benchmark": b}
            for e, b, v in ((1, "docci", 33.0), (1, "long_dci", 21.0), (2, "docci", 34.0), (2, "long_dci", 25.0))]
    pd.DataFrame(rows).to_csv(d / "epochs.csv", index=False)
    ranks = ["epoch,i2t,t2i,text_image,benchmark", "1,0 0,0 0,0 1,docci", "1,0 9 9 9,0 9 9 9,0 1 2 3,long_dci",
             "2,0 0,0 0,0 1,docci", "2,0 9 9 9,9 0 9 9,0 1 2 3,long_dci"]
    (d / "epoch_ranks.csv").write_text("\n".join(ranks) + "\n")
    df = build_epochs_table({"experiment": "main", "scale": "toy", "cells": [docci, long_dci]})
    assert set(df.index) == {("HN-CLIP", g, e) for g in ("DOCCI", "Long-DCI") for e in (1, 2)}
    assert df.loc[("HN-CLIP", "Long-DCI", 2), ("I->T", "R@1", "mean")] == pytest.approx(25.0)
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("I->T", "R@1", "mean")] == pytest.approx(34.0)
    estimate = df.attrs["estimates"][(("HN-CLIP", "Long-DCI", 2), ("T->I", "R@1"))]
    assert estimate.terms[0][1].outcomes[0].n_images == 4  # Long-DCI's outcomes, not DOCCI's two images


def test_convergence_table_has_r1_error_per_direction_and_the_epochs_mean_infonce(tmp_path, monkeypatch):
    from hnclip.analysis.tables import build_convergence_table

    monkeypatch.chdir(tmp_path)
    c = cell("HN-CLIP", "DOCCI", run("hnclip", 0, 0.5), "docci")
    d = tmp_path / c["run_dir"]
    d.mkdir(parents=True)
    pd.DataFrame([{"epoch": 1, "step": 2, "i2t_r1": 70.0, "i2t_r5": 1, "i2t_r10": 1, "t2i_r1": 75.0, "t2i_r5": 1,
                   "t2i_r10": 1},
                  {"epoch": 2, "step": 4, "i2t_r1": 80.0, "i2t_r5": 1, "i2t_r10": 1, "t2i_r1": 84.5, "t2i_r5": 1,
                   "t2i_r10": 1}]).to_csv(d / "epochs.csv", index=False)
    # steps 1-2 in epoch 1 (InfoNCE 0.3, 0.1), 3-4 in epoch 2 (0.002, 0.004); an unlogged value is skipped
    pd.DataFrame({"step": [1, 2, 3, 4], "epoch": [1, 1, 2, 2], "lr": 1e-4, "logit_scale": 100.0, "loss": 1.0,
                  "infonce": [0.3, 0.1, 0.002, 0.004]}).to_csv(d / "dynamics.csv", index=False)
    df = build_convergence_table({"experiment": "main", "scale": "toy", "cells": [c]})
    assert df.loc[("HN-CLIP", "DOCCI", 1), ("I->T", "error", "mean")] == pytest.approx(30.0)
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("T->I", "error", "mean")] == pytest.approx(15.5)
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("T->I", "R@1", "mean")] == pytest.approx(84.5)
    assert df.loc[("HN-CLIP", "DOCCI", 1), ("both", "InfoNCE", "mean")] == pytest.approx(0.2)
    assert df.loc[("HN-CLIP", "DOCCI", 2), ("both", "InfoNCE", "mean")] == pytest.approx(0.003)
    paths = write_table(df, tmp_path / "conv", caption="convergence")
    tidy = read_table_csv(paths["csv"])
    assert set(tidy["metric"]) == {"R@1", "error", "InfoNCE"}


def _protocol_cells():
    hn, zs = run("hnclip", 0, 0.5), run("zeroshot", fraction=0.0, train_set="none")
    cells = []
    for row, r in (("Zero-shot backbone", zs), ("HN-CLIP", hn)):
        for split, path in (("test", f"{r['method']}-test.json"), ("test_goal", f"{r['method']}-goal.json")):
            cells.append({"row": row, "benchmark": "DOCCI", "eval_benchmark": "docci", "split": split,
                          "split_description": "x", "run": r, "eval_path": path, "model_dir": "m",
                          "zeroshot": row != "HN-CLIP"})
    return {"experiment": "protocols", "scale": "toy", "cells": cells}


def test_protocols_table_puts_each_split_and_both_k_sets_side_by_side(tmp_path):
    from hnclip.analysis.tables import build_protocols_table

    spec = _protocol_cells()
    records = {}
    for c in spec["cells"]:
        n = 5000 if c["split"] == "test" else 5100
        records[c["eval_path"]] = record(c["run"], "docci", i2t_r25=91.0, t2i_r50=97.0) | {"n_images": n,
                                                                                         "n_texts": n}
    del records["zeroshot-goal.json"]["metrics"]["t2i_r50"]  # a record made before R@50 was recorded
    df = build_protocols_table(spec, records)
    assert list(df.index) == [("DOCCI", "test", "Zero-shot backbone"), ("DOCCI", "test_goal", "Zero-shot backbone"),
                              ("DOCCI", "test", "HN-CLIP"), ("DOCCI", "test_goal", "HN-CLIP")]
    assert df.loc[("DOCCI", "test_goal", "HN-CLIP"), ("pairs", "images", "mean")] == 5100
    assert df.loc[("DOCCI", "test", "HN-CLIP"), ("I->T", "R@25", "mean")] == 91.0
    assert df.loc[("DOCCI", "test", "HN-CLIP"), ("T->I", "R@10", "mean")] == 15.0  # the filler of t2i_r10
    assert math.isnan(df.loc[("DOCCI", "test_goal", "Zero-shot backbone"), ("T->I", "R@50", "mean")])
    paths = write_table(df, tmp_path / "protocols", caption="protocols")
    assert "<strong>" not in paths["html"].read_text()  # rows mix splits: no best to bold
    tidy = read_table_csv(paths["csv"])
    hit = tidy[(tidy["split"] == "test_goal") & (tidy["method"] == "HN-CLIP") & (tidy["metric"] == "images")]
    assert list(hit["mean"]) == [5100]
    del records["hnclip-goal.json"]
    with pytest.raises(MissingRecordError, match="hnclip-goal.json"):
        build_protocols_table(spec, records)


# ------------------------------------------------------------------------------- runs behind each line
def _line(tidy: pd.DataFrame, **labels) -> dict:
    mask = pd.Series(True, index=tidy.index)
    for column, value in labels.items():
        mask &= tidy[column] == value
    rows = tidy[mask]
    assert len(rows) == 1, (labels, len(rows))
    return rows.iloc[0].to_dict()


def test_every_csv_line_names_its_runs_seeds_and_config_hashes(tmp_path):
    spec, records = main_fixture(seeds=(0, 1))
    summaries = {c["run_dir"]: {"config_hash": f"h-{c['run']['method']}-s{c['run']['seed']}"} for c in spec["cells"]}
    paths = write_table(build_table(spec, records, summaries=summaries), tmp_path / "main", caption="main")
    tidy = pd.read_csv(paths["csv"], keep_default_na=False, dtype=str)
    line = _line(tidy, method="HN-CLIP", group="DOCCI", direction="I->T", metric="R@1")
    assert float(line["mean"]) == pytest.approx(41.5)  # seeds 40 and 43, the two runs below
    assert line["runs"] == "docci/hnclip/g0.5/f1/s0;docci/hnclip/g0.5/f1/s1"
    assert (line["run_train_set"], line["run_method"], line["run_gamma"], line["run_fraction"],
            line["run_seeds"]) == ("docci", "hnclip", "0.5", "1", "0;1")
    assert line["run_config_hash"] == "h-hnclip-s0;h-hnclip-s1"
    line = _line(tidy, method="Long-CLIP FT", group="DCI", direction="T->I", metric="R@10")
    assert line["runs"] == "dci/longclip/g0/f1/s0;dci/longclip/g0/f1/s1" and line["run_gamma"] == "0"
    # without summaries the runs are still named; the hashes are left empty, one slot per run
    tidy = pd.read_csv(write_table(build_table(spec, records), tmp_path / "bare", caption="main")["csv"],
                       keep_default_na=False, dtype=str)
    assert _line(tidy, method="HN-CLIP", group="DOCCI", direction="I->T", metric="R@1")["run_config_hash"] == ";"


def test_a_plugin_difference_names_the_runs_of_both_sides(tmp_path):
    cells, records = [], []
    for method, variant, gamma in (("lora", "plain", 0.0), ("lora_hn", "+HN", 0.5)):
        r = run(method, gamma=gamma)
        records.append(record(r, "docci"))
        cells.append(cell("LoRA", "DOCCI", r, "docci", variant=variant))
    spec = {"experiment": "plugin", "scale": "toy", "cells": cells}
    summaries = {c["run_dir"]: {"config_hash": c["run"]["method"]} for c in cells}
    tidy = pd.read_csv(write_table(build_table(spec, records, summaries), tmp_path / "plugin", caption="p")["csv"],
                       keep_default_na=False, dtype=str)
    delta = _line(tidy, framework="LoRA", direction="I->T", variant="Δ")
    assert delta["runs"] == "docci/lora/g0/f1/s0;docci/lora_hn/g0.5/f1/s0"
    assert (delta["run_method"], delta["run_gamma"], delta["run_config_hash"]) == ("lora;lora_hn", "0;0.5", "lora;lora_hn")
    assert _line(tidy, framework="LoRA", direction="I->T", variant="+HN")["runs"] == "docci/lora_hn/g0.5/f1/s0"


def test_cost_table_lines_carry_the_config_hash_of_their_own_summaries(tmp_path):
    summaries = [_summary(tmp_path, "docci/hnclip/g0.5/f1/s0", 3600.0, config_hash="aaa"),
                 _summary(tmp_path, "docci/hnclip/g0.5/f1/s1", 3600.0, config_hash="bbb")]
    tidy = pd.read_csv(write_table(build_cost_table(summaries, scale="toy", reference_gamma=0.5), tmp_path / "cost", caption="c")["csv"],
                       keep_default_na=False, dtype=str)
    line = _line(tidy, quantity="wall time (h)")
    assert line["runs"] == "docci/hnclip/g0.5/f1/s0;docci/hnclip/g0.5/f1/s1"
    assert line["run_seeds"] == "0;1" and line["run_config_hash"] == "aaa;bbb"


def test_the_zero_shot_row_names_no_run_and_the_fine_tuned_rows_keep_theirs(tmp_path):
    spec, records = main_fixture()
    zs = run("zeroshot", fraction=0.0, train_set="none")
    spec["cells"].insert(0, {**cell("Zero-shot backbone", "DOCCI", zs, "docci"), "run_dir": None, "zeroshot": True})
    records.append(record(zs, "docci", i2t_r1=12.0))
    summaries = {c["run_dir"]: {"config_hash": c["run"]["method"]} for c in spec["cells"] if c["run_dir"]}
    tidy = pd.read_csv(write_table(build_table(spec, records, summaries), tmp_path / "main", caption="m")["csv"],
                       keep_default_na=False, dtype=str)
    line = _line(tidy, method="Zero-shot backbone", group="DOCCI", direction="I->T", metric="R@1")
    assert float(line["mean"]) == 12.0
    # the backbone before fine-tuning: no results/runs folder, so every run column is empty
    assert [line[c] for c in RUN_COLUMNS] == [""] * len(RUN_COLUMNS)
    line = _line(tidy, method="HN-CLIP", group="DOCCI", direction="I->T", metric="R@1")
    assert (line["runs"], line["run_config_hash"]) == ("docci/hnclip/g0.5/f1/s0", "hnclip")


def test_convergence_and_protocol_lines_carry_their_runs_and_config_hashes(tmp_path, monkeypatch):
    from hnclip.analysis.tables import build_convergence_table, build_protocols_table

    monkeypatch.chdir(tmp_path)
    c = cell("HN-CLIP", "DOCCI", run("hnclip", 0, 0.5), "docci")
    d = tmp_path / c["run_dir"]
    d.mkdir(parents=True)
    pd.DataFrame([{"epoch": 1, "step": 2, **dict.fromkeys(METRICS, 50.0)}]).to_csv(d / "epochs.csv", index=False)
    pd.DataFrame({"step": [1, 2], "epoch": [1, 1], "lr": 1e-4, "logit_scale": 100.0, "loss": 1.0,
                  "infonce": [0.3, 0.1]}).to_csv(d / "dynamics.csv", index=False)
    df = build_convergence_table({"experiment": "main", "scale": "toy", "cells": [c]},
                                 summaries={c["run_dir"]: {"config_hash": "abc"}})
    tidy = pd.read_csv(write_table(df, tmp_path / "conv", caption="c")["csv"], keep_default_na=False, dtype=str)
    line = _line(tidy, method="HN-CLIP", direction="both", metric="InfoNCE")
    assert (line["runs"], line["run_seeds"], line["run_config_hash"]) == ("docci/hnclip/g0.5/f1/s0", "0", "abc")

    spec = _protocol_cells()
    for pc in spec["cells"]:
        pc["run_dir"] = None if pc["zeroshot"] else c["run_dir"]
    records = {pc["eval_path"]: record(pc["run"], "docci") for pc in spec["cells"]}
    df = build_protocols_table(spec, records, summaries={c["run_dir"]: {"config_hash": "abc"}})
    tidy = pd.read_csv(write_table(df, tmp_path / "prot", caption="p")["csv"], keep_default_na=False, dtype=str)
    line = _line(tidy, split="test_goal", method="HN-CLIP", direction="I->T", metric="R@1")
    assert (line["runs"], line["run_config_hash"]) == ("docci/hnclip/g0.5/f1/s0", "abc")
    assert _line(tidy, split="test_goal", method="Zero-shot backbone", metric="images")["runs"] == ""


def test_retention_table_shows_r1_5_10_both_ways_with_intervals_resampling_images_with_their_captions(tmp_path):
    # two test images, five captions each; zero-shot and one fine-tuned model, both trained on DOCCI
    text_image = [0] * 5 + [1] * 5
    group = "DOCCI -> COCO 5k"
    zs = {"train_set": "none", "method": "zeroshot", "gamma": 0.0, "fraction": 0.0, "seed": 0}
    ft = run("hnclip", gamma=0.5, train_set="docci")
    # zero-shot: every query hits at 1; fine-tuned: image 0's five captions find it first, image 1's rank
    # it third, and image 1's best own caption ranks 6th (I->T: a hit at 10, not at 5)
    outcomes = {"zs": ([0, 0], [0] * 10), "ft": ([0, 5], [0] * 5 + [2] * 5)}
    records, cells = [], []
    for key, r, row in (("zs", zs, "Zero-shot backbone"), ("ft", ft, "HN-CLIP")):
        i2t, t2i = outcomes[key]
        rec = record(r, "coco", **{f"i2t_r{k}": 100.0 * sum(x < k for x in i2t) / 2 for k in (1, 5, 10)},
                     **{f"t2i_r{k}": 100.0 * sum(x < k for x in t2i) / 10 for k in (1, 5, 10)})
        rec["ranks"] = {"i2t": i2t, "t2i": t2i, "text_image": text_image}
        records.append(rec)
        c = cell(row, group, r, "coco")
        if key == "zs":
            c.update(zeroshot=True, run_dir=None)
        cells.append(c)
    spec = {"experiment": "retention", "scale": "paper", "cells": cells,
            "statistics": {"confidence": 0.95, "resamples": 2000, "seed": 0}}
    df = build_table(spec, records)
    assert df.columns.names[0] == "retention" and list(df.index) == ["Zero-shot backbone", "HN-CLIP"]
    assert [c[:-1] for c in df.columns if c[-1] == "mean"] == [
        (group, d, f"R@{k}") for d in ("I->T", "T->I") for k in (1, 5, 10)]
    # hand counts: HN-CLIP I->T R@1 1 of 2 images, R@10 both; T->I R@1 5 of 10 captions, R@5 all
    assert df.loc["HN-CLIP", (group, "I->T", "R@1", "mean")] == 50.0
    assert df.loc["HN-CLIP", (group, "I->T", "R@10", "mean")] == 100.0
    assert df.loc["HN-CLIP", (group, "T->I", "R@1", "mean")] == 50.0
    assert df.loc["HN-CLIP", (group, "T->I", "R@5", "mean")] == 100.0
    # all hits: every resample is 100, so is the interval
    assert (df.loc["Zero-shot backbone", (group, "T->I", "R@1", "ci_low")],
            df.loc["Zero-shot backbone", (group, "T->I", "R@1", "ci_high")]) == (100.0, 100.0)
    # T->I R@1 of a resample of the 2 images: 0, 50 or 100 with probabilities 1/4, 1/2, 1/4, so the 95 %
    # interval is [0, 100]; were the 10 captions resampled on their own, its 2.5 % quantile would be 20
    assert df.loc["HN-CLIP", (group, "T->I", "R@1", "ci_low")] == 0.0
    assert df.loc["HN-CLIP", (group, "T->I", "R@1", "ci_high")] == 100.0
    paths = write_table(df, tmp_path / "retention", caption="Retention")
    tidy = read_table_csv(paths["csv"])
    line = tidy[(tidy["method"] == "HN-CLIP") & (tidy["direction"] == "T->I") & (tidy["metric"] == "R@1")]
    assert len(line) == 1 and (line["ci_low"].iloc[0], line["ci_high"].iloc[0]) == (0.0, 100.0)
    assert line["retention"].iloc[0] == group
