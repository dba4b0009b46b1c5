"""`hnclip plan`: job counts against hnclip.plan, GPU-hours against hand arithmetic, throughput sources."""

import csv
import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hnclip import plan, protocols
from hnclip.cli.plan import print_plan
from hnclip.cost import DEFAULT_SAMPLES_PER_S, run_samples
from hnclip.frameworks.registry import framework_names
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "config/paper.yaml"
PROFILE = REPO / "profiles/slurm"

# The arithmetic below is pinned to these grids, frozen here: config/paper.yaml and the e2e micro
# config grow with the project (more frameworks), the hand counts must not move with them.
PAPER_GRID = """
scale: paper
backbone: {source: longclip, checkpoint: hf://BeichenZhang/LongCLIP-L/longclip-L.pt, image_size: 224}
benchmarks:
  docci: {adapter: docci, root: r/docci, splits: [train, test], train_set: docci, expected_counts: {test: 5000}}
  dci: {adapter: dci, root: r/dci, splits: [train, test], train_set: dci, expected_counts: {train: 5806, test: 1999}}
  long_dci: {adapter: long_dci, root: r/long_dci, splits: [test], train_set: docci}
  urban1k: {adapter: urban1k, root: r/urban1k, splits: [test], train_set: vg}
  vg: {adapter: vg, root: r/vg, splits: [train], train_set: vg}
train: {epochs: 10, micro_batch: 16, accum_steps: 8}
gamma: 0.5
seeds: [0, 1]
methods:
  longclip: {framework: longclip, hn: false}
  longclip_hn: {framework: longclip, hn: true}
  hnclip: {framework: longclip, hn: true}
  hnclip_frozen: {framework: longclip, hn: true, margin: frozen}
  lora: {framework: lora, hn: false}
  lora_hn: {framework: lora, hn: true}
  dora: {framework: dora, hn: false}
  dora_hn: {framework: dora, hn: true}
experiments:
  main: {benchmarks: [docci, dci, long_dci, urban1k], methods: [longclip, lora, dora, hnclip]}
  plugin:
    benchmarks: [docci, dci, long_dci, urban1k]
    pairs: [{label: FT, plain: longclip, hn: longclip_hn}, {label: LoRA, plain: lora, hn: lora_hn},
            {label: DoRA, plain: dora, hn: dora_hn}]
  transfer:
    pairs: [{train: dci, eval: docci}, {train: docci, eval: dci}, {train: docci, eval: long_dci},
            {train: vg, eval: urban1k}]
    methods: [longclip, lora, dora, hnclip]
  fractions: {benchmarks: [docci, dci, long_dci, urban1k], methods: [longclip, hnclip], fractions: [0.05, 0.2, 0.5, 1.0]}
  gamma_sweep: {benchmarks: [docci, dci, long_dci, urban1k], method: hnclip, gammas: [0, 0.25, 0.5, 0.75, 1.0]}
  ablation:
    benchmarks: [docci, dci, long_dci, urban1k]
    variants: [{label: InfoNCE, method: longclip}, {label: HN only, method: longclip_hn},
               {label: token only, method: hnclip, gamma: 0}, {label: HN + token, method: hnclip},
               {label: frozen G, method: hnclip_frozen}]
  seeds: {benchmarks: [docci, dci, long_dci, urban1k], methods: [longclip, lora, dora, hnclip]}
"""
MICRO_GRID = """
backbone: {source: pretrain, name: micro, image_size: 32}
pretrain: {benchmark: synthetic, caption_column: short_caption, context_length: 77,
           train: {epochs: 1, micro_batch: 16, accum_steps: 1}}
benchmarks:
  synthetic: {adapter: synthetic, root: r/s, splits: [train, test], train_set: synthetic,
              synthetic: {n_train: 64, n_test: 16, image_size: 48, seed: 0}}
  synthetic_shift: {adapter: synthetic_shift, root: r/t, splits: [test],
                    synthetic: {n_train: 0, n_test: 16, image_size: 48, seed: 1}}
train: {epochs: 1, micro_batch: 8, accum_steps: 2}
gamma: 0.5
seeds: [0, 1]
methods:
  longclip: {framework: longclip, hn: false}
  longclip_hn: {framework: longclip, hn: true}
  hnclip: {framework: longclip, hn: true}
  hnclip_frozen: {framework: longclip, hn: true, margin: frozen}
  lora: {framework: lora, hn: false}
  lora_hn: {framework: lora, hn: true}
experiments:
  main: {benchmarks: [synthetic], methods: [longclip, lora, hnclip]}
  plugin: {benchmarks: [synthetic], pairs: [{label: FT, plain: longclip, hn: longclip_hn}, {label: LoRA, plain: lora, hn: lora_hn}]}
  transfer: {pairs: [{train: synthetic, eval: synthetic_shift}], methods: [longclip, hnclip]}
  fractions: {benchmarks: [synthetic], methods: [longclip, hnclip], fractions: [0.5, 1.0]}
  gamma_sweep: {benchmarks: [synthetic], method: hnclip, gammas: [0, 0.5]}
  ablation:
    benchmarks: [synthetic]
    variants: [{label: InfoNCE, method: longclip}, {label: HN only, method: longclip_hn},
               {label: token only, method: hnclip, gamma: 0}, {label: HN + token, method: hnclip},
               {label: frozen G, method: hnclip_frozen}]
  seeds: {benchmarks: [synthetic], methods: [hnclip]}
"""


