"""The tuning target's long budget (hnclip.tuning.long_budget, issue 59): HN-CLIP, the strongest competitor and
tuning.long_budget.methods trained again at their chosen rates for the paper's 10 epochs, resumable; HN-CLIP
minus each at both budgets against a hand computation from the fake trainer's ranks; the record with, without
and with a malformed section; the summary's tuning line."""

from __future__ import annotations

import copy
import csv
import json
import zlib
from pathlib import Path

import numpy as np
import pytest

from hnclip.analysis.summary import _tuning_line
from hnclip.tuning import grid
from hnclip.tuning import work as folders
from hnclip.tuning.long_budget import sentence
from hnclip.tuning.record import load_record, record_check
from hnclip.tuning.resolution import resolution_sentence, runner_up
from hnclip.tuning.search import Split, run_search, train_command
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]
N = 300  # val images, one caption each
LONG = 10
# the fake's best rate: HN-CLIP one step above its centre, FineLIP one below, Long-CLIP FT at it (base_lr 1e-3)
CENTRES = {"hnclip": 1e-3, "longclip": 1e-3, "finelip": 0.2}
BEST_STEP = {"hnclip": 1, "longclip": 0, "finelip": -1}
BASE = {"hnclip": 150, "longclip": 120, "finelip": 140}  # val hits at the best rate before any epoch's gain
GAIN = {"hnclip": 5, "longclip": 4, "finelip": 3}  # hits gained per epoch: the difference grows with the budget


def _hits(method: str, rate: float, epochs: int, epoch: int, direction: str) -> np.ndarray:
    """The fake run's per-image hits (1 = rank 0) after ``epoch``: a fixed count (higher at the best rate,
    rising per epoch, higher in a long run) on images drawn by a seed of the run and direction."""
    best = grid.rate_at(CENTRES[method], BEST_STEP[method])
    count = BASE[method] - (0 if rate == pytest.approx(best) else 40) + GAIN[method] * epoch + (10 if epochs == LONG else 0)
    count += 3 if direction == "t2i" else 0
    seed = zlib.crc32(f"{method}|{rate:g}|{epochs}|{epoch}|{direction}".encode())
    hits = np.zeros(N, dtype=int)
    hits[np.random.default_rng(seed).permutation(N)[:count]] = 1
    return hits


def fake_trainer(calls: list, budget: int):
    def train(method, key, rate, out, epochs=None):
        calls.append((method, rate, epochs, out))
        run_epochs = epochs or budget
        out.mkdir(parents=True, exist_ok=True)
        with open(out / "epochs.csv", "w", newline="") as f, open(out / "epoch_ranks.csv", "w", newline="") as g:
            rows, ranks = csv.writer(f), csv.writer(g)
            rows.writerow(["epoch", "i2t_r1", "t2i_r1"])
            ranks.writerow(["epoch", "i2t", "t2i", "text_image", "benchmark"])
            for e in range(1, run_epochs + 1):
                i2t, t2i = (_hits(method, rate, run_epochs, e, d) for d in ("i2t", "t2i"))
                rows.writerow([e, 100 * i2t.mean(), 100 * t2i.mean()])
                ranks.writerow([e, " ".join(map(str, 1 - i2t)), " ".join(map(str, 1 - t2i)),
                                " ".join(map(str, range(N))), ""])
        (out / "summary.json").write_text(json.dumps({"wall_time_s": 60.0 * (2 if epochs else 1)}))
    return train


def _refuse(*args, **kwargs):
    raise AssertionError("a run already on disk was trained again")


@pytest.fixture
def search_setup(tmp_path):
    """A prepared folder the fake trainer never reads, and the zero-shot score on disk where the search keys it
    (no evaluation process)."""
    data, backbone = tmp_path / "data", tmp_path / "backbone"
    for folder in (data / "train_images", data / "val_images", backbone):
        folder.mkdir(parents=True)
    (backbone / "model.safetensors").write_bytes(b"weights")
    for name in ("train.csv", "val.csv"):
        (data / name).write_text("image,caption\n")
    config = load_config([REPO / "tests" / "e2e" / "micro.yaml"])
    config["train"].update(epochs=2)
    config["tuning"] = {"benchmark": "synthetic", "split": "val", "base_lr": 1e-3, "steps": 1, "max_extensions": 0,
                        "record": "unused.json", "long_budget": {"epochs": LONG, "methods": ["longclip"]}}
    config["statistics"] = {"confidence": 0.95, "resamples": 2000, "seed": 0}
    work = tmp_path / "work"
    identity = folders.inputs_identity(backbone, data, "val", str(config.get("cpu_kernels", "native")))
    zeroshot = folders.zeroshot_file(work, "synthetic", identity, config["evaluate"]["batch_size"])
    zeroshot.parent.mkdir(parents=True)
    zeroshot.write_text(json.dumps({"metrics": {"i2t_r1": 10.0, "t2i_r1": 12.0}}))
    return {"config": config, "data": data, "backbone": backbone, "work": work}


