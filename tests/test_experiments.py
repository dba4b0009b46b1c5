"""The experiment registry (:mod:`hnclip.experiments`): a new experiment is one module and one registration.

A dummy experiment registered in a test (the registry restored afterwards, nothing written to the checkout)
reaches the plan (its cells, runs and evaluations), the config checks (shared and its own) and the table
builder (its layout), as tests/test_config_docs.py shows for a framework. The other tests fail when a step of
CONTRIBUTING.md's "An experiment" checklist is skipped. Expected paths, runs and numbers are written out by
hand here, never taken from the code under test.
"""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import pytest
import yaml

from hnclip import experiments, plan
from hnclip.analysis.claims import SECTIONS
from hnclip.analysis.tables import build_table
from hnclip.config.errors import fail
from hnclip.config.validation import ConfigError, validate_config
from hnclip.config_checks import check_config
from hnclip.experiments import TableLayout, registry

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


# --- the dummy experiment's module: its cells, its own check, its registration (in the fixture) -------------
def _dummy_cells(grid, exp: dict) -> list[dict]:
    """Each method of ``methods`` trained on a ``fraction`` of each benchmark's train set, scored there."""
    return [grid.cell(grid.run(grid.in_domain(b), m, fraction=exp["fraction"]), b, grid.method_label[m],
                      grid.bench_label[b])
            for m in exp["methods"] for b in exp["benchmarks"]]


def _dummy_check(config: dict, exp: dict) -> None:
    if not 0 < exp["fraction"] < 1:
        fail("experiments.dummy.fraction", f"{exp['fraction']} is not a part of the train set")


@pytest.fixture
def dummy_experiment(monkeypatch):
    """``dummy`` registered the way a new experiment is, for this test only (the registry is restored)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return registry.register_experiment(name="dummy", cells=_dummy_cells, check=_dummy_check, sections=("main",),
                                        table=TableLayout("rows", ks=(1, 5)))


@pytest.fixture
def micro():
    """The end-to-end test's micro config, validated (the committed schema knows no dummy), then given one."""
    config = validate_config(yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text()), SCHEMA)
    config["experiments"]["dummy"] = {"benchmarks": ["synthetic"], "methods": ["hnclip"], "fraction": 0.25}
    return config


def test_a_registered_experiment_reaches_the_plan_the_checks_and_the_table(dummy_experiment, micro):
    assert experiments.experiment_names()[-1] == "dummy"
    check_config(micro)  # its own check passes, and the shared ones (known benchmarks, methods, a train set)

    # the plan: its one cell, the run it asks for (a fraction no other experiment trains) and its evaluation
    spec = plan.experiment_spec(micro, "dummy")
    assert spec["experiment"] == "dummy" and spec["settings"] == micro["experiments"]["dummy"]
    [cell] = spec["cells"]
    assert cell["run"] == {"train_set": "synthetic", "method": "hnclip", "gamma": 0.5, "fraction": 0.25, "seed": 0}
    assert cell["eval_path"] == "results/evals/synthetic/hnclip/g0.5/f0.25/s0/synthetic.json"
    assert cell["run_dir"] == "results/runs/synthetic/hnclip/g0.5/f0.25/s0"
    assert plan.Run("synthetic", "hnclip", "0.5", "0.25", 0) in plan.all_runs(micro)
    without = {**micro, "experiments": {k: v for k, v in micro["experiments"].items() if k != "dummy"}}
    assert plan.Run("synthetic", "hnclip", "0.5", "0.25", 0) not in plan.all_runs(without)

    # the table: its layout (one row per method, R@1 and R@5 each way), from a hand-made record
    metrics = {"i2t_r1": 40.0, "i2t_r5": 70.0, "i2t_r10": 80.0, "t2i_r1": 30.0, "t2i_r5": 60.0, "t2i_r10": 75.0}
    record = {"run": cell["run"], "eval_benchmark": "synthetic", "split": "test", "n_images": 16, "n_texts": 16,
              "metrics": metrics, "wall_time_s": 1.0}
    table = build_table(spec, [record])
    assert table.attrs["experiment"] == "dummy"
    assert list(table.index) == ["HN-CLIP"]
    group = cell["group"]
    assert [c[:3] for c in table.columns if c[3] == "mean"] == [
        (group, "I->T", "R@1"), (group, "I->T", "R@5"), (group, "T->I", "R@1"), (group, "T->I", "R@5")]
    assert table.loc["HN-CLIP", (group, "I->T", "R@5", "mean")] == 70.0
    assert table.loc["HN-CLIP", (group, "T->I", "R@1", "mean")] == 30.0
    assert math.isnan(table.loc["HN-CLIP", (group, "T->I", "R@1", "std")])  # one seed


