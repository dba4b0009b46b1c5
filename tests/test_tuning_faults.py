"""The tuning search's faults (issue 61): tuning on your own data (no section, the test split, a work folder
keyed on what changes a point, scores named by their split), an interrupted search that resumes and scores
every point on all its epochs, a record whose choice is none of its points, a config whose rates are not the
record's, and the record's minutes over every session."""

from __future__ import annotations

import copy
import csv
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_train_support import make_dataset

from hnclip.config.validation import ConfigError
from hnclip.config_checks import check_config, config_warnings
from hnclip.tuning.record import load_record
from hnclip.tuning.search import run_search
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """A tuning benchmark's prepared folder: 24 training images, and the same 12 images as split val and
    as split dev (so a score can only tell them apart by where it was written)."""
    root = tmp_path_factory.mktemp("tuning-data")
    train = make_dataset(root / "train", n=24)
    held = make_dataset(root / "held", n=12, seed=1)
    data = root / "data"
    data.mkdir()
    shutil.copy(train["train_manifest"], data / "train.csv")
    shutil.copytree(train["store_dir"], data / "train_images")
    for split in ("val", "dev"):
        shutil.copy(held["train_manifest"], data / f"{split}.csv")
        shutil.copytree(held["store_dir"], data / f"{split}_images")
    return {"data": data, "backbone": train["init_model_dir"]}


def micro_config(split: str = "val", epochs: int = 2) -> dict:
    config = load_config([REPO / "tests" / "e2e" / "micro.yaml"])
    config["train"].update(epochs=epochs, micro_batch=4, accum_steps=2, warmup_steps=0, dynamics_every=0,
                           checkpoint_every=100, device="cpu", progress_every=0)
    config["tuning"] = {"benchmark": "synthetic", "split": split, "base_lr": 1e-3, "steps": 1,
                        "max_extensions": 0, "record": "unused.json"}
    config["evaluate"]["batch_size"] = 6
    return config


def fake_trainer(calls: list, epochs: int, seconds: float = 90.0):
    """A trainer that writes what a finished run leaves for the search: per epoch a rising R@1 (higher at
    the centre rate 1e-3), each query's rank, and ``summary.json`` with ``seconds`` of wall time."""
    def train(method, key, rate, out):
        calls.append(out)
        out.mkdir(parents=True)
        peak = 50.0 if rate == pytest.approx(1e-3) else 30.0
        with open(out / "epochs.csv", "w", newline="") as f, open(out / "epoch_ranks.csv", "w", newline="") as g:
            rows, ranks = csv.writer(f), csv.writer(g)
            rows.writerow(["epoch", "i2t_r1", "t2i_r1"])
            ranks.writerow(["epoch", "i2t", "t2i", "text_image", "benchmark"])
            for e in range(1, epochs + 1):
                rows.writerow([e, peak + e, peak + e])
                ranks.writerow([e, " ".join(["0"] * 4 + ["1"] * 8), " ".join(["0"] * 4 + ["1"] * 8),
                                " ".join(map(str, range(12))), ""])
        (out / "summary.json").write_text(json.dumps({"wall_time_s": seconds}))
    return train


def _refuse(*args):
    raise AssertionError("a point already on disk was trained again")


# ------------------------------------------------------------------------------------ tuning on own data
def test_the_test_split_and_a_missing_section_are_refused_in_one_line_naming_the_key(prepared, tmp_path):
    config = load_config([REPO / "config" / "config.yaml"])
    edited = copy.deepcopy(config)
    edited["tuning"]["split"] = "test"
    with pytest.raises(ConfigError, match=r"^config key tuning\.split: is 'test': .*never on the test split"):
        check_config(edited)
    # an effective config written before the check: the search refuses it itself, before any training
    with pytest.raises(ConfigError, match=r"^config key tuning\.split: is 'test'"):
        run_search(micro_config(split="test"), prepared["backbone"], prepared["data"], tmp_path / "w",
                   trainer=_refuse)
    no_section = {k: v for k, v in micro_config().items() if k != "tuning"}
    with pytest.raises(ConfigError, match=r"^config key tuning: missing: hnclip tune needs a tuning section"):
        run_search(no_section, prepared["backbone"], prepared["data"], tmp_path / "w", trainer=_refuse)
    # a scoring split the benchmark does not have
    edited["tuning"]["split"] = "dev"
    with pytest.raises(ConfigError, match=r"^config key tuning\.split: benchmark 'synthetic' has no 'dev' split"):
        check_config(edited)