@pytest.fixture
def paper(tmp_path):
    path = tmp_path / "paper_grid.yaml"
    path.write_text(PAPER_GRID)
    return path


@pytest.fixture
def micro(tmp_path):
    path = tmp_path / "micro_grid.yaml"
    path.write_text(MICRO_GRID)
    return path


# Paper grid by hand: effective batch 16 x 8 = 128, 10 epochs, the last partial batch of an epoch dropped.
#   DOCCI train 9,647 (publisher)  -> 75 steps/epoch -> 750 x 128 =  96,000 samples per full run
#   DCI train 5,806 (GOAL split)   -> 45             -> 450 x 128 =  57,600
#   VG train 14,575 (Krause et al.) -> 113           -> 1130 x 128 = 144,640
#   one method on the three train sets: 298,240
# Fractions (ceil(f * N) images): DOCCI 483/1930/4824 -> 3/15/37 steps; DCI 291/1162/2903 -> 2/9/22;
#   VG 729/2915/7288 -> 5/22/56; x 10 epochs x 128: 70,400 + 42,240 + 106,240 = 218,880 per method.
PER_METHOD = 298_240
PAPER_SAMPLES = {
    "main": 4 * PER_METHOD,  # longclip, lora, dora, hnclip
    "plugin": 3 * PER_METHOD,  # the three +HN methods are new
    "transfer": 0,  # every transfer run is a main run
    "fractions": 2 * 218_880,
    "gamma_sweep": 4 * PER_METHOD,  # gammas 0, 0.25, 0.75, 1 (0.5 is main's hnclip)
    "ablation": PER_METHOD,  # frozen G
    "seeds": 4 * PER_METHOD,  # seed 1 of the four main methods
    "protocols": 0,  # evaluations only
}
# (train jobs needed, new, eval jobs needed, new): hand-derived as in test_workflow_dag.py
PAPER_JOBS = {
    "main": (12, 12, 20, 20),  # + the zero-shot backbone on the 4 benchmarks (evaluations, no runs)
    "plugin": (18, 9, 24, 12),
    # DCI -> DOCCI and DOCCI -> DCI are new evaluations, 4 methods each; the zero-shot row's are main's
    "transfer": (12, 0, 20, 8),
    # + the zero-shot backbone on its benchmarks, the fractions table's reference row (main's evaluations)
    "fractions": (24, 18, 36, 24),
    "gamma_sweep": (15, 12, 20, 16),
    "ablation": (15, 3, 20, 4),
    "seeds": (24, 12, 32, 16),
    # The protocol table: main's 5 rows (zero-shot + 4 methods) on each main benchmark under the paper's
    # split and each test variant: DOCCI test_goal, DCI test_all, Long-DCI test_keep_empty, Urban-1K none
    # -> 5 x (2 + 2 + 2 + 1) = 35 evaluations, of which the 5 x 3 = 15 variant ones are new.
    "protocols": (0, 0, 35, 15),
}


def run_plan(configfile, tmp_path, **kwargs):
    kwargs.setdefault("job_cost", False)  # the committed measurements are tested on their own below
    out = io.StringIO()
    rows = print_plan(configfile, results_dir=kwargs.pop("results_dir", tmp_path / "results"), file=out, **kwargs)
    return {r.name: r for r in rows}, out.getvalue()


def write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def model_json(name: str, image_size: int, context_length: int = 248) -> dict:
    return {"format_version": 1, "spec": {"name": name, "context_length": context_length,
                                          "config": {"vision_cfg": {"image_size": image_size}}}}


def test_job_counts_match_the_plan_modules_runs_and_evaluations(paper, tmp_path):
    rows, _ = run_plan(paper, tmp_path)
    config = load_config(paper)
    assert sum(r.new_train_jobs for r in rows.values()) == len(plan.all_runs(config)) == 66
    # 96 evaluations of runs + the zero-shot backbone on the 4 test benchmarks + 15 protocol variants
    assert len(plan.all_evaluations(config)) == 96
    assert sum(r.new_eval_jobs for r in rows.values()) == 96 + 4 + 15
    for name, row in rows.items():
        assert (row.train_jobs, row.new_train_jobs, row.eval_jobs, row.new_eval_jobs) == PAPER_JOBS[name], name
        if name == "protocols":
            cells = protocols.protocol_spec(config)["cells"]
            assert row.eval_jobs == len({c["eval_path"] for c in cells})
            assert row.new_eval_jobs == len({c["eval_path"] for c in cells if c["split"] != "test"})
            continue
        cells = plan.experiment_spec(config, name)["cells"]
        runs = {json.dumps(c["run"], sort_keys=True) for c in cells if not plan.is_zeroshot(c)}
        assert row.train_jobs == len(runs), name
        assert row.eval_jobs == len({c["eval_path"] for c in cells}), name


