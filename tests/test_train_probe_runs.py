"""Probes where they are read: which runs probe (derived from the experiments), what a run without the
probe logs, and how a run whose probing changed meets its checkpoint.

The plan's choice is checked against the report's own reader (``hnclip.analysis.premise.run_role`` on
the summary each run will write, and the figure's ``dynamics_panels`` choice), not against a hand list.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file
from snakemake.utils import validate
from test_train_run import unfinished_run
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

import hnclip.training.objective as objective_module
from hnclip import paths, plan
from hnclip.analysis.premise import run_role
from hnclip.config.train import TrainConfig
from hnclip.dynamics_log import CHEAP_COLUMNS, PROBE_COLUMNS, PROBE_ROLES

REPO = Path(__file__).resolve().parents[1]
SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def load(name: str) -> dict:
    config = yaml.safe_load((REPO / "config" / name).read_text())
    validate(config, SCHEMA)
    return config


def effective(config: dict, run: plan.Run) -> TrainConfig:
    return TrainConfig.from_overrides(dict(i.split("=", 1) for i in plan.train_overrides(config, run)))


def summary_of(config: dict, run: plan.Run) -> dict:
    """The parts of the summary.json ``run_role`` reads, as ``hnclip train`` will write them."""
    subset = None if float(run.fraction) == 1 else paths.subset_path(run.train_set, run.fraction, run.seed)
    return {"config": effective(config, run).to_dict(), "run": {"subset_path": subset}}


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_exactly_the_runs_the_premise_and_the_dynamics_figure_read_probe(name):
    config = load(name)
    runs = plan.all_runs(config)
    figure_runs = {plan.Run(c["run"]["train_set"], c["run"]["method"], plan.format_number(c["run"]["gamma"]),
                            plan.format_number(c["run"]["fraction"]), c["run"]["seed"])
                   for c in plan.dynamics_figure_cells(plan.experiment_spec(config, "fractions")).values()}
    read = {r for r in runs if run_role(summary_of(config, r), config["gamma"]) in PROBE_ROLES} | figure_runs
    assert plan.probed_runs(config) == read == set(plan.probe_readers(config))
    assert 0 < len(read) < len(runs) / 2  # most runs feed no probe column
    for run in runs:
        cfg = effective(config, run)
        assert cfg.dynamics_probe is (run in read), run.path
        assert cfg.dynamics_every == config["train"]["dynamics_every"]  # the rate itself is the configured one
    everything = copy.deepcopy(config)
    everything["train"]["probe_runs"] = "all"
    assert all(effective(everything, r).dynamics_probe for r in runs)
    assert plan.probed_runs(everything) == set(runs)


def test_the_embedded_default_probes_its_plain_hn_and_figure_runs():
    readers = {r.path: why for r, why in plan.probe_readers(load("config.yaml")).items()}
    assert readers == {
        **{f"synthetic/longclip/g0/f1/s{s}": ["premise (plain run)"] for s in (0, 1, 2)},
        "synthetic/longclip_hn/g0.5/f1/s0": ["premise (hn run)"],
        **{f"synthetic/hnclip/g0.5/f{f}/s0": ["gradient-dynamics figure"] for f in ("0.05", "0.2", "0.5", "1")},
    }


def test_a_run_that_never_probes_keeps_its_command_line():
    config = load("config.yaml")
    config["train"]["dynamics_every"] = 0
    run = next(r for r in plan.all_runs(config) if r not in plan.probed_runs(config))
    assert not any(i.startswith("dynamics_probe") for i in plan.train_overrides(config, run))


# --------------------------------------------------------------------------------------- the training run
SETTINGS = dict(gamma=0.5, token_weight=0.5, dynamics_every=1, epochs=2)


def test_a_run_without_the_probe_trains_the_same_weights_and_logs_the_cheap_columns(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    probed = run_training(paths, tmp_path / "probed", small_config(**SETTINGS))
    plain = run_training(paths, tmp_path / "plain", small_config(dynamics_probe=False, **SETTINGS))
    assert plain["config_hash"] == probed["config_hash"] and plain["config"]["dynamics_probe"] is False
    weights = [load_file(str(tmp_path / d / "out/model/model.safetensors")) for d in ("probed", "plain")]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
    rows = {d: read_csv_rows(tmp_path / d / "out/dynamics.csv") for d in ("probed", "plain")}
    assert list(rows["plain"][0]) == list(rows["probed"][0])  # one header: every reader finds its columns
    for with_probe, without in zip(rows["probed"], rows["plain"], strict=True):
        assert all(with_probe[c] == without[c] for c in CHEAP_COLUMNS)
        assert all(with_probe[c] != "" for c in PROBE_COLUMNS)
        assert all(without[c] == "" for c in PROBE_COLUMNS)


def test_a_finished_run_without_the_probe_trains_again_when_it_must_probe(tmp_path, caplog):
    paths = make_dataset(tmp_path / "data", n=16)
    first = run_training(paths, tmp_path, small_config(dynamics_probe=False, **SETTINGS))
    with caplog.at_level("WARNING", logger="hnclip.training.checkpoint"):
        again = run_training(paths, tmp_path, small_config(**SETTINGS))
    assert "finished without the gradient probe" in caplog.text
    assert again["checkpoint_sha256"] == first["checkpoint_sha256"]  # trained again: the same weights
    assert all(r["grad_norm_boosted"] != "" for r in read_csv_rows(tmp_path / "out/dynamics.csv"))


def test_a_finished_probed_run_is_rebuilt_without_training_when_its_probe_is_turned_off(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path / "data", n=16)
    run_training(paths, tmp_path, small_config(**SETTINGS))
    dynamics = (tmp_path / "out/dynamics.csv").read_text()
    monkeypatch.setattr(objective_module, "compute_objective", lambda *a, **k: pytest.fail("trained again"))
    run_training(paths, tmp_path, small_config(dynamics_probe=False, **SETTINGS))
    assert (tmp_path / "out/dynamics.csv").read_text() == dynamics  # the log keeps the columns it has


def test_an_unfinished_run_without_the_probe_is_refused_when_it_must_probe(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path / "data", n=16)
    unfinished_run(paths, tmp_path, small_config(dynamics_probe=False, checkpoint_every=1, **SETTINGS), monkeypatch)
    with pytest.raises(RuntimeError, match="trained without the gradient probe") as error:
        run_training(paths, tmp_path, small_config(checkpoint_every=1, **SETTINGS))
    assert f"rm {tmp_path / 'ckpt' / 'last.pt'}" in str(error.value)