def _search(setup, trainer):
    return run_search(setup["config"], setup["backbone"], setup["data"], setup["work"],
                      methods=["longclip", "finelip", "hnclip"], trainer=trainer, progress=lambda line: None)


def _mean_hits(method: str, rate: float, epochs: int) -> np.ndarray:
    """Per image: the mean of both directions' hits after the run's last epoch, in points."""
    return 100 * (_hits(method, rate, epochs, epochs, "i2t") + _hits(method, rate, epochs, epochs, "t2i")) / 2


def test_the_long_runs_train_at_the_chosen_rates_for_10_epochs_and_a_finished_one_is_read(search_setup):
    calls: list = []
    record = _search(search_setup, fake_trainer(calls, budget=2))
    chosen = {m: grid.rate_at(CENTRES[m], BEST_STEP[m]) for m in CENTRES}
    assert {m: record["methods"][m]["chosen"] for m in CENTRES} == pytest.approx(chosen)
    assert record["competitor"] == "finelip"
    long_calls = [c for c in calls if c[2] is not None]
    # HN-CLIP, the competitor, then the section's Long-CLIP FT, once each, at its chosen rate, for 10 epochs
    assert [(m, e) for m, _, e, _ in long_calls] == [("hnclip", LONG), ("finelip", LONG), ("longclip", LONG)]
    assert all(rate == pytest.approx(chosen[m]) for m, rate, _, _ in long_calls)
    grid_folders = {out for _, _, e, out in calls if e is None}
    assert len(grid_folders) == 9 and all("long_budget" not in out.parts for out in grid_folders)
    assert all(out.relative_to(search_setup["work"]).parts[0] == "long_budget" for *_, out in long_calls)
    section = record["long_budget"]
    assert section["epochs"] == LONG and list(section["methods"]) == ["hnclip", "finelip", "longclip"]
    hn = section["methods"]["hnclip"]
    assert [e["epoch"] for e in hn["curve"]] == list(range(1, LONG + 1)) and hn["rate"] == pytest.approx(3e-3)
    # the fake's last epoch: 150 + 5 x 10 + 10 hits of 300 i2t, 3 more t2i
    assert hn["curve"][-1]["mean"] == pytest.approx(100 * (210 + 213) / 2 / N, abs=1e-3)
    # minutes: the grid's 9 points at 1 minute each; the 3 long runs at 2 each, counted apart
    assert record["provenance"]["minutes"] == 9.0 and record["provenance"]["long_budget_minutes"] == 6.0
    # an interrupted search: finished long runs are read; one without its summary.json is trained again
    (long_calls[1][3] / "summary.json").unlink()
    again_calls: list = []
    again = _search(search_setup, fake_trainer(again_calls, budget=2))
    assert [(m, e) for m, _, e, _ in again_calls] == [("finelip", LONG)]
    assert _search(search_setup, _refuse)["long_budget"] == again["long_budget"] == section