def test_paper_gpu_hours_equal_the_hand_computation(paper, tmp_path):
    rows, out = run_plan(paper, tmp_path, samples_per_s=100.0)
    assert {name: r.samples for name, r in rows.items()} == PAPER_SAMPLES
    for name, row in rows.items():
        assert row.gpu_hours == pytest.approx(PAPER_SAMPLES[name] / 100.0 / 3600, rel=1e-12), name
    total = sum(PAPER_SAMPLES.values())
    assert total == 5_209_600
    assert "14.5 GPU-hours (52,096 GPU-seconds)" in out  # 5,209,600 / 100 / 3600 = 14.471 h
    assert "throughput: 100 samples/s per GPU, --samples-per-s" in out


def test_default_calibration_is_used_and_named_without_measurements(paper, tmp_path):
    rows, out = run_plan(paper, tmp_path)
    assert rows["main"].gpu_hours == pytest.approx(4 * PER_METHOD / DEFAULT_SAMPLES_PER_S / 3600)
    assert "default calibration" in out and "Long-CLIP-L" in out
    assert "docci: 9,647 (docci protocol count)" in out
    assert "dci: 5,806 (config benchmarks.dci.expected_counts.train)" in out
    assert "vg: 14,575 (vg protocol count)" in out


def test_micro_plan_counts_the_pretraining_and_subset_sizes_by_hand(micro, tmp_path):
    # micro: 64 training images; pretrain 1 epoch of 64 // 16 = 4 steps x 16 = 64 samples;
    # fine-tuning 64 // (8 x 2) = 4 steps x 16 = 64 per run, fraction 0.5 -> 32 images -> 2 steps -> 32
    rows, out = run_plan(micro, tmp_path, samples_per_s=10.0)
    assert rows["backbone (pretrain)"].samples == 64
    assert rows["main"].samples == 3 * 64
    assert rows["fractions"].samples == 32 + 32  # longclip and hnclip at 0.5; the 1.0 runs are main's
    assert rows["main"].gpu_hours == pytest.approx(192 / 10 / 3600)
    assert sum(r.samples for r in rows.values()) == 64 + 192 + 2 * 64 + 0 + 64 + 64 + 64 + 64
    assert "synthetic: 64 (config benchmarks.synthetic.synthetic.n_train)" in out


def test_measured_rate_is_the_median_of_runs_with_the_configs_backbone(micro, tmp_path):
    results = tmp_path / "results"
    write_json(results / "backbone/model/model.json", model_json("micro", 32))
    for run, rate, backbone in (("a", 10.0, "micro"), ("b", 30.0, "micro"), ("c", 20.0, "micro"),
                                ("d", 1000.0, "tiny")):  # another backbone's run must not count
        write_json(results / f"runs/{run}/summary.json", {"samples_per_s": rate, "device": "cpu"})
        write_json(results / f"runs/{run}/model/model.json", model_json(backbone, 32))
    rows, out = run_plan(micro, tmp_path, results_dir=results)
    assert rows["main"].gpu_hours == pytest.approx(192 / 20.0 / 3600)
    assert "measured: median of 3 run(s) of backbone 'micro'" in out
    rows, out = run_plan(micro, tmp_path, results_dir=results, samples_per_s=5.0)
    assert rows["main"].gpu_hours == pytest.approx(192 / 5.0 / 3600)


def test_a_backbone_left_by_another_config_lends_no_measurements(micro, tmp_path):
    results = tmp_path / "results"
    write_json(results / "backbone/model/model.json", model_json("tiny", 64))  # the embedded default's
    write_json(results / "runs/a/summary.json", {"samples_per_s": 3.0, "device": "cpu"})
    write_json(results / "runs/a/model/model.json", model_json("tiny", 64))
    rows, out = run_plan(micro, tmp_path, results_dir=results)
    # nor does Long-CLIP-L's default calibration price the micro model: no estimate, said so
    assert rows["main"].gpu_hours != rows["main"].gpu_hours and rows["main"].samples == 3 * 64
    assert "throughput: none measured for backbone 'micro'" in out and "default calibration (" not in out
    total = next(line for line in out.splitlines() if line.startswith("total (each job once)"))
    assert total.split()[-1] == "?" and "GPU-hours (no throughput) of training" in out


def _micro_run(results: Path, name: str, framework: str, token_weight: float, rate: float, memory: float) -> None:
    write_json(results / f"runs/{name}/summary.json",
               {"samples_per_s": rate, "peak_memory_mb": memory, "device": "cpu", "device_type": "cpu",
                "config": {"framework": framework, "token_weight": token_weight, "micro_batch": 8}})
    write_json(results / f"runs/{name}/model/model.json", model_json("micro", 32))


