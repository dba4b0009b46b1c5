"""The tuning protocol (hnclip.tuning): the grid rule, the score and its interval, which rate each method
trains at, the shipped record tied to the config, and a micro search that trains for real."""

from __future__ import annotations

import copy
import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_train_support import make_dataset

from hnclip.frameworks.registry import framework_names
from hnclip.tuning import grid
from hnclip.tuning.record import (
    config_disagreements,
    load_record,
    rate_source,
    strongest_competitor,
    tuned_methods,
    tuned_rate_key,
)
from hnclip.tuning.score import last_rise
from hnclip.tuning.search import run_search
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def default_config():
    return load_config([REPO / "config" / "config.yaml"])


# ------------------------------------------------------------------------------------------------ the grid
def test_half_decade_steps_read_as_the_config_writes_rates():
    # 1e-4 * 10**(k/2): 1e-5, 3.16e-5, 1e-4, 3.16e-4, 1e-3, rounded to one significant digit
    assert [grid.rate_at(1e-4, k) for k in grid.start_steps(2)] == [1e-5, 3e-5, 1e-4, 3e-4, 1e-3]
    # GOAL's centre 5e-4: 5e-5, 1.58e-4, 5e-4, 1.58e-3, 5e-3
    assert [grid.rate_at(5e-4, k) for k in grid.start_steps(2)] == [5e-5, 2e-4, 5e-4, 2e-3, 5e-3]
    assert grid.rate_at(2e-2, 3) == 6e-1 and grid.rate_at(2e-2, -3) == 6e-4
    with pytest.raises(ValueError, match="at least 1"):
        grid.start_steps(0)


def test_the_best_is_chosen_ties_to_the_centre_and_an_edge_extends_the_grid():
    assert grid.choose({-1: 90.0, 0: 95.0, 1: 93.0}) == 0
    assert grid.choose({-1: 95.0, 0: 95.0, 1: 95.0}) == 0  # a tie: nearer the centre
    assert grid.choose({-1: 95.0, 1: 95.0}) == -1  # then the lower rate
    assert grid.choose({-1: float("nan"), 0: 80.0}) == 0
    # best on the low edge: one step below; inside: done; the extensions are bounded
    assert grid.next_step({-2: 97.0, -1: 96.0, 0: 95.0, 1: 90.0, 2: 60.0}, steps=2, max_extensions=3) == -3
    assert grid.next_step({-2: 90.0, -1: 96.0, 0: 95.0, 1: 90.0, 2: 60.0}, steps=2, max_extensions=3) is None
    assert grid.next_step({-1: 90.0, 0: 95.0, 1: 97.0, 2: 98.0}, steps=1, max_extensions=1) is None
    assert grid.next_step({-1: 90.0, 0: 95.0, 1: 97.0}, steps=1, max_extensions=1) == 2


def test_paper_ratios_are_the_authors_recipes_over_long_clips_rate():
    # config/paper.yaml: Long-CLIP 1e-6; GOAL and StructXLIP 5e-6; the adapters 1e-4; FineLIP's aggregators 2e-4
    paper = load_config([REPO / "config" / "paper.yaml"])
    assert grid.paper_ratio(paper, "goal", "lr") == pytest.approx(5)
    assert grid.paper_ratio(paper, "structxlip", "lr") == pytest.approx(5)
    assert grid.paper_ratio(paper, "lora", "lr") == pytest.approx(100)
    assert grid.paper_ratio(paper, "dora", "lr") == pytest.approx(100)
    assert grid.paper_ratio(paper, "finelip", "module_lr") == pytest.approx(200)
    assert grid.paper_ratio(paper, "hnclip", "lr") == pytest.approx(1)
    with pytest.raises(KeyError, match="no recipe"):
        grid.paper_ratio(paper, "mine", "lr")