@pytest.mark.parametrize(("settings", "key"), [
    ({"fraction": 1.0}, "experiments.dummy.fraction"),  # its own check
    ({"benchmarks": ["nope"]}, r"experiments.dummy.benchmarks\[0\]"),  # the shared ones reach it too
    ({"methods": ["nope"]}, r"experiments.dummy.methods\[0\]"),
    ({"benchmarks": ["synthetic_shift"]}, r"experiments.dummy.benchmarks\[0\]: benchmark 'synthetic_shift' has no "
                                          "train_set"),
])
def test_a_registered_experiment_gets_its_own_and_the_shared_config_checks(dummy_experiment, micro, settings, key):
    micro["experiments"]["dummy"].update(settings)
    with pytest.raises(ConfigError, match=f"config key {key}"):
        check_config(micro)


def test_an_unregistered_or_twice_registered_name_says_what_is_known(dummy_experiment, micro):
    micro["experiments"]["dummy2"] = dict(micro["experiments"]["dummy"])
    with pytest.raises(ValueError, match="unknown experiment 'dummy2'; known: main, plugin, .*, retention, dummy$"):
        plan.experiment_spec(micro, "dummy2")
    with pytest.raises(ValueError, match="already registered"):
        registry.register_experiment(name="dummy", cells=_dummy_cells, table=TableLayout("seeds"))
    with pytest.raises(ValueError, match="swept"):
        TableLayout("swept")


# --- CONTRIBUTING.md's checklist: each test fails when its step is skipped ----------------------------------
def test_every_experiment_module_is_registered_under_its_name():
    """Step 1 and 2: a module in src/hnclip/experiments/ registers the experiment it is named after, and
    the package imports it (else it is in no listing)."""
    folder = REPO / "src/hnclip/experiments"
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "registry"))
    assert sorted(experiments.EXPERIMENTS) == modules
    for name in modules:
        assert importlib.import_module(f"hnclip.experiments.{name}").ENTRY.name == name


def test_the_built_in_experiments_keep_the_order_that_orders_the_workflows_outputs():
    assert experiments.EXPERIMENTS == ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds",
                                       "retention")
    assert plan.EXPERIMENTS == experiments.EXPERIMENTS


def test_the_schema_has_a_block_for_every_registered_experiment():
    """Step 3: ``experiments.<name>`` in the schema, in registration order."""
    schema = yaml.safe_load(SCHEMA.read_text())
    assert tuple(schema["properties"]["experiments"]["properties"]) == experiments.EXPERIMENTS


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_the_toy_and_paper_configs_run_every_registered_experiment(name):
    """Step 4: the embedded default and the paper's grid configure it."""
    config = yaml.safe_load((REPO / "config" / name).read_text())
    assert tuple(config["experiments"]) == experiments.EXPERIMENTS


def test_every_experiment_feeds_known_claim_sections():
    """Step 5: the claim sections an experiment's table feeds are sections the claims have."""
    for name in experiments.EXPERIMENTS:
        entry = experiments.experiment_entry(name)
        assert set(entry.sections) <= set(SECTIONS), name
    fed = {s for name in experiments.EXPERIMENTS for s in experiments.experiment_entry(name).sections}
    assert fed == set(SECTIONS) - {"premise", "cost"}  # those two read runs' logs, not an experiment's table
