"""The experiment registry (:mod:`hnclip.experiments`): a new experiment is one module and one registration.

A dummy experiment, one module's text (:data:`DUMMY_MODULE`), is registered in a test (the registry restored
afterwards, nothing written to the checkout) and reaches the generated schema, the plan (its cells, runs and
evaluations), the config checks (shared and its own), the table builder (its layout) and its figure, drawn by
``hnclip figure``; in a copy of the checkout, written as a module plus its import, it reaches the workflow's
figure job and the report. The other tests fail when a step of CONTRIBUTING.md's "An experiment" checklist is
skipped. Expected paths, runs and numbers are written out by hand here, never taken from the code under test.
"""

from __future__ import annotations

import importlib
import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from config_docs_script import load_config_docs

from hnclip import experiments, plan
from hnclip.analysis.tables import build_table
from hnclip.config.validation import ConfigError, validate_config
from hnclip.config_checks import check_config
from hnclip.experiments import registry

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"

# the dummy experiment's module, as a contributor writes src/hnclip/experiments/dummy.py: its cells, its own
# check, its config keys, its table and its figure, and its registration
DUMMY_MODULE = '''"""A dummy experiment: each method trained on parts of each benchmark's train set, scored there."""

from hnclip.config.errors import fail
from hnclip.experiments.registry import FigureLayout, TableLayout, number_list, register_experiment, string_list


def cells(grid, exp):
    return [grid.cell(grid.run(grid.in_domain(b), m, fraction=f), b, grid.method_label[m], grid.bench_label[b],
                      x=float(f))
            for m in exp["methods"] for f in exp["fractions"] for b in exp["benchmarks"]]


def check(config, exp):
    for i, f in enumerate(exp["fractions"]):
        if not 0 < f < 1:
            fail(f"experiments.dummy.fractions[{i}]", f"{f} is not a part of the train set")


ENTRY = register_experiment(
    name="dummy", cells=cells, check=check, table=TableLayout("swept", rows=("method", "fraction"), swept="fraction"),
    description="A dummy: each method on parts of each train set.",
    settings={"benchmarks": string_list("Evaluation benchmarks."), "methods": string_list("Methods trained."),
              "fractions": number_list("Parts of the train set.", exclusiveMinimum=0, maximum=1)},
    figure=FigureLayout("sweep", title="R@1 vs the dummy's fraction"))
'''
DUMMY_SETTINGS = {"benchmarks": ["synthetic"], "methods": ["hnclip"], "fractions": [0.25]}