def test_a_small_backbone_is_priced_from_its_own_runs_not_the_paper_shapes(micro, tmp_path):
    """The issue's case: an own-data config of a small model shown the paper-shape table's 19,351 MB and
    2.6 s/sample while its run used 915 MB at 122 samples/s."""
    committed = REPO / "src/hnclip/job_cost.json"
    results = tmp_path / "results"
    write_json(results / "backbone/model/model.json", model_json("micro", 32))
    _, out = run_plan(micro, tmp_path, results_dir=results, job_cost=committed)
    assert f"per-job needs: none measured for backbone 'micro' ({committed} measures 'ViT-L-14-longclip', " \
           "not this config's backbone 'micro'; no run of it in" in out
    assert "per-job needs, measured by benchmarks/job_cost.py" not in out and "diagnostics:" not in out

    _micro_run(results, "a", "longclip", 0.5, 122.0, 915.0)  # an HN-CLIP step (token term on)
    _micro_run(results, "b", "longclip", 0.5, 118.0, 902.0)
    _micro_run(results, "c", "lora", 0.0, 150.0, 700.0)
    rows, out = run_plan(micro, tmp_path, results_dir=results, job_cost=committed)
    assert "per-job needs of backbone 'micro', measured by its earlier runs" in out
    lines = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith("train ")}
    # hnclip: the larger peak, the median rate 120 samples/s (1/120 s per sample); lora: 150, 0.8x its time
    assert "915" in lines["train hnclip"] and " 120.0 " in lines["train hnclip"] and "0.00833" in lines["train hnclip"]
    assert "700" in lines["train lora"] and " 150.0 " in lines["train lora"] and "0.80x" in lines["train lora"]
    assert "19,351" not in out and "2.6" not in out.split("per-job needs")[1]
    # the plan's own throughput is the median of the three runs
    assert rows["main"].gpu_hours == pytest.approx(192 / 122.0 / 3600)

    # a job cost file that measured this backbone is used as before
    own = dict(json.loads(committed.read_text()), model="micro")
    write_json(tmp_path / "micro_cost.json", own)
    _, out = run_plan(micro, tmp_path, results_dir=results, job_cost=tmp_path / "micro_cost.json")
    assert "per-job needs, measured by benchmarks/job_cost.py" in out


def test_prepared_manifest_sizes_a_training_set_the_config_does_not_count(paper, tmp_path):
    manifest = tmp_path / "results/data/docci/train.csv"
    manifest.parent.mkdir(parents=True)
    with manifest.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["image_id", "image_path", "caption"])
        for i in range(3000):  # a caption with a line break must still count as one record
            writer.writerow([f"im{i}", f"/data/im{i}.jpg", "a long caption\nover two lines" if i == 7 else "c"])
    rows, out = run_plan(paper, tmp_path, samples_per_s=100.0)
    # DOCCI now 3,000 images -> 23 steps/epoch -> 230 x 128 = 29,440 per full run, instead of 96,000
    assert rows["main"].samples == 4 * (29_440 + 57_600 + 144_640)
    assert f"docci: 3,000 (prepared manifest {manifest})" in out


def test_run_samples_caps_at_max_steps_and_rejects_a_set_below_one_batch():
    train = {"micro_batch": 16, "accum_steps": 8, "epochs": 10}
    assert run_samples(train, 1000, "1") == 10 * 7 * 128  # 1000 // 128 = 7
    assert run_samples({**train, "max_steps": 50}, 1000, "1") == 50 * 128
    assert run_samples(train, 1000, "0.5") == 10 * 3 * 128  # ceil(500) // 128 = 3
    with pytest.raises(ValueError, match="fewer than one effective batch"):
        run_samples(train, 100, "1")


def test_profile_runtime_below_the_longest_run_is_flagged(paper, tmp_path):
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({
        "default-resources": {"slurm_partition": "cpu", "runtime": 60},
        "set-resources": {"train": {"slurm_partition": "a100", "gpu": 2, "runtime": 5}}}))
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0, profile=profile)
    # the longest run is a full VG run: 144,640 / 100 s / 2 GPUs = 723 s = 12 min > 5 min
    assert "train jobs on partition a100 with 2 GPU(s), runtime limit 5 min" in out
    assert "warning: the longest run needs ~12 min, more than the 5 min limit" in out
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0, profile=PROFILE)
    assert "runtime limit 1440 min" in out and "warning" not in out


def test_hnclip_plan_verb_prints_the_paper_plan_in_seconds(tmp_path):
    config = load_config(PAPER)  # the real paper grid, whatever it holds today
    # evaluations of runs, of the zero-shot backbone on each test benchmark of the main and retention
    # tables, and of the protocol table's test-split variants (its paper-split cells are counted already)
    zeroshot = len(config["experiments"]["main"]["benchmarks"]) + len(config["experiments"]["retention"]["benchmarks"])
    variants = {c["eval_path"] for c in protocols.protocol_spec(config)["cells"] if c["split"] != "test"}
    assert variants  # DOCCI, DCI and Long-DCI each have one
    runs = len(plan.all_runs(config))
    evaluations = len(plan.all_evaluations(config)) + zeroshot + len(variants)
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "hnclip", "plan", "--configfile", str(PAPER),
                           "--profile", str(PROFILE)], cwd=tmp_path, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "total (each job once)" in proc.stdout
    assert f"total: {runs} training jobs, {evaluations} evaluation jobs" in proc.stdout
    assert "default calibration" in proc.stdout  # an empty results folder: nothing measured
    assert elapsed < 20, f"hnclip plan took {elapsed:.1f} s"


