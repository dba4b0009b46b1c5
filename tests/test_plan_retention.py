"""The retention experiment: its cells (the zero-shot backbone and the main table's very runs on each
short-caption benchmark), the config checks it brings, and the embedded default's short-caption view
of the synthetic test scenes (``files_from`` + ``caption_column``)."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml

from hnclip import plan
from hnclip.config.validation import ConfigError, validate_config
from hnclip.config_checks import check_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def load(name: str) -> dict:
    return validate_config(yaml.safe_load((REPO / "config" / name).read_text()), SCHEMA)


@pytest.fixture(scope="module")
def toy():
    return load("config.yaml")


@pytest.fixture(scope="module")
def paper():
    return load("paper.yaml")


def _run_of(cell) -> plan.Run:
    r = cell["run"]
    return plan.Run(r["train_set"], r["method"], plan.format_number(r["gamma"]), plan.format_number(r["fraction"]),
                    r["seed"])


@pytest.mark.parametrize("which", ["toy", "paper"])
def test_cells_are_the_backbone_and_every_main_run_on_every_retention_benchmark(which, request):
    config = request.getfixturevalue(which)
    spec = plan.experiment_spec(config, "retention")
    main = plan.experiment_spec(config, "main")
    benchmarks = config["experiments"]["retention"]["benchmarks"]
    methods = config["experiments"]["main"]["methods"]
    # hand-derived: the main table's train sets (toy: synthetic; paper: DOCCI, DCI and VG, Long-DCI training
    # on DOCCI and Urban-1K on VG)
    train_sets = {"toy": ["synthetic"], "paper": ["docci", "dci", "vg"]}[which]
    assert len(spec["cells"]) == len(benchmarks) * len(train_sets) * (1 + len(methods))
    zeroshot = [c for c in spec["cells"] if plan.is_zeroshot(c)]
    assert {(c["eval_benchmark"], c["group"]) for c in zeroshot} == {
        (b, f"{config['benchmarks'][t]['label']} -> {config['benchmarks'][b]['label']}")
        for b in benchmarks for t in train_sets}
    assert all(c["eval_path"] == f"results/evals/zeroshot/{c['eval_benchmark']}.json" for c in zeroshot)
    runs = [c for c in spec["cells"] if not plan.is_zeroshot(c)]
    # the very runs of the main table: no run of its own
    assert {_run_of(c) for c in runs} == {_run_of(c) for c in main["cells"] if not plan.is_zeroshot(c)}
    assert {(c["run"]["method"], c["run"]["train_set"], c["eval_benchmark"]) for c in runs} == {
        (m, t, b) for m in methods for t in train_sets for b in benchmarks}
    labels = {config["methods"][m]["label"] for m in methods}
    assert {c["row"] for c in runs} == labels
    for c in runs:
        assert c["eval_path"] == f"results/evals/{_run_of(c).path}/{c['eval_benchmark']}.json"
        assert c["group"] == f"{config['benchmarks'][c['run']['train_set']]['label']} -> " \
                             f"{config['benchmarks'][c['eval_benchmark']]['label']}"


def test_retention_adds_evaluations_but_no_run(paper):
    without = copy.deepcopy(paper)
    del without["experiments"]["retention"]
    assert plan.all_runs(paper) == plan.all_runs(without)
    added = set(plan.all_evaluations(paper)) - set(plan.all_evaluations(without))
    # 7 methods x 3 train sets x 2 benchmarks, and nothing else
    assert len(added) == 42 and {e.eval_benchmark for e in added} == {"coco", "flickr30k"}
    assert set(plan.zeroshot_eval_benchmarks(paper)) - set(plan.zeroshot_eval_benchmarks(without)) == {
        "coco", "flickr30k"}
    # no regime conditions of the evaluation-only benchmarks (no plain runs trained on them)
    assert plan.regime_benchmarks(paper) == plan.regime_benchmarks(without)


def test_the_embedded_default_scores_the_short_captions_of_the_synthetic_test_scenes(toy):
    short = toy["benchmarks"]["synthetic_short"]
    assert toy["experiments"]["retention"]["benchmarks"] == ["synthetic_short"]
    assert short["files_from"] == "synthetic" and short["caption_column"] == "short_caption"
    assert plan.fetched_benchmark(toy, "synthetic_short") == "synthetic"
    assert plan.fetched_benchmark(toy, "synthetic") == "synthetic"


@pytest.mark.parametrize("change, key", [
    (lambda c: c["experiments"].pop("main"), "experiments.retention"),
    (lambda c: c["benchmarks"]["synthetic_short"].update(root="resources/elsewhere"), "benchmarks.synthetic_short.root"),
    (lambda c: c["benchmarks"]["synthetic_short"].update(files_from="synthetc"), "benchmarks.synthetic_short.files_from"),
    (lambda c: c["benchmarks"]["synthetic_short"].update(splits=["train"]), "experiments.retention.benchmarks[0]"),
])
def test_config_errors_name_the_key(toy, change, key):
    config = copy.deepcopy(toy)
    change(config)
    with pytest.raises(ConfigError, match=f"config key {re.escape(key)}:"):
        check_config(config)


def test_a_files_from_view_is_prepared_from_the_other_benchmarks_files_with_its_caption_column(tmp_path):
    from hnclip.data.fetch import fetch_benchmark
    from hnclip.data.manifest import read_manifest
    from hnclip.data.prepare import prepare_split
    from hnclip.data.synthetic import read_records

    root = tmp_path / "synthetic"
    settings = {"adapter": "synthetic", "root": str(root), "expected_counts": {},
                "synthetic": {"n_train": 0, "n_test": 3, "image_size": 32, "seed": 5}}
    source = fetch_benchmark("synthetic", "synthetic", root, settings)
    rendered = sorted(p.name for p in (root / "images").iterdir())
    view_settings = {**settings, "files_from": "synthetic", "caption_column": "short_caption"}
    with pytest.raises(ValueError, match="pass that benchmark's source record"):
        fetch_benchmark("synthetic_short", "synthetic", root, view_settings)
    view = fetch_benchmark("synthetic_short", "synthetic", root, view_settings, files_of=source)
    assert sorted(p.name for p in (root / "images").iterdir()) == rendered  # nothing rendered again
    assert view["benchmark"] == "synthetic_short" and view["root"] == source["root"]
    prepare_split(json.loads(json.dumps(view)), "test", 32, tmp_path / "short.csv", tmp_path / "short_images")
    prepare_split(source, "test", 32, tmp_path / "long.csv", tmp_path / "long_images")
    short, long = read_manifest(tmp_path / "short.csv"), read_manifest(tmp_path / "long.csv")
    records = {r["image_id"]: r for r in read_records(root) if r["split"] == "test"}
    assert list(short["image_id"]) == list(long["image_id"]) == list(records)
    assert list(short["caption"]) == [records[i]["short_caption"] for i in short["image_id"]]
    assert list(long["caption"]) == [records[i]["caption"] for i in long["image_id"]]
    assert all(len(c.split()) < 20 for c in short["caption"])
    bad = {**view, "caption_column": "no_such_column"}
    with pytest.raises(ValueError, match="caption_column 'no_such_column' is not a column"):
        prepare_split(bad, "test", 32, tmp_path / "bad.csv", tmp_path / "bad_images")