@pytest.fixture
def dummy_experiment(monkeypatch):
    """``dummy`` registered the way a new experiment is (its module run), for this test only (the registry is
    restored)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    namespace = {}
    exec(compile(DUMMY_MODULE, "dummy.py", "exec"), namespace)
    return namespace["ENTRY"]


@pytest.fixture
def micro(dummy_experiment, tmp_path):
    """The end-to-end test's micro config given the dummy, validated against the schema as config_docs.py
    writes it with the dummy registered (the committed schema knows no dummy)."""
    schema = tmp_path / "config.schema.yaml"
    schema.write_text(load_config_docs().updated_schema(SCHEMA.read_text()))
    config = yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text())
    config["experiments"]["dummy"] = dict(DUMMY_SETTINGS)
    with pytest.raises(ConfigError, match="experiments"):
        validate_config(yaml.safe_load(yaml.safe_dump(config)), SCHEMA)
    return validate_config(config, schema)


def test_a_registered_experiment_reaches_the_schema_the_plan_the_checks_the_table_and_its_figure(
        dummy_experiment, micro, tmp_path, monkeypatch):
    from hnclip.cli import main as hnclip

    assert experiments.experiment_names()[-1] == "dummy"
    block = yaml.safe_load(load_config_docs().updated_schema(SCHEMA.read_text()))["properties"]["experiments"]
    assert block["properties"]["dummy"]["required"] == ["benchmarks", "methods", "fractions"]
    assert block["properties"]["dummy"]["properties"]["fractions"]["items"] == {
        "type": "number", "exclusiveMinimum": 0, "maximum": 1}
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

    # the table: its layout (a row per method and fraction, R@1 each way), from a hand-made record
    metrics = {"i2t_r1": 40.0, "i2t_r5": 70.0, "i2t_r10": 80.0, "t2i_r1": 30.0, "t2i_r5": 60.0, "t2i_r10": 75.0}
    record = {"run": cell["run"], "eval_benchmark": "synthetic", "split": "test", "n_images": 16, "n_texts": 16,
              "metrics": metrics, "wall_time_s": 1.0}
    table = build_table(spec, [record])
    assert table.attrs["experiment"] == "dummy"
    assert list(table.index) == [("HN-CLIP", 0.25)]
    group = cell["group"]
    assert [c[:3] for c in table.columns if c[3] == "mean"] == [(group, "I->T", "R@1"), (group, "T->I", "R@1")]
    assert table.loc[("HN-CLIP", 0.25), (group, "T->I", "R@1", "mean")] == 30.0
    assert math.isnan(table.loc[("HN-CLIP", 0.25), (group, "T->I", "R@1", "std")])  # one seed

    # its figure: in the report's figures, after the others, and drawn by `hnclip figure dummy` from the spec
    assert experiments.report_figures(micro["experiments"])[-1] == "dummy"
    assert "dummy" in experiments.figured_experiments()
    monkeypatch.chdir(tmp_path)
    Path(cell["eval_path"]).parent.mkdir(parents=True)
    Path(cell["eval_path"]).write_text(json.dumps(record))
    Path("dummy.json").write_text(json.dumps(spec))
    assert hnclip(["figure", "dummy", "--spec", "dummy.json", "--out-prefix", "figures/dummy"]) in (0, None)
    assert Path("figures/dummy.png").stat().st_size > 1000 and "<svg" in Path("figures/dummy.svg").read_text()


def test_a_new_experiment_module_and_its_import_reach_the_figure_job_and_the_report(tmp_path):
    """In a copy of the checkout: the dummy written as src/hnclip/experiments/dummy.py, imported in
    ``__init__``, the generated files rewritten (config_docs.py), and configured: the workflow plans its spec,
    its table and its figure (``hnclip figure dummy``), which the report reads. Nothing else is edited."""
    from checkout import copy_checkout, user_env

    root = copy_checkout(tmp_path / "checkout")
    (root / "src/hnclip/experiments/dummy.py").write_text(DUMMY_MODULE)
    init = root / "src/hnclip/experiments/__init__.py"
    last = "from hnclip.experiments import retention  # noqa: F401\n"
    init.write_text(init.read_text().replace(last, last + "from hnclip.experiments import dummy  # noqa: F401\n"))
    env = user_env()
    subprocess.run([sys.executable, "workflow/scripts/config_docs.py"], cwd=root, env=env, check=True)
    config = yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text())
    config["experiments"]["dummy"] = dict(DUMMY_SETTINGS)
    (tmp_path / "dummy.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1", "--configfile",
                           str(tmp_path / "dummy.yaml")], cwd=root, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    figure_job = re.search(r"rule figure_from_evaluations:\n(?:    .*\n)*?    wildcards: experiment=dummy\n", out)
    assert figure_job, "no figure job for the dummy"
    assert "python -m hnclip figure dummy --spec results/specs/dummy.json --out-prefix results/figures/dummy " in out
    for rule in ("spec", "table"):
        assert re.search(rf"rule {rule}:\n(?:    .*\n)*?    wildcards: experiment=dummy\n", out), rule
    report_input = re.search(r"rule report:\n    input: (.*)\n", out).group(1).split(", ")
    assert {"results/figures/dummy.png", "results/tables/dummy.csv", "results/specs/dummy.json"} <= set(report_input)


@pytest.mark.parametrize(("settings", "key"), [
    ({"fractions": [1.0]}, r"experiments.dummy.fractions\[0\]"),  # its own check
    ({"benchmarks": ["nope"]}, r"experiments.dummy.benchmarks\[0\]"),  # the shared ones reach it too
    ({"methods": ["nope"]}, r"experiments.dummy.methods\[0\]"),
    ({"benchmarks": ["synthetic_shift"]}, r"experiments.dummy.benchmarks\[0\]: benchmark 'synthetic_shift' has no "
                                          "train_set"),
])
def test_a_registered_experiment_gets_its_own_and_the_shared_config_checks(micro, settings, key):
    micro["experiments"]["dummy"].update(settings)
    with pytest.raises(ConfigError, match=f"config key {key}"):
        check_config(micro)


def test_an_unregistered_or_twice_registered_name_or_an_incomplete_row_is_refused(dummy_experiment, micro):
    micro["experiments"]["dummy2"] = dict(micro["experiments"]["dummy"])
    with pytest.raises(ValueError, match="unknown experiment 'dummy2'; known: main, .*, dummy$"):
        plan.experiment_spec(micro, "dummy2")
    row = {"name": "dummy", "cells": dummy_experiment.cells, "table": experiments.TableLayout("seeds"),
           "settings": dummy_experiment.settings, "description": "a second dummy"}
    with pytest.raises(ValueError, match="already registered"):
        registry.register_experiment(**row)
    for change, message in [({"settings": {"methods": {"type": "string"}}}, "a schema node with a description"),
                            ({"description": ""}, "a description"),
                            ({"figure": experiments.FigureLayout("sweep")}, "a sweep figure needs a swept table")]:
        with pytest.raises(ValueError, match=message):
            registry.register_experiment(**{**row, "name": "dummy3", **change})
    with pytest.raises(ValueError, match="swept"):
        experiments.TableLayout("swept")


# --- CONTRIBUTING.md's checklist: each test fails when its step is skipped ----------------------------------
def test_every_experiment_module_is_registered_under_its_name():
    """Step 1 and 2: a module in src/hnclip/experiments/ registers the experiment it is named after, and
    the package imports it (else it is in no listing)."""
    folder = REPO / "src/hnclip/experiments"
    modules = sorted(p.stem for p in folder.glob("*.py") if p.stem not in ("__init__", "registry"))
    assert sorted(experiments.EXPERIMENTS) == modules
    for name in modules:
        assert importlib.import_module(f"hnclip.experiments.{name}").ENTRY.name == name


def test_the_registration_order_is_the_packages_import_order():
    """The order that orders the workflow's outputs is where each module is imported in ``__init__``."""
    init = (REPO / "src/hnclip/experiments/__init__.py").read_text()
    assert experiments.EXPERIMENTS == tuple(re.findall(r"^from hnclip.experiments import (\w+)  # noqa: F401$",
                                                       init, re.M))
    assert experiments.EXPERIMENTS[0] == "main"  # retention scores main's models, and main's table comes first
    assert plan.EXPERIMENTS == experiments.EXPERIMENTS