def test_snakemake_tune_on_an_own_data_config_without_a_tuning_section_names_the_key(tmp_path):
    result = subprocess.run([sys.executable, "-m", "snakemake", "tune", "-n", "--quiet", "rules",
                             "--directory", str(tmp_path), "--snakefile", str(REPO / "Snakefile"),
                             "--configfile", str(REPO / "config" / "finetune.yaml")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=300)
    said = result.stdout + result.stderr
    assert result.returncode != 0
    assert "config key tuning: missing: snakemake tune needs a tuning section" in said
    assert "KeyError" not in said


@pytest.mark.slow  # real training of several points (~15 s)
def test_a_changed_split_or_budget_never_reuses_another_settings_points(prepared, tmp_path):
    """val at 2 epochs, the same again (read from disk), 3 epochs, then split dev: each setting trains its own
    points in its own folders; every score and the zero-shot line name the split they were computed on."""
    work, found = tmp_path / "work", {}
    for name, split, epochs in (("val2", "val", 2), ("val2 again", "val", 2), ("val3", "val", 3), ("dev3", "dev", 3)):
        calls, lines = [], []
        trainer = _refuse if name == "val2 again" else fake_trainer(calls, epochs)
        record = run_search(micro_config(split, epochs), prepared["backbone"], prepared["data"], work,
                            methods=["longclip"], trainer=trainer, progress=lines.append)
        found[name] = (calls, lines, record)
        points = record["methods"]["longclip"]["points"]
        assert [p["rate"] for p in points] == [3e-4, 1e-3, 3e-3]
        assert all(len(p["epochs"]) == epochs for p in points)
        assert record["protocol"]["split"] == split and f"on the {split} split" in record["protocol"]["score"]
        scored = [line for line in lines if "R@1" in line]
        assert len(scored) == 5 and all(f"{split} R@1 " in line for line in scored), scored
    trained = [set(found[name][0]) for name in ("val2", "val3", "dev3")]
    assert all(len(t) == 3 for t in trained) and not (trained[0] & trained[1] or trained[1] & trained[2])
    assert {p.parents[1].name for p in trained[0] | trained[1]} == {"synthetic-val"}
    assert {p.parents[1].name for p in trained[2]} == {"synthetic-dev"}
    assert not any("val" in line for line in found["dev3"][1])
    # the zero-shot score: once per split (both copies of the same images, so equal values)
    assert len(list(work.glob("synthetic-val/zeroshot-*.json"))) == 1
    assert len(list(work.glob("synthetic-dev/zeroshot-*.json"))) == 1
    # the record's minutes: every point's own (90 s each), whichever session trained it
    for name in ("val2", "val2 again"):
        provenance = found[name][2]["provenance"]
        assert provenance["minutes"] == 4.5 and provenance["points"] == 3
        assert provenance["session_minutes"] < 4.5


def test_a_rebuilt_framework_product_never_reuses_the_points_trained_on_the_old_one(prepared, tmp_path):
    """GOAL trains on the segment product: the same product reads its points from disk, a rebuilt one (another
    matcher's pairs) trains them again in another folder; a method without products keeps its folder."""
    data = tmp_path / "data"
    shutil.copytree(prepared["data"], data)
    (data / "train_segments").mkdir()
    (data / "train_segments" / "segments.jsonl").write_text('{"pairs": "relation sentences"}\n')
    work, config = tmp_path / "work", micro_config()
    first = []
    run_search(config, prepared["backbone"], data, work, methods=["goal", "longclip"],
               trainer=fake_trainer(first, 2), progress=lambda line: None)
    run_search(config, prepared["backbone"], data, work, methods=["goal", "longclip"], trainer=_refuse,
               progress=lambda line: None)
    (data / "train_segments" / "segments.jsonl").write_text('{"pairs": "own sentences"}\n')
    second = []
    run_search(config, prepared["backbone"], data, work, methods=["goal", "longclip"],
               trainer=fake_trainer(second, 2), progress=lambda line: None)
    assert len(first) == 6 and len(second) == 3
    assert {p.parent.name.split("-")[0] for p in second} == {"goal"}
    assert not {p.parent for p in first} & {p.parent for p in second}
    setting = json.loads((second[0].parent / "setting.json").read_text())
    assert set(setting["products"]) == {"segments"}


# ------------------------------------------------------------------------------------- the record
def _record(path: Path, chosen: float) -> Path:
    def point(rate, step, score):
        return {"rate": rate, "step": step, "score": score, "rise": None, "minutes": 1.0,
                "epochs": [{"epoch": 1, "i2t_r1": score, "t2i_r1": score, "mean": score}]}

    path.write_text(json.dumps({
        "protocol": {"benchmark": "synthetic", "split": "val"}, "zeroshot": {"mean": 40.0},
        "methods": {"longclip": {"key": "lr", "paper_ratio": 1.0, "paper_rate": 1e-4, "chosen": chosen,
                                 "score": 50.0, "above_zeroshot": True, "under_trained": False,
                                 "points": [point(3e-5, -1, 45.0), point(1e-4, 0, 50.0)]}},
        "competitor": None, "provenance": {"minutes": 2.0}}))
    return path


def test_a_record_whose_choice_is_none_of_its_points_is_refused_naming_file_method_and_rate(tmp_path):
    assert load_record(_record(tmp_path / "good.json", 1e-4))["methods"]["longclip"]["chosen"] == 1e-4
    bad = _record(tmp_path / "bad.json", 5e-4)
    with pytest.raises(ValueError) as caught:
        load_record(bad)
    message = str(caught.value)
    assert "\n" not in message and str(bad) in message
    assert "methods.longclip chose lr 0.0005" in message and "(3e-05, 0.0001)" in message


# ------------------------------------------------------------------ a config that is not the record's
def test_a_rate_that_is_not_the_records_choice_is_a_warning_naming_key_and_record(tmp_path):
    override = tmp_path / "edited.yaml"
    override.write_text("methods:\n  goal: {train: {lr: 1.0e-3}}\n")
    config = load_config([REPO / "config" / "config.yaml", override])
    record = REPO / "resources" / "tuning" / "record.json"
    chose = f"{json.loads(record.read_text())['methods']['goal']['chosen']:g}"  # the shipped record's choice
    warnings = config_warnings(config)
    assert warnings == [f"config key methods.goal: lr 0.001 in the config, the tuning record chose {chose} for "
                        f"goal (tuning.record {record})"] or warnings == [
        f"config key methods.goal: lr 0.001 in the config, the tuning record chose {chose} for goal "
        "(tuning.record resources/tuning/record.json)"]
    assert config_warnings(load_config([REPO / "config" / "config.yaml"])) == []
    # `hnclip plan` prints it (snakemake -n logs the same lines: workflow/rules/common.smk)
    from hnclip.cli.plan import print_plan

    out = io.StringIO()
    print_plan([REPO / "config" / "config.yaml", override], results_dir=tmp_path / "results", file=out,
               job_cost=False)
    assert f"warning: config key methods.goal: lr 0.001 in the config, the tuning record chose {chose}" in out.getvalue()


def test_summary_md_has_a_tuning_line_naming_the_record_and_what_is_not_its_choice(tmp_path):
    from hnclip.analysis.summary import render_summary_markdown
    from hnclip.tuning.record import record_check

    config = load_config([REPO / "config" / "config.yaml"])
    record = REPO / "resources" / "tuning" / "record.json"
    summary = {"scale": "toy", "machine": {}, "backbone": {}, "regime": {}, "main": {},
               "claims": {"tally": {"holds": 1}}}
    chose = f"{json.loads(record.read_text())['methods']['goal']['chosen']:g}"  # the shipped record's choice

    def tuning_line(config):
        markdown = render_summary_markdown({**summary, "tuning": record_check(config, record)})
        return [r for r in markdown.splitlines() if r.startswith("| tuning record")]

    # the shipped record's resolution and long-budget sentences follow (test_tuning_long_budget checks them)
    [agreeing] = tuning_line(config)
    assert agreeing.startswith(f"| tuning record `{record}` | every rate and the competitor are its choices on "
                               "val; val resolves the competitor's choice: ") and agreeing.endswith(" epochs | |")
    config["methods"]["goal"]["train"] = {"lr": 1e-3}
    [line] = tuning_line(config)
    assert line.startswith(f"| tuning record `{record}` | **this run's rates are not the record's**: methods.goal: "
                           f"lr 0.001 in the config, the tuning record chose {chose} for goal; val resolves ")
    assert line.endswith(" epochs | its choices on val |")
    bad = _record(tmp_path / "bad.json", 5e-4)
    broken = render_summary_markdown({**summary, "tuning": record_check(config, bad)})
    assert f"| tuning record | not read: tuning record {bad}: methods.longclip chose lr 0.0005" in broken


# --------------------------------------------------------------------------- an interrupted search
def _tune(config_path: Path, prepared, work: Path, out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.Popen([sys.executable, "-m", "hnclip", "tune", "--effective-config", str(config_path),
                             "--backbone", str(prepared["backbone"]), "--data", str(prepared["data"]),
                             "--work", str(work), "--out", str(out), "--methods", "longclip"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)


def _after_first_epoch(work: Path, rate: str, process: subprocess.Popen, timeout: float = 240) -> Path:
    """The point folder of ``rate`` once epoch 1 is evaluated and checkpointed and its trainer still runs."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read()
        for out in work.glob(f"synthetic-val/longclip-*/lr{rate}"):
            epochs = out / "epochs.csv"
            if (epochs.is_file() and len(epochs.read_text().splitlines()) >= 2 and (out / "run.lock").is_file()
                    and (out / "checkpoints" / "last.pt").is_file()):
                return out
        time.sleep(0.2)
    raise AssertionError(f"point lr{rate} did not finish its first epoch in {timeout} s")


@pytest.mark.slow
def test_an_interrupted_search_resumes_each_point_and_scores_it_on_all_its_epochs(prepared, tmp_path):
    """SIGTERM while the first point has 1 of 4 epochs: the trainer is stopped cleanly (its lock released);
    then kill -9 of everything while the second has 1: the rerun resumes both from their checkpoints and
    scores every point on its 4 epochs; the record's minutes are the points' own, over every session."""
    from hnclip.run_lock import live_holder

    config = micro_config(epochs=4)
    # 12 steps an epoch, each writing its checkpoint: seconds left after the first epoch to stop the point in,
    # even on a quiet machine, where three epochs without them passed before the signal arrived
    config["train"].update(micro_batch=2, accum_steps=1, checkpoint_every=1)
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps(config))
    work, out = tmp_path / "work", tmp_path / "record.json"
    first = _tune(config_path, prepared, work, out)
    point = _after_first_epoch(work, "0.0003", first)
    trainer_pid = json.loads((point / "run.lock").read_text())["pid"]
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 143
    with pytest.raises(ProcessLookupError):
        os.kill(trainer_pid, 0)  # the trainer stopped with the search, not left running
    assert not (point / "run.lock").exists() and live_holder(point) is None  # released, not left behind
    assert not (point / "summary.json").exists()
    second = _tune(config_path, prepared, work, out)
    following = _after_first_epoch(work, "0.001", second)
    os.killpg(second.pid, signal.SIGKILL)  # a scheduler's kill -9 of the job: search and trainer at once
    second.wait(timeout=60)
    lines: list[str] = []
    record = run_search(config, prepared["backbone"], prepared["data"], work, methods=["longclip"],
                        progress=lines.append)
    assert any("lr 0.001 (step +0) training (resuming an interrupted run)" in line for line in lines)
    log = (work / "search.log").read_text()
    for folder in (point, following):  # the trainer continued from the checkpoint it left
        assert f"resuming {folder / 'checkpoints' / 'last.pt'} at step" in log
    points = record["methods"]["longclip"]["points"]
    assert [p["rate"] for p in points] == [3e-4, 1e-3, 3e-3]
    for p in points:
        assert [e["epoch"] for e in p["epochs"]] == [1, 2, 3, 4]
    # each resumed run continued from its checkpoint: its log has each epoch once
    for folder in (point, following):
        with open(folder / "epochs.csv", newline="") as f:
            assert [int(float(r["epoch"])) for r in csv.DictReader(f)] == [1, 2, 3, 4]
    walls = [json.loads((f / "summary.json").read_text())["wall_time_s"]
             for f in sorted(point.parent.glob("lr*"))]
    assert record["provenance"]["minutes"] == pytest.approx(sum(round(w / 60, 2) for w in walls), abs=0.051)