def test_hn_clip_minus_each_at_both_budgets_is_the_hand_computed_paired_difference(search_setup):
    record = _search(search_setup, fake_trainer([], budget=2))
    chosen = {m: grid.rate_at(CENTRES[m], BEST_STEP[m]) for m in CENTRES}
    found = {(d["against"], d["budget_epochs"]): d for d in record["long_budget"]["differences"]}
    assert set(found) == {("finelip", 2), ("finelip", LONG), ("longclip", 2), ("longclip", LONG)}
    rng = np.random.default_rng(11)
    for (against, epochs), d in found.items():
        assert d["method"] == "hnclip"
        per_image = _mean_hits("hnclip", chosen["hnclip"], epochs) - _mean_hits(against, chosen[against], epochs)
        assert d["value"] == pytest.approx(per_image.mean(), abs=1e-3)
        low, high = d["interval"]
        assert low <= d["value"] <= high
        boots = np.array([per_image[rng.integers(0, N, N)].mean() for _ in range(4000)])
        ref_low, ref_high = np.percentile(boots, [2.5, 97.5])
        assert low == pytest.approx(ref_low, abs=1.0) and high == pytest.approx(ref_high, abs=1.0)
    # the sentence: HN-CLIP minus the competitor at the shared budget, then at 10 epochs
    d2, d10 = found[("finelip", 2)], found[("finelip", LONG)]
    assert sentence(record, {"hnclip": "HN-CLIP", "finelip": "FineLIP"}) == (
        f"HN-CLIP minus FineLIP on val: {d2['value']:+.1f} [{d2['interval'][0]:+.1f}, {d2['interval'][1]:+.1f}] at 2 "
        f"epochs, {d10['value']:+.1f} [{d10['interval'][0]:+.1f}, {d10['interval'][1]:+.1f}] at 10 epochs")


def test_a_config_without_the_long_budget_trains_no_long_run_and_writes_no_section(search_setup):
    del search_setup["config"]["tuning"]["long_budget"]
    calls: list = []
    record = _search(search_setup, fake_trainer(calls, budget=2))
    assert "long_budget" not in record and all(e is None for _, _, e, _ in calls)
    assert "long_budget_minutes" not in record["provenance"]


def test_a_long_budget_method_the_search_does_not_tune_is_refused_before_any_training(search_setup):
    with pytest.raises(ValueError, match=r"^config key tuning\.long_budget\.methods: hnclip not tuned by this "
                                         r"search \(tuned: longclip, finelip\)"):
        run_search(search_setup["config"], search_setup["backbone"], search_setup["data"], search_setup["work"],
                   methods=["longclip", "finelip"], trainer=_refuse, progress=lambda line: None)


def test_the_long_runs_command_is_the_grid_points_with_its_epochs_replaced(search_setup):
    setup = search_setup
    split = Split(setup["data"], "val")
    args = (setup["config"], "hnclip", "lr", 3e-3, setup["backbone"], split, Path("out"), 1)
    point, long = train_command(*args), train_command(*args, epochs=LONG)

    def items(command):
        return [command[i + 1] for i, word in enumerate(command) if word == "--set"]

    assert "epochs=2" in items(point) and "epochs=10" not in items(point)
    assert "epochs=2" not in items(long) and items(long).count("epochs=10") == 1
    assert set(items(long)) - {"epochs=10"} == set(items(point)) - {"epochs=2"}
    assert [w for w in long if w not in items(long)] == [w for w in point if w not in items(point)]


# --------------------------------------------------------------------------------------------- the record
def test_a_record_loads_with_and_without_the_section_and_a_malformed_one_is_named(search_setup, tmp_path):
    record = _search(search_setup, fake_trainer([], budget=2))
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    assert load_record(path)["long_budget"]["epochs"] == LONG
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "long_budget"}))
    assert "long_budget" not in load_record(path)
    for edit, message in [
        (lambda s: s["methods"]["hnclip"].pop("curve"), "long_budget.methods.hnclip has no curve"),
        (lambda s: s["methods"]["finelip"]["curve"].pop(), "long_budget.methods.finelip.curve is not 10 epochs"),
        (lambda s: s["differences"][1].update(interval=[0.5]), r"long_budget.differences\[1\].interval is not"),
        (lambda s: s["differences"][0].pop("value"), r"long_budget.differences\[0\] has no value"),
        (lambda s: s.update(epochs="10"), "long_budget.epochs is missing or not an integer"),
    ]:
        broken = copy.deepcopy(record)
        edit(broken["long_budget"])
        path.write_text(json.dumps(broken))
        with pytest.raises(ValueError, match=f"^tuning record {path}: {message}") as error:
            load_record(path)
        assert "\n" not in str(error.value)


