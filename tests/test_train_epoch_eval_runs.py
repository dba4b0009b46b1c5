"""Per-epoch evaluation where it is read: which runs evaluate after every epoch (derived from the
experiments), what the train rule gives the others, and that the evaluation never changes the weights.

The plan's choice is checked against the readers' own inputs (the run folders the epochs table, the
convergence table and figure and the claims declare: ``spec_runs("main")`` in the Snakefile, the main
spec's cells here), not against a hand list alone.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
from dry_runs import planned
from safetensors.torch import load_file
from test_train_probe_runs import effective, load  # the configs as validated, a run's TrainConfig
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

from hnclip import plan
from hnclip.frameworks.registry import framework_names

REPO = Path(__file__).resolve().parents[1]


def main_runs(config: dict) -> set[plan.Run]:
    return {plan.Run(c["run"]["train_set"], c["run"]["method"], plan.format_number(c["run"]["gamma"]),
                     plan.format_number(c["run"]["fraction"]), c["run"]["seed"])
            for c in plan.experiment_spec(config, "main")["cells"] if not plan.is_zeroshot(c)}


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_exactly_the_main_runs_evaluate_after_every_epoch(name):
    config = load(name)
    runs = plan.all_runs(config)
    read = main_runs(config)
    assert plan.epoch_evaluated_runs(config) == read == set(plan.epoch_readers(config))
    assert 0 < len(read) < len(runs) / 2  # most runs feed no per-epoch table
    for run in runs:
        assert effective(config, run).eval_every_epoch is (run in read), run.path
    everything = copy.deepcopy(config)
    everything["train"]["epoch_eval_runs"] = "all"
    assert all(effective(everything, r).eval_every_epoch for r in runs)
    nothing = copy.deepcopy(config)
    nothing["train"]["eval_every_epoch"] = False
    assert plan.epoch_evaluated_runs(nothing) == set()
    assert not any(effective(nothing, r).eval_every_epoch for r in runs)


def test_the_embedded_default_evaluates_its_main_runs_after_every_epoch():
    """Main's runs: one plain method per registered framework (the embedded default names each after its
    framework, CONTRIBUTING's step "a method using it") and HN-CLIP."""
    config = load("config.yaml")
    paths = sorted(r.path for r in plan.epoch_evaluated_runs(config))
    assert paths == sorted([*(f"synthetic/{m}/g0/f1/s0" for m in framework_names()), "synthetic/hnclip/g0.5/f1/s0"])
    assert len(plan.all_runs(config)) == 33


def test_a_run_nothing_reads_gets_no_eval_split_in_the_train_rule():
    """The train rule's command: the main run is handed the in-domain test split, a gamma-sweep run is not
    and passes eval_every_epoch=false (a dry run of the embedded default's Snakefile, printing commands)."""
    proc = planned()  # an empty folder: every job is planned
    assert proc.returncode == 0, proc.stderr[-2000:]
    commands = [line for line in proc.stdout.splitlines() if " train --init " in line]
    read = next(c for c in commands if "--out results/runs/synthetic/longclip/g0/f1/s0 " in c)
    unread = next(c for c in commands if "--out results/runs/synthetic/hnclip/g0.75/f1/s0 " in c)
    assert "--eval-manifest results/data/synthetic/test.csv" in read and "eval_every_epoch=true" in read
    assert "--eval-manifest" not in unread and "eval_every_epoch=false" in unread
    assert "eval_every_epoch=true" not in unread


def test_a_run_without_the_epoch_evaluation_trains_the_same_weights(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    evaluation = {"eval_manifest": paths["train_manifest"], "eval_store_dir": paths["store_dir"]}
    settings = dict(gamma=0.5, token_weight=0.5, epochs=3)
    evaluated = run_training(paths, tmp_path / "evaluated", small_config(**settings), **evaluation)
    plain = run_training(paths, tmp_path / "plain", small_config(eval_every_epoch=False, **settings))
    assert evaluated["config"]["eval_every_epoch"] is True and plain["config"]["eval_every_epoch"] is False
    weights = [load_file(str(tmp_path / d / "out/model/model.safetensors")) for d in ("evaluated", "plain")]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    assert len(read_csv_rows(tmp_path / "evaluated/out/epochs.csv")) == 3
    for name in ("epochs.csv", "epoch_ranks.csv"):  # the declared outputs exist, with their header only
        evaluated_lines = (tmp_path / "evaluated/out" / name).read_text().splitlines()
        assert (tmp_path / "plain/out" / name).read_text().splitlines() == evaluated_lines[:1]
    dynamics = [read_csv_rows(tmp_path / d / "out/dynamics.csv") for d in ("evaluated", "plain")]
    assert [r["loss"] for r in dynamics[0]] == [r["loss"] for r in dynamics[1]]