def test_zero_shot_backbone_is_the_first_row_of_main_and_transfer_and_never_a_training_run(paper):
    config = load_config(paper)
    main = plan.experiment_spec(config, "main")["cells"]
    benchmarks = config["experiments"]["main"]["benchmarks"]
    assert [c["row"] for c in main[:len(benchmarks)]] == [plan.ZEROSHOT_ROW] * len(benchmarks)
    assert [c["eval_path"] for c in main[:len(benchmarks)]] == [f"results/evals/zeroshot/{b}.json" for b in benchmarks]
    assert all(c["run_dir"] is None and c["run"]["method"] == "zeroshot" for c in main if plan.is_zeroshot(c))
    transfer = plan.experiment_spec(config, "transfer")["cells"]
    assert {c["eval_benchmark"] for c in transfer if plan.is_zeroshot(c)} == {"docci", "dci", "long_dci", "urban1k"}
    assert all(r.method != "zeroshot" for r in plan.all_runs(config))
    # which benchmark each main run's epochs.csv scores: Long-DCI's runs train on DOCCI and log DOCCI and
    # Long-DCI after each epoch (the per-epoch claims speak of all four benchmarks); VG's runs log Urban-1K
    long_dci = next(c for c in main if c["eval_benchmark"] == "long_dci" and not plan.is_zeroshot(c))
    assert long_dci["epochs_benchmark"] == "long_dci"
    assert plan.epoch_eval_benchmarks(config, "docci") == ["docci", "long_dci"]
    assert plan.epoch_eval_benchmarks(config, "dci") == ["dci"]
    assert plan.epoch_eval_benchmarks(config, "vg") == ["urban1k"]
    assert {c["eval_benchmark"] for c in plan.epoch_cells({**plan.experiment_spec(config, "main"), "cells": main})} \
        == {"docci", "dci", "long_dci", "urban1k"}


def test_several_configfiles_layer_as_snakemake_layers_them(paper, tmp_path):
    overlay = tmp_path / "two_epochs.yaml"
    overlay.write_text("train: {epochs: 2}\nexperiments: {gamma_sweep: {gammas: [0.5]}}\n")
    config = load_config([paper, overlay])
    assert config["train"]["epochs"] == 2 and config["train"]["micro_batch"] == 16  # merged, not replaced
    assert config["experiments"]["gamma_sweep"]["gammas"] == [0.5]  # a list replaces the earlier one
    rows, text = run_plan([paper, overlay], tmp_path)
    assert f"hnclip plan for {paper} + {overlay}" in text
    assert rows["gamma_sweep"].new_train_jobs == 0  # gamma 0.5 alone: main's hnclip runs
    # 2 of 10 epochs: a fifth of the paper grid's samples per main run
    assert rows["main"].samples == PAPER_SAMPLES["main"] // 5