def test_the_summarys_tuning_line_carries_the_long_budget_sentence(search_setup, tmp_path):
    record = _search(search_setup, fake_trainer([], budget=2))
    del record["resolution"]  # its sentence precedes the long budget's (the resolution test below)
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    config = copy.deepcopy(search_setup["config"])
    config["methods"]["finelip"]["label"] = "FineLIP"
    check = record_check(config, path)
    line = _tuning_line({**check, "problems": []})
    d = next(d for d in record["long_budget"]["differences"] if d["against"] == "finelip" and d["budget_epochs"] == 2)
    assert line.startswith(f"| tuning record `{path}` | every rate and the competitor are its choices on val; "
                           f"HN-CLIP minus FineLIP on val: {d['value']:+.1f} [")
    assert line.endswith(" at 10 epochs | |") and line.count("|") == 4
    path.write_text(json.dumps({k: v for k, v in record.items() if k != "long_budget"}))
    assert _tuning_line({**record_check(config, path), "problems": []}) == (
        f"| tuning record `{path}` | every rate and the competitor are its choices on val | |")


def test_the_config_check_names_a_long_budget_method_that_is_not_tuned():
    from hnclip.config.validation import ConfigError
    from hnclip.config_checks import check_config

    config = load_config([REPO / "config" / "config.yaml"])
    assert config["tuning"]["long_budget"] == {"epochs": 10, "methods": ["longclip"]}
    check_config(config)
    config["tuning"]["long_budget"]["methods"] = ["longclip", "goal_hn"]
    with pytest.raises(ConfigError, match=r"^config key tuning\.long_budget\.methods: goal_hn not tuned "
                                          r"\(experiments\.main\.methods: longclip, finelip"):
        check_config(config)
    del config["experiments"]["main"], config["experiments"]["retention"]  # no main table: nothing is tuned
    check_config(config)


# ------------------------------------------------------------------------- the val split's resolution
def test_the_record_says_whether_val_resolves_the_competitor_from_the_runner_up(search_setup, tmp_path):
    """FineLIP (the competitor) minus Long-CLIP FT (the runner-up baseline), both at their chosen points after
    the shared budget: the hand-computed paired difference, an interval that contains it, resolved when the
    interval lies above 0; the sentence the report and the summary's tuning line show; a malformed section
    named in one line."""
    record = _search(search_setup, fake_trainer([], budget=2))
    chosen = {m: grid.rate_at(CENTRES[m], BEST_STEP[m]) for m in CENTRES}
    found = record["resolution"]
    assert (found["competitor"], found["runner_up"]) == ("finelip", "longclip")
    per_image = _mean_hits("finelip", chosen["finelip"], 2) - _mean_hits("longclip", chosen["longclip"], 2)
    assert found["value"] == pytest.approx(per_image.mean(), abs=1e-3)
    assert found["value"] == pytest.approx(record["methods"]["finelip"]["score"] - record["methods"]["longclip"]["score"],
                                           abs=1e-3)
    low, high = found["interval"]
    assert low <= found["value"] <= high and found["resolved"] == (low > 0)
    labels = {"finelip": "FineLIP", "longclip": "Long-CLIP FT"}
    text = resolution_sentence(record, labels)
    verdict = "resolves" if found["resolved"] else "does not resolve"
    assert text == (f"val {verdict} the competitor's choice: FineLIP minus Long-CLIP FT {found['value']:+.2f} "
                    f"[{low:+.2f}, {high:+.2f}]")
    path = tmp_path / "record.json"
    path.write_text(json.dumps(record))
    config = copy.deepcopy(search_setup["config"])
    config["methods"]["finelip"]["label"], config["methods"]["longclip"]["label"] = "FineLIP", "Long-CLIP FT"
    assert text in _tuning_line(record_check(config, path))
    broken = copy.deepcopy(record)
    broken["resolution"].pop("resolved")
    path.write_text(json.dumps(broken))
    with pytest.raises(ValueError, match=r"resolution has no resolved: not a section") as caught:
        load_record(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_the_runner_up_is_the_best_baseline_after_the_competitor():
    methods = {"longclip": {"score": 80.0}, "finelip": {"score": 84.0}, "goal": {"score": 82.0},
               "hnclip": {"score": 90.0}}
    assert runner_up(methods, "finelip") == "goal"
    assert runner_up({"finelip": {"score": 1.0}, "hnclip": {"score": 2.0}}, "finelip") is None
    assert runner_up(methods, None) is None