def test_the_schema_has_a_block_for_every_registered_experiment():
    """Step 3: ``experiments.<name>`` in the schema, in registration order, as the row has it (config_docs.py
    writes it; tests/test_config_docs.py fails while it is stale)."""
    schema = yaml.safe_load(SCHEMA.read_text())["properties"]["experiments"]["properties"]
    assert tuple(schema) == experiments.EXPERIMENTS
    # one by hand: the gamma sweep's keys, all required, each with its bounds
    assert schema["gamma_sweep"]["required"] == ["benchmarks", "method", "gammas"]
    assert schema["gamma_sweep"]["additionalProperties"] is False
    assert schema["gamma_sweep"]["properties"]["gammas"]["items"] == {"type": "number", "minimum": 0}
    assert schema["ablation"]["properties"]["variants"]["items"]["required"] == ["label", "method"]  # gamma optional


@pytest.mark.parametrize("name", ["config.yaml", "paper.yaml"])
def test_the_toy_and_paper_configs_run_every_registered_experiment(name):
    """Step 4: the embedded default and the paper's grid configure it."""
    config = yaml.safe_load((REPO / "config" / name).read_text())
    assert tuple(config["experiments"]) == experiments.EXPERIMENTS


def test_the_rehearsal_layers_shrink_every_experiment_that_trains():
    """Step 5: config/rehearsal.yaml shrinks every experiment that trains runs of its own (else the paper's
    grid of it, on every benchmark, runs on the CPU), and config/rehearsal-ci.yaml every one but main (whose
    DOCCI runs the others reuse there)."""
    trains = [n for n in experiments.EXPERIMENTS if experiments.experiment_entry(n).trains]
    full = yaml.safe_load((REPO / "config/rehearsal.yaml").read_text())["experiments"]
    ci = yaml.safe_load((REPO / "config/rehearsal-ci.yaml").read_text())["experiments"]
    assert [n for n in trains if n not in full] == []
    assert [n for n in experiments.EXPERIMENTS if n != "main" and n not in ci] == []


def test_every_figure_an_experiment_declares_is_drawn_by_the_workflow():
    """Step 1: a figure from its runs' logs has a rule of its own writing results/figures/<name>.png; one from
    its table is written by the figure rule for every experiment that declares one (no experiment names)."""
    rules = "\n".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    for name in experiments.EXPERIMENTS:
        for figure in experiments.experiment_entry(name).log_figures:
            assert f'"results/figures/{figure}.png"' in rules, (name, figure)
    assert experiments.figured_experiments() == ("fractions", "gamma_sweep")
    assert '"results/figures/{experiment}.png"' in rules and "figured_experiments()" in rules