def test_hnclip_plan_reports_a_bad_config_in_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(PAPER_GRID + "\ntrian: {epochs: 2}\n")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run([sys.executable, "-m", "hnclip", "plan", "--configfile", str(bad)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "hnclip plan: config key trian: unknown key; did you mean 'train'?"


# ------------------------------------------------------------------------------------------ layering
REHEARSAL = REPO / "config/rehearsal.yaml"


def test_configfiles_layer_key_by_key_as_snakemake_layers_them():
    config = load_config([PAPER, REHEARSAL])
    assert config["scale"] == "rehearsal"
    assert config["train"]["micro_batch"] == 2 and config["train"]["epochs"] == 10  # kept from paper.yaml
    # mappings merge: the paper's label and test count stay unless overridden; lists replace
    assert config["benchmarks"]["docci"]["label"] == "DOCCI"
    assert config["benchmarks"]["docci"]["expected_counts"] == {"train": 8, "test": 4, "test_goal": 5}
    assert config["experiments"]["main"]["benchmarks"] == ["docci"]
    assert config["experiments"]["main"]["methods"] == load_config(PAPER)["experiments"]["main"]["methods"]
    # by hand: main 7 methods on DOCCI; plugin adds the 6 "+HN" methods; transfer longclip on DCI and VG;
    # fractions longclip, goal and hnclip at 0.5; gamma_sweep hnclip at 0; ablation hnclip_frozen; seeds
    # longclip s1
    assert len(plan.all_runs(config)) == 7 + 6 + 2 + 3 + 1 + 1 + 1
    # evaluations: one per run on its train set's benchmark (DCI's run on DOCCI, VG's on Urban-1K), plus
    # the transfer pairs off DOCCI (DOCCI -> DCI, DOCCI -> Long-DCI), plus retention: main's 7 DOCCI runs on
    # COCO's and Flickr30k's stand-ins
    assert len(plan.all_evaluations(config)) == 21 + 2 + 7 * 2


def test_the_ci_form_reuses_mains_runs_and_adds_one_per_missing_mechanism():
    config = load_config([PAPER, REHEARSAL, REPO / "config/rehearsal-ci.yaml"])
    assert config["rehearsal"]["sam_image_size"] == 256 and config["train"]["keep_checkpoint"] == "none"
    runs = {(r.train_set, r.method, r.fraction, r.seed) for r in plan.all_runs(config)}
    # by hand: main's 7 on DOCCI, FineLIP + HN (plugin), HN-CLIP frozen G on half (fractions), LoRA seed 1,
    # and Long-CLIP FT on VG paragraphs (transfer's VG -> Urban-1K: a train set without a test split)
    main = {("docci", m, "1", 0) for m in load_config(PAPER)["experiments"]["main"]["methods"]}
    assert runs == main | {("docci", "finelip_hn", "1", 0), ("docci", "hnclip_frozen", "0.5", 0),
                           ("docci", "lora", "1", 1), ("vg", "longclip", "1", 0)}
    assert "vg" not in plan.self_evaluated_train_sets(config)
    # evaluations: the 10 DOCCI runs on DOCCI, main's Long-CLIP FT on DCI and Long-DCI and VG's on
    # Urban-1K (transfer), and main's 7 runs on COCO's stand-in (retention)
    assert len(plan.all_evaluations(config)) == 10 + 2 + 1 + 7


def test_rehearsal_without_its_label_is_refused(tmp_path):
    override = tmp_path / "unlabelled.yaml"
    override.write_text("scale: paper\n")
    with pytest.raises(ValueError, match="config key scale: is 'paper'.*labelled 'rehearsal'"):
        load_config([PAPER, REHEARSAL, override])


# -------------------------------------------------------------------------------------- per-job needs
JOB_COST = {
    "date": "2026-12-01T06:00:00+00:00", "precision": "fp32",
    "machine": {"device": "cpu", "cpus": 2, "threads": 1, "processor": "x86_64"},
    "load_average_before": [9.5], "load_average_after": [10.5],
    "frameworks": {
        "hnclip": {"measured": [{"micro_batch": 2, "forward_backward_s": 20.0, "peak_rss_mb": 9000.0},
                                {"micro_batch": 4, "forward_backward_s": 40.0, "peak_rss_mb": 11000.0}]},
        "lora": {"measured": [{"micro_batch": 2, "forward_backward_s": 16.0, "peak_rss_mb": 5000.0},
                              {"micro_batch": 4, "forward_backward_s": 32.0, "peak_rss_mb": 6000.0}]},
    },
    "evaluate": {"measured": [{"batch": 8, "encode_s": 10.0, "peak_rss_mb": 3000.0},
                              {"batch": 16, "encode_s": 20.0, "peak_rss_mb": 3500.0}]},
}


def test_job_needs_follow_the_measured_lines_and_warn_against_the_profile(paper, tmp_path):
    cost = tmp_path / "job_cost.json"
    cost.write_text(json.dumps(JOB_COST))
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({
        "default-resources": {"runtime": 60, "mem_mb": 8000},
        "set-resources": {"train": {"gpu": 1, "mem_mb": 20000, "runtime": 20}}}))
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0, profile=profile, job_cost=cost)
    # at micro-batch 16: HN-CLIP 20 + 10 * 14 = 160 s (10 s/sample), 9,000 + 1,000 * 14 = 23,000 MB;
    # LoRA 128 s (8 s/sample, 0.8x), 12,000 MB. The paper grid's methods of the longclip framework all get
    # the top-level token weight 0.5, so they are HN-CLIP steps; DoRA was not measured.
    lines = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith(("train ", "evaluate "))}
    assert "23,000" in lines["train hnclip"] and " 10 " in lines["train hnclip"] and "1.00x" in lines["train hnclip"]
    assert "12,000" in lines["train lora"] and "0.80x" in lines["train lora"]
    # the longest run is a full VG run, 144,640 samples: 1446 s = 0.402 h for HN-CLIP, 0.8 of it for LoRA
    assert "0.402" in lines["train hnclip"] and "0.321" in lines["train lora"]
    assert "warning: train hnclip: mem_mb 20000 is less than the 23,000 MB measured at micro-batch 16 " \
           "(measured on a CPU" in out
    assert "warning: train hnclip: the longest run needs ~24 min, more than the 20 min runtime" in out
    assert "train lora: the longest run" not in out and "train lora: mem_mb" not in out
    assert "warning: the job costs have no measurement of 'dora'" in out
    # evaluation: 10 + 1.25 * 112 = 150 s per 128-item batch -> 1.25 s/item here; 3,000 + 62.5 * 120 = 10,500
    # MB > the default 8,000 MB. Its time scales by this CPU's speed against the plan's 100 samples/s
    # (0.01 s / 10 s): Long-DCI's 7,602 pairs take 7602 * 1.25 * 0.001 s = 9.5 s
    assert "10,500" in lines["evaluate"] and "0.00264" in lines["evaluate"]
    assert "warning: evaluate: mem_mb 8000 is less than the 10,500 MB" in out
    assert "load average 9.5 -> 10.5; times are inflated by other processes" in out