# ------------------------------------------------------------------------------------------ the score
def _write_ranks(path: Path, epochs: list[tuple[list[int], list[int]]]) -> Path:
    """epoch_ranks.csv with one caption per image: per epoch (i2t ranks, t2i ranks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["epoch", "i2t", "t2i", "text_image", "benchmark"])
        for e, (i2t, t2i) in enumerate(epochs, 1):
            n = len(i2t)
            w.writerow([e, " ".join(map(str, i2t)), " ".join(map(str, t2i)), " ".join(map(str, range(n))), ""])
    return path


def test_a_run_still_rising_beyond_its_interval_is_under_trained(tmp_path):
    # epoch 2: 300 of 400 right both ways (75 %); epoch 3: 360 (90 %): a rise of 15 points, far beyond noise
    e2 = [0] * 300 + [1] * 100
    e3 = [0] * 360 + [1] * 40
    rise = last_rise(_write_ranks(tmp_path / "a" / "epoch_ranks.csv", [(e2, e2), (e2, e2), (e3, e3)]))
    assert rise["epochs"] == [2, 3] and rise["value"] == pytest.approx(15.0)
    assert rise["interval"][0] > 0 and rise["under_trained"]
    # one query of 400 more in one direction: a rise of 0.125 points, inside its interval
    e3b = [0] * 301 + [1] * 99
    flat = last_rise(_write_ranks(tmp_path / "b" / "epoch_ranks.csv", [(e2, e2), (e3b, e2)]))
    assert flat["value"] == pytest.approx(0.125) and flat["interval"][0] <= 0 and not flat["under_trained"]
    assert last_rise(_write_ranks(tmp_path / "c" / "epoch_ranks.csv", [(e2, e2)])) is None


def test_the_rise_interval_matches_an_independent_paired_bootstrap(tmp_path):
    rng = np.random.default_rng(3)
    before = (rng.random(300) < 0.8).astype(int)
    after = np.where(rng.random(300) < 0.3, 1 - before, before)
    # ranks: 0 = hit, 1 = miss; the same outcomes both directions
    rise = last_rise(_write_ranks(tmp_path / "r" / "epoch_ranks.csv",
                                  [(list(1 - before), list(1 - before)), (list(1 - after), list(1 - after))]))
    diff = 100.0 * (after - before)
    assert rise["value"] == pytest.approx(diff.mean(), abs=1e-3)
    boots = np.array([diff[rng.integers(0, 300, 300)].mean() for _ in range(4000)])
    low, high = np.percentile(boots, [2.5, 97.5])
    assert rise["interval"][0] == pytest.approx(low, abs=1.0) and rise["interval"][1] == pytest.approx(high, abs=1.0)


# -------------------------------------------------------------------------- which rate each method takes
def test_plug_in_variants_train_at_their_plain_rate_and_frozen_g_at_hn_clips(default_config):
    c = default_config
    # the embedded default's main table: one plain method per registered framework (named after it), then
    # HN-CLIP; its plug-in pairs: each framework's "<name>_hn"
    assert tuned_methods(c) == sorted(framework_names(), key=tuned_methods(c).index) + ["hnclip"]
    variants = {f"{name}_hn": name for name in framework_names()}
    assert {m: rate_source(c, m) for m in [*variants, "hnclip_frozen", "hnclip"]} == {
        **variants, "hnclip_frozen": "hnclip", "hnclip": "hnclip"}
    assert tuned_rate_key(c, "finelip") == "module_lr" and tuned_rate_key(c, "goal") == "lr"


def test_the_strongest_competitor_is_the_best_baseline_on_val_never_hn_clip():
    methods = {"longclip": {"score": 97.0}, "finelip": {"score": 98.1}, "goal": {"score": 98.1},
               "hnclip": {"score": 99.0}}
    assert strongest_competitor(methods) == "finelip"  # a tie keeps the first in the main table's order
    assert strongest_competitor({"hnclip": {"score": 99.0}}) is None


def test_a_config_rate_that_is_not_the_records_choice_is_named(default_config):
    record = {"methods": {m: {"key": tuned_rate_key(default_config, m),
                              "chosen": float(rate_of(default_config, m, tuned_rate_key(default_config, m)))}
                          for m in tuned_methods(default_config)},
              "competitor": "lora"}
    agreeing = {**default_config, "competitor": "lora"}
    assert config_disagreements(agreeing, record) == []
    edited = copy.deepcopy(agreeing)
    edited["methods"]["goal_hn"]["train"] = {**(edited["methods"]["goal_hn"].get("train") or {}), "lr": 1.23e-3}
    edited["competitor"] = "dora"
    problems = config_disagreements(edited, record)
    assert len(problems) == 2
    assert problems[0].startswith("methods.goal_hn: lr 0.00123 in the config") and "for goal" in problems[0]
    assert "competitor: 'dora'" in problems[1]


def rate_of(config, method, key):
    recipe = {**config["train"], **{k: v for k, v in (config["methods"][method].get("train") or {}).items()
                                    if v is not None}}
    return recipe[key]


# ------------------------------------------------------------------------------- the shipped record
def test_the_configs_rates_and_competitor_are_the_shipped_records_choices(default_config):
    record = load_record(REPO / default_config["tuning"]["record"])
    assert config_disagreements(default_config, record) == []
    assert default_config["competitor"] == record["competitor"]
    # the strongest competitor trains every seed beside HN-CLIP
    assert default_config["competitor"] in default_config["experiments"]["seeds"]["methods"]


def test_the_shipped_record_follows_the_protocol(default_config):
    record = load_record(REPO / default_config["tuning"]["record"])
    protocol = record["protocol"]
    assert protocol["split"] == "val" and protocol["steps"] >= 2
    assert set(record["methods"]) == set(tuned_methods(default_config))
    for method, entry in record["methods"].items():
        steps = [p["step"] for p in entry["points"]]
        assert steps == sorted(steps) and steps == list(range(steps[0], steps[-1] + 1)), method
        assert min(steps) <= -protocol["steps"] and max(steps) >= protocol["steps"], method
        centre = protocol["base_lr"] * entry["paper_ratio"]
        assert [p["rate"] for p in entry["points"]] == [grid.rate_at(centre, s) for s in steps], method
        best = max(entry["points"], key=lambda p: (p["score"], -abs(p["step"]), -p["step"]))
        assert entry["chosen"] == best["rate"] and entry["score"] == best["score"], method
        # the score is the last epoch's mean of both directions
        for p in entry["points"]:
            last = p["epochs"][-1]
            assert p["score"] == pytest.approx((last["i2t_r1"] + last["t2i_r1"]) / 2, abs=1e-3)
            assert len(p["epochs"]) == protocol["budget"]["epochs"]
        # the best is not on an edge unless the extensions ran out
        edge = best["step"] in (steps[0], steps[-1])
        assert not edge or max(-steps[0], steps[-1]) >= protocol["steps"] + protocol["max_extensions"], method
        assert entry["above_zeroshot"] == (entry["score"] >= record["zeroshot"]["mean"])
    baselines = {m: e["score"] for m, e in record["methods"].items() if m != "hnclip"}
    assert record["competitor"] == max(baselines, key=baselines.get)
    assert record["provenance"]["git_commit"] and record["provenance"]["minutes"] > 0
    # the search's minutes: every point's own, over all the sessions of the search
    points = [p for entry in record["methods"].values() for p in entry["points"]]
    assert record["provenance"]["points"] == len(points)
    assert record["provenance"]["minutes"] == pytest.approx(sum(p["minutes"] for p in points), abs=0.05)
    # the long budget (hnclip.tuning.long_budget): HN-CLIP, the competitor and the config's methods, each at its
    # chosen rate for the configured epochs, HN-CLIP minus the competitor at both budgets
    long_budget = default_config["tuning"].get("long_budget")
    assert long_budget and "long_budget" in record
    if "long_budget" in record:
        section = record["long_budget"]
        assert section["epochs"] == long_budget["epochs"]
        assert set(section["methods"]) == {"hnclip", record["competitor"], *long_budget["methods"]}
        for method, run in section["methods"].items():
            assert run["rate"] == record["methods"][method]["chosen"], method
            assert [e["epoch"] for e in run["curve"]] == list(range(1, section["epochs"] + 1)), method
        budgets = {d["budget_epochs"] for d in section["differences"] if d["against"] == record["competitor"]}
        assert budgets == {protocol["budget"]["epochs"], section["epochs"]}
        assert record["provenance"]["long_budget_minutes"] == pytest.approx(
            sum(r["minutes"] for r in section["methods"].values()), abs=0.05)
    # the split's resolution of the competitor's choice: the competitor against the best other baseline
    resolution = record["resolution"]
    baselines = {m: e["score"] for m, e in record["methods"].items() if m != "hnclip"}
    assert resolution["competitor"] == record["competitor"] == max(baselines, key=baselines.get)
    del baselines[record["competitor"]]
    assert resolution["runner_up"] == max(baselines, key=baselines.get)
    assert resolution["resolved"] == (resolution["interval"][0] > 0)


# --------------------------------------------------------------------------------- a micro search
@pytest.mark.slow  # real `hnclip train` processes for every point (~50 s)
def test_a_micro_search_trains_every_point_and_extends_past_an_edge(tmp_path):
    """Two methods on 24 random images, one step each side and one extension allowed: every point is a real
    ``hnclip train`` process scored on the val split; the record names what it chose."""
    train = make_dataset(tmp_path / "train", n=24)
    val = make_dataset(tmp_path / "val", n=12, seed=1)
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(train["train_manifest"], data / "train.csv")
    shutil.copytree(train["store_dir"], data / "train_images")
    shutil.copy(val["train_manifest"], data / "val.csv")
    shutil.copytree(val["store_dir"], data / "val_images")
    config = load_config([REPO / "tests" / "e2e" / "micro.yaml"])
    config["train"].update(epochs=2, micro_batch=4, accum_steps=2, warmup_steps=0, dynamics_every=0,
                           checkpoint_every=100, device="cpu")
    config["tuning"] = {"benchmark": "synthetic", "split": "val", "base_lr": 1e-3, "steps": 1, "max_extensions": 1,
                        "record": "unused.json"}
    config["evaluate"]["batch_size"] = 6
    lines: list[str] = []
    record = run_search(config, train["init_model_dir"], data, tmp_path / "work", threads=1,
                        methods=["longclip", "finelip"], progress=lines.append)
    assert record["zeroshot"]["mean"] >= 0 and record["competitor"] in ("longclip", "finelip")
    for method, key in (("longclip", "lr"), ("finelip", "module_lr")):
        entry = record["methods"][method]
        assert entry["key"] == key and 3 <= len(entry["points"]) <= 4
        for p in entry["points"]:
            assert len(list((tmp_path / "work").glob(f"synthetic-val/{method}-*/{key}{p['rate']:g}/model"))) == 1
            assert [e["epoch"] for e in p["epochs"]] == [1, 2] and p["rise"] is not None
        assert entry["chosen"] in [p["rate"] for p in entry["points"]]
    assert record["methods"]["finelip"]["paper_rate"] == pytest.approx(0.2)  # 200 x 1e-3
    json.dumps(record)  # the record is JSON as written
    assert any(line.startswith("longclip: chosen lr") for line in lines)
    # an interrupted search resumes: the points on disk are read, not trained again
    again = run_search(config, train["init_model_dir"], data, tmp_path / "work", threads=1,
                       methods=["longclip"], trainer=_refuse, progress=lambda line: None)
    assert again["methods"]["longclip"]["chosen"] == record["methods"]["longclip"]["chosen"]
    # each point's minutes are its run's own (summary.json), so a point read from disk keeps them
    minutes = [p["minutes"] for p in record["methods"]["longclip"]["points"]]
    assert all(m > 0 for m in minutes)
    assert [p["minutes"] for p in again["methods"]["longclip"]["points"]] == minutes


def _refuse(*args):
    raise AssertionError("a point already on disk was trained again")


def test_snakemake_tune_is_one_job_on_the_effective_config_outside_the_default_target():
    """`snakemake tune` plans the search (and the effective config it reads) and nothing else; `all` does not
    ask for it."""
    from dry_runs import planned
    from test_workflow_dag import job_counts

    tune = planned(targets=("tune",))
    assert tune.returncode == 0, tune.stderr[-2000:]
    counts = job_counts(tune.output)
    # the search and what it reads (the effective config, the tuning split's data); no run of the default
    assert counts["tune"] == 1 and counts["effective_config"] == 1 and "train" not in counts
    everything = planned()
    assert everything.returncode == 0, everything.stderr[-2000:]
    assert "tune" not in job_counts(everything.output)