def test_paper_plan_prints_each_frameworks_memory_from_the_committed_measurements(tmp_path):
    committed = REPO / "src/hnclip/job_cost.json"
    cost = json.loads(committed.read_text())
    _, out = run_plan(PAPER, tmp_path, samples_per_s=150.0, job_cost=committed)
    assert f"per-job needs, measured by benchmarks/job_cost.py ({committed}) on {cost['date'][:10]}" in out
    lines = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith(("train ", "evaluate "))}
    for label in (*framework_names(), "hnclip"):  # every registered framework is measured, and HN-CLIP
        points = {m["micro_batch"]: m["peak_rss_mb"] for m in cost["frameworks"][label]["measured"]}
        if 16 in points:
            expected = points[16]
        else:  # by hand: the line through the two measured micro-batches, at the paper's 16
            (x1, y1), (x2, y2) = sorted(points.items())
            expected = y1 + (y2 - y1) / (x2 - x1) * (16 - x1) if y2 >= y1 else y1  # a falling line: flat
        assert f"{expected:,.0f}" in lines[f"train {label}"], (label, lines[f"train {label}"])
    assert "evaluate" in lines and "not measured" not in out
    # the paper's cost claim at paper scale: GOAL's and StructXLIP's time per sample against HN-CLIP's (the
    # needs table's "vs HN-CLIP" column, plain steps), beside the paper's 2.4x and 5.4x
    speed = out.split("the paper's cost claim", 1)[1]
    for label, paper in (("goal", "2.4x"), ("structxlip", "5.4x")):
        ratio = lines[f"train {label}"].split()[4]
        assert f"  {label}: {ratio} HN-CLIP's time (paper: {paper})" in speed, (label, ratio, speed)

def _diagnostics_lines(out: str) -> dict[str, str]:
    section = out.split("\ndiagnostics: ", 1)[1]
    return {line.split()[0]: line for line in section.splitlines()[2:] if line.startswith("  ") and "of" in line}


@pytest.mark.parametrize("section", ["frameworks", "probe"])
def test_diagnostics_share_follows_the_measured_probed_step_by_hand(paper, tmp_path, section):
    cost = json.loads(json.dumps(JOB_COST))
    probe = "loop: step .grad as the boosted gradient, one standard pass, embedding rows"
    # HN-CLIP: forward + backward 20 / 40 s at micro-batch 2 / 4, AdamW 1 s, a probed step 31 / 61 s: a probed
    # micro-batch adds (31 - 21) / 20 = (61 - 41) / 40 = 0.5 of its forward + backward, 160 s at 16: 80 s
    entry = json.loads(json.dumps(cost["frameworks"]["hnclip"]))
    for point, probed_step in zip(entry["measured"], (31.0, 61.0), strict=True):
        point.update(optimizer_s=1.0, probe_step_s=probed_step, probe=probe)
    if section == "probe":  # job_cost.py --probe-only: its own section, the frameworks' entries untouched
        cost["probe"] = {"frameworks": {"hnclip": {**entry, "date": "2026-12-02T02:00:00+00:00"}}}
    else:
        cost["frameworks"]["hnclip"] = entry
    path = tmp_path / "job_cost.json"
    path.write_text(json.dumps(cost))
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0, job_cost=path)
    lines = _diagnostics_lines(out)
    # a step of 8 micro-batches: 8 x 160 + 1 = 1281 s plain, 8 x 80 = 640 s more when probed (+50 %); every 10th
    # step probed: 64 / (1281 + 64) = 4.8 % of a long run's time
    assert "+50%" in lines["hnclip"] and "4.8%" in lines["hnclip"]
    assert lines["lora"].split()[-4:] == ["-", "-", "-", "-"]  # LoRA's measurement has no probed step
    grid = next(line for line in out.splitlines() if line.startswith("the grid: "))
    read, every = [float(part.rsplit("(", 1)[1]) for part in grid.split("%)")[:2]]
    # every HN-CLIP run probing would pay ~4.8 % of its time (a short run a little more: steps 1, 11, ...);
    # only the runs the report reads probe, a fraction of that
    assert 4.7 <= every <= 5.0 and 0 < read < every
    assert "2 kind(s) not measured" in grid and "an upper bound" not in out  # LoRA, DoRA
    assert "hnclip 0.50x" in out and ("2026-12-02 probe section" in out) is (section == "probe")


def test_the_paper_plan_spends_at_most_three_percent_of_its_gpu_hours_on_diagnostics(tmp_path):
    committed = REPO / "src/hnclip/job_cost.json"
    _, out = run_plan(PAPER, tmp_path, samples_per_s=150.0, job_cost=committed)
    grid = next(line for line in out.splitlines() if line.startswith("the grid: "))
    read = float(grid.split("%)")[0].rsplit("(", 1)[1])  # "... probing (2.4%); with every run ..."
    assert read <= 3.0, grid
    assert "21 of 93 runs (train.probe_runs: read" in out


def test_cost_line_ignores_a_falling_slope_and_takes_a_measured_size_as_is():
    from hnclip.job_needs import cost_at

    points = [{"b": 2, "t": 5.0}, {"b": 4, "t": 4.0}]
    assert cost_at(points, "b", 16, ("t",))["t"] == 5.0  # noise, not a cost that falls with more samples
    assert cost_at(points, "b", 4, ("t",)) == {"t": 4.0, "how": "measured"}
    assert cost_at([{"b": 2, "t": 3.0}, {"b": 3, "t": 4.0}, {"b": 4, "t": 5.0}], "b", 16, ("t",))["t"] == 17.0  # t = 1 + b


def test_cpu_runs_do_not_price_a_gpu_plan(paper, tmp_path):
    results = tmp_path / "results"
    write_json(results / "backbone/model/model.json", model_json("ViT-L-14-longclip", 224))
    write_json(results / "runs/a/summary.json", {"samples_per_s": 0.02, "device": "cpu", "device_type": "cpu"})
    write_json(results / "runs/a/model/model.json", model_json("ViT-L-14-longclip", 224))
    _, out = run_plan(paper, tmp_path, results_dir=results, profile=PROFILE)  # train jobs get a GPU
    assert "default calibration" in out
    _, out = run_plan(paper, tmp_path, results_dir=results)  # no resources: a CPU plan
    assert "measured: median of 1 run(s)" in out


def test_a_manifest_prepared_for_other_counts_does_not_size_the_paper_grid(paper, tmp_path):
    data = tmp_path / "results/data/docci"
    data.mkdir(parents=True)
    (data / "train.csv").write_text("image_id,image_path,caption\n" + "".join(f"i{i},/x/{i}.jpg,c\n" for i in range(3000)))
    write_json(data / "source.json", {"adapter": "docci", "expected_counts": {"train": 3000, "test": 4}})
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0)
    assert "docci: 9,647 (docci protocol count)" in out  # prepared for another config (a rehearsal's counts)
    write_json(data / "source.json", {"adapter": "docci", "expected_counts": {"test": 5000}})
    _, out = run_plan(paper, tmp_path, samples_per_s=100.0)
    assert "docci: 3,000 (prepared manifest" in out


def test_the_committed_job_costs_are_package_data_read_by_default():
    """`hnclip plan` without --job-cost reads hnclip/job_cost.json (importlib.resources; pyproject package-data)."""
    from hnclip.job_needs import job_cost_path, load_job_cost

    path = job_cost_path()
    assert path is not None and path.resolve() == (REPO / "src/hnclip/job_cost.json").resolve()
    assert load_job_cost(path)["frameworks"]
    assert '"job_cost.json"' in (REPO / "pyproject.toml").read_text()
    assert not (REPO / "benchmarks/job_cost.json").exists()


# ------------------------------------------------------------------------------------------ own data, not prepared
def _own_overlay(tmp_path, root, micro_batch=64) -> Path:
    overlay = tmp_path / "my-data.yaml"
    overlay.write_text(f"benchmarks:\n  my_captions: {{label: Mine, root: {root}}}\ntrain: {{micro_batch: {micro_batch}}}\n")
    return overlay


def _plan_cli(tmp_path, *configs):
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, "-m", "hnclip", "plan", "--configfile", *map(str, configs)], cwd=tmp_path,
                          env=env, capture_output=True, text=True)


def test_plan_on_own_data_not_prepared_and_not_there_says_so_in_one_line(tmp_path):
    proc = _plan_cli(tmp_path, REPO / "config/finetune.yaml", _own_overlay(tmp_path, tmp_path / "nowhere"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line, line
    assert line.startswith("hnclip plan: the training set size of benchmark 'my_captions' is unknown")
    assert f"{tmp_path / 'nowhere' / 'train.csv'} does not exist" in line
    assert "snakemake results/data/my_captions/train.csv" in line and "expected_counts.train" in line


def test_plan_on_own_data_not_prepared_counts_the_tables_rows(tmp_path):
    from PIL import Image

    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    for i in range(6):
        Image.new("RGB", (8, 8), (i, 0, 0)).save(data / f"images/{i}.png")
    # 5 rows, two of them a second caption of one image: 5 training pairs
    rows = ["images/0.png\ta", "images/0.png\tb", "images/1.png\tc", "images/2.png\td", "images/2.png\te"]
    (data / "train.csv").write_text("filepath\ttitle\n" + "\n".join(rows) + "\n")
    (data / "test.csv").write_text("filepath\ttitle\nimages/5.png\tf\n")
    proc = _plan_cli(tmp_path, REPO / "config/finetune.yaml", _own_overlay(tmp_path, data, micro_batch=2))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"my_captions: 5 (the rows of {data / 'train.csv'}, not prepared yet)" in proc.stdout
    # 3 epochs x 2 whole batches of 2 = 12 samples
    main_row = next(line for line in proc.stdout.splitlines() if line.startswith("main "))
    assert main_row.split()[5] == "12"
    proc = _plan_cli(tmp_path, REPO / "config/finetune.yaml", _own_overlay(tmp_path, data, micro_batch=64))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == ("hnclip plan: 5 training samples (fraction 1 of 5) are fewer than one effective "
                                   "batch (train.micro_batch 64 x train.accum_steps 1)")
