"""Watching a run train: TensorBoard event files and a W&B run (``train.report_to``), progress lines on stdout.

References: the run's own CSV logs (dynamics.csv, epochs.csv), read back with the csv module, against the
event files read back with TensorBoard's own EventAccumulator and the W&B run's records read back from
its offline ``.wandb`` file (W&B's LevelDB-style log of protobuf records); weights with reporting on
against a run without it; progress lines against the job's dynamics.csv and hand arithmetic.
"""

from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_train_support import (
    assert_same_run,
    interrupted_run,
    make_dataset,
    read_csv_rows,
    run_training,
    small_config,
)

from hnclip.config.train import TrainConfig, override_items
from hnclip.training.logs import EPOCH_COLUMNS

# what the loop must show (the issue: losses, learning rate, logit scale, saturated share, per-epoch R@K)
REQUIRED_TAGS = {"train/loss", "train/infonce", "train/lr", "train/logit_scale", "train/saturated_share",
                 *(f"eval/{c}" for c in EPOCH_COLUMNS if c not in ("epoch", "step", "benchmark"))}


def _expected_scalars(out: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} from the CSV logs: every non-empty number but the axis and the micro-batch list."""
    expected: dict[str, dict[int, float]] = {}
    for row in read_csv_rows(out / "dynamics.csv"):
        for column, cell in row.items():
            if column in ("step", "epoch", "infonce_micro") or cell == "":
                continue
            prefix = "train/" if column in ("lr", "logit_scale", "loss", "infonce", "saturated_share",
                                            "objective_active_share") else "probe/"
            expected.setdefault(prefix + column, {})[int(row["step"])] = float(cell)
    for row in read_csv_rows(out / "epochs.csv"):
        prefix = f"eval/{row['benchmark']}/" if row.get("benchmark") else "eval/"  # a row naming its test split
        for column, cell in row.items():
            if column not in ("epoch", "step", "benchmark"):
                expected.setdefault(prefix + column, {})[int(row["step"])] = float(cell)
    return expected


def _event_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

    accumulator = EventAccumulator(str(folder), size_guidance={SCALARS: 0})  # 0: keep every event
    accumulator.Reload()
    return {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in accumulator.Tags()["scalars"]}


def _assert_events_equal_csv(out: Path) -> None:
    expected = _expected_scalars(out)
    events = _event_scalars(out / "tensorboard")
    assert REQUIRED_TAGS <= set(events)
    assert set(events) == set(expected)
    for tag, by_step in expected.items():
        steps = [step for step, _ in events[tag]]
        assert steps == sorted(by_step), tag  # each CSV row once, in order: none lost, none twice
        for step, value in events[tag]:
            # event files store float32; nan (an overflowed or undefined ratio) stays nan
            assert np.float32(value) == np.float32(by_step[step]) or (np.isnan(value) and np.isnan(by_step[step])), \
                (tag, step, value, by_step[step])


def test_tensorboard_event_files_hold_the_runs_csv_logs(tmp_path):
    paths = make_dataset(tmp_path / "data", n=24)
    # 3 steps per epoch, 2 epochs, the probe on steps 1, 3, 5, an evaluation after each epoch
    cfg = small_config(gamma=0.5, token_weight=0.5, epochs=2, dynamics_every=2, report_to="tensorboard")
    run_training(paths, tmp_path / "run", cfg, eval_manifest=paths["train_manifest"],
                 eval_store_dir=paths["store_dir"])
    out = tmp_path / "run" / "out"
    assert len(read_csv_rows(out / "dynamics.csv")) == 6 and len(read_csv_rows(out / "epochs.csv")) == 2
    _assert_events_equal_csv(out)
    assert {"probe/grad_norm_standard", "probe/grad_ratio"} <= set(_event_scalars(out / "tensorboard"))


@pytest.mark.slow  # a trainer subprocess killed, then resumed
def test_tensorboard_after_a_kill_and_resume_holds_each_row_once(tmp_path):
    paths = make_dataset(tmp_path / "data", n=24)
    cfg = small_config(epochs=2, checkpoint_every=2, report_to="tensorboard")
    # killed inside step 6 (its 11th micro-batch): the event files of the first session already hold
    # step 5, which the checkpoint (step 4) does not cover and the second session recomputes
    out, outputs = interrupted_run(tmp_path, cfg, paths, [{"objective_call": 11}])
    assert outputs[0][-2:] == ["CHECKPOINT 4", "PAUSED"] and outputs[1][:1] == ["CHECKPOINT 6"]
    _assert_events_equal_csv(out)
    assert len(list((out / "tensorboard").iterdir())) == 1  # one session's file: written afresh from the logs


# ------------------------------------------------------------------------------------------------ W&B
def _wandb_records(path: Path):
    """The protobuf records of a ``.wandb`` file: W&B's log format (LevelDB's: 32 KiB blocks of records
    with a 7-byte header, crc32 + length + type FULL/FIRST/MIDDLE/LAST), after a 7-byte file header."""
    from wandb.proto import wandb_internal_pb2

    data, pos, pending, block = path.read_bytes(), 7, b"", 32768
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            pos += left
            continue
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record


def test_wandb_offline_run_holds_the_logged_rows_and_reporting_changes_no_weight(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")  # nothing leaves the machine
    monkeypatch.setenv("WANDB_PROJECT", "hnclip-test")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    paths = make_dataset(tmp_path / "data", n=24)
    cfg = dict(epochs=2, dynamics_every=2, gamma=0.5)
    run_training(paths, tmp_path / "plain", small_config(**cfg), eval_manifest=paths["train_manifest"],
                 eval_store_dir=paths["store_dir"])
    run_training(paths, tmp_path / "shown", small_config(**cfg, report_to="tensorboard,wandb"),
                 eval_manifest=paths["train_manifest"], eval_store_dir=paths["store_dir"])
    out = tmp_path / "shown" / "out"
    assert_same_run(tmp_path / "plain" / "out", out)  # weights bit for bit, logs line for line
    _assert_events_equal_csv(out)

    (run_file,) = (out / "wandb").glob("offline-run-*/run-*.wandb")
    history: dict[int, dict[str, float]] = {}
    run_records = []
    for record in _wandb_records(run_file):
        kind = record.WhichOneof("record_type")
        if kind == "history":
            # a key with a slash is stored split (nested_key)
            items = {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in record.history.item}
            history.setdefault(int(record.history.step.num), {}).update(
                {k: v for k, v in items.items() if not k.startswith("_")})
        elif kind == "run":
            run_records.append(record.run)
    assert run_records and run_records[0].project == "hnclip-test" and run_records[0].display_name == str(out)
    assert run_records[0].run_id == (out / "wandb" / "hnclip-run-id").read_text().strip()
    expected = _expected_scalars(out)
    got = {tag: {step: values[tag] for step, values in history.items() if tag in values}
           for tag in {t for values in history.values() for t in values}}
    assert set(got) == set(expected)
    for tag, by_step in expected.items():  # W&B keeps the doubles: equal to the CSV's text exactly
        assert got[tag].keys() == by_step.keys(), tag
        for step, value in by_step.items():
            assert got[tag][step] == value or (value != value and got[tag][step] != got[tag][step]), (tag, step)


def test_report_to_names_unknown_reporters_and_is_not_hashed():
    with pytest.raises(ValueError, match=r"TrainConfig.report_to='tensorboard,mlflow' names 'mlflow'"):
        TrainConfig(report_to="tensorboard,mlflow")
    assert TrainConfig(report_to=" wandb,tensorboard,wandb").reporters == ("wandb", "tensorboard")
    base = TrainConfig()
    assert TrainConfig(report_to="tensorboard", progress_every=5).config_hash() == base.config_hash()


def test_shown_only_keys_reach_the_command_line_only_when_set():
    # a config that leaves them at their defaults keeps its jobs' command lines (Snakemake reruns on a change)
    assert not [i for i in override_items({"epochs": 2, "report_to": "", "progress_every": 30})
                if i.startswith(("report_to", "progress_every"))]
    items = override_items({"epochs": 2, "report_to": "tensorboard", "progress_every": 10})
    assert "report_to=tensorboard" in items and "progress_every=10" in items


def test_default_settings_write_no_report(tmp_path, capsys):
    paths = make_dataset(tmp_path / "data", n=16)
    run_training(paths, tmp_path / "run", small_config(progress_every=TrainConfig.progress_every))
    out = tmp_path / "run" / "out"
    assert not (out / "tensorboard").exists() and not (out / "wandb").exists()
    assert capsys.readouterr().out == ""  # a job shorter than the interval prints nothing


# ------------------------------------------------------------------------------------- progress lines
LINE = re.compile(r"^hnclip train (?P<out>\S+): step (?P<step>\d+)/(?P<total>\d+) \(\d+%\), epoch (?P<epoch>\d+)/3, "
                  r"loss (?P<loss>[\d.]+), [\d.]+ samples/s, \S+ elapsed, ETA \S+$")


def test_a_training_job_prints_progress_lines_to_stdout_and_its_log_to_stderr(tmp_path):
    import hnclip

    paths = make_dataset(tmp_path / "data", n=96)
    out = tmp_path / "run" / "out"
    env = dict(os.environ, PYTHONPATH=str(Path(hnclip.__file__).resolve().parents[1]))
    command = [sys.executable, "-m", "hnclip", "train", "--init", str(paths["init_model_dir"]),
               "--manifest", str(paths["train_manifest"]), "--images", str(paths["store_dir"]), "--out", str(out),
               "--checkpoint-dir", str(tmp_path / "ckpt"), "--threads", "1"]
    # 12 steps per epoch, 3 epochs, the probe on every step: 36 steps take well over a second even on a fast
    # CPU (9 steps at 0.2 s once gave no training line on one), so lines 0.05 s apart fall inside the loop
    for item in ("micro_batch=4", "accum_steps=2", "epochs=3", "device=cpu", "dynamics_every=1", "gamma=0.5",
                 "token_weight=0.5", "progress_every=0.05"):
        command += ["--set", item]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines and not [line for line in proc.stderr.splitlines() if line.startswith("hnclip train")]
    assert lines[-1].startswith(f"hnclip train {out}: finished, step 36/36, in ")
    losses = {int(r["step"]): float(r["loss"]) for r in read_csv_rows(out / "dynamics.csv")}
    epochs = {int(r["step"]): int(r["epoch"]) for r in read_csv_rows(out / "dynamics.csv")}
    training = [m for line in lines if (m := LINE.match(line))]
    assert training, lines
    for match in training:  # the numbers of the step the line names, as dynamics.csv has them
        step = int(match["step"])
        assert match["out"] == str(out) and match["total"] == "36"
        assert match["loss"] == f"{losses[step]:.4f}" and int(match["epoch"]) == epochs[step]
    others = [line for line in lines[:-1] if not LINE.match(line)]
    assert all(re.match(rf"^hnclip train {re.escape(str(out))}: [a-z]", line) for line in others), others


@pytest.mark.slow  # a Snakemake run of one training job
def test_snakemake_shows_a_training_jobs_progress_lines_as_it_runs_and_logs_its_stderr(tmp_path):
    """A rule as workflow/rules/train.smk writes it (stderr to the job's log, stdout left alone): the
    progress lines reach Snakemake's own output while the job runs, before Snakemake reports it finished."""
    import hnclip

    paths = make_dataset(tmp_path / "data", n=96)
    sets = " ".join(f"--set {item}" for item in ("micro_batch=4", "accum_steps=2", "epochs=3", "device=cpu",
                                                 "dynamics_every=1", "gamma=0.5", "progress_every=0.05"))
    (tmp_path / "Snakefile").write_text(
        "rule train:\n"
        "    output: 'out/summary.json'\n"
        "    log: 'train.log'\n"
        f"    shell: '{sys.executable} -m hnclip train --init {paths['init_model_dir']} --manifest "
        f"{paths['train_manifest']} --images {paths['store_dir']} --out out --checkpoint-dir ckpt --threads 1 "
        f"{sets} 2> {{log}}'\n")
    env = dict(os.environ, PYTHONPATH=str(Path(hnclip.__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--directory", str(tmp_path),
                           "--snakefile", str(tmp_path / "Snakefile")], cwd=tmp_path, env=env, timeout=600,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False)
    assert proc.returncode == 0, proc.stdout[-4000:]
    lines = proc.stdout.splitlines()
    shown = [i for i, line in enumerate(lines) if line.startswith("hnclip train out: step ")]
    finished = next(i for i, line in enumerate(lines) if line.startswith("Finished jobid"))
    done = next(i for i, line in enumerate(lines) if line.startswith("hnclip train out: finished"))
    assert shown and shown[0] < done < finished
    log = (tmp_path / "train.log").read_text()
    assert "train:" in log and "hnclip train out:" not in log  # tqdm's bar in the log, the lines on the console


def test_progress_line_eta_by_hand():
    from hnclip.progress import Progress, format_duration

    now = [100.0]
    progress = Progress("hnclip train results/runs/x", 30, clock=lambda: now[0])
    assert progress.line() == "hnclip train results/runs/x: starting, 0s elapsed"
    progress.set_phase("loading the training data")
    now[0] = 161.0
    assert progress.line() == "hnclip train results/runs/x: loading the training data, 1m01s elapsed"
    progress.start_loop(step=10, total_steps=110, epochs=4, samples_per_step=128)  # a resumed session
    now[0] = 181.0
    progress.record_step(30, 2, 1.234567)
    # 20 steps in 20 s: 1 step/s, 128 samples/s; 80 steps left: 80 s
    assert progress.line() == ("hnclip train results/runs/x: step 30/110 (27%), epoch 2/4, loss 1.2346, "
                               "128.0 samples/s, 1m21s elapsed, ETA 1m20s")
    progress.set_phase("evaluating after epoch 2")
    assert progress.line().endswith("evaluating after epoch 2, step 30/110 (27%), epoch 2/4, 1m21s elapsed")
    assert [format_duration(s) for s in (59.4, 60, 3599, 3600 * 5 + 65)] == ["59s", "1m00s", "59m59s", "5h01m"]


def test_every_other_verb_prints_a_heartbeat_and_plan_prints_none(monkeypatch, capsys):
    import argparse
    import time

    import hnclip.cli as cli

    monkeypatch.setattr(cli, "HEARTBEAT_SECONDS", 0.05)
    with cli._heartbeat(argparse.Namespace(verb="evaluate", out="results/evals/x/docci.json")):
        time.sleep(0.4)  # a job longer than the interval
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 3 and lines[0] == "hnclip evaluate results/evals/x/docci.json: running, 0s elapsed"
    assert lines[-1] == "hnclip evaluate results/evals/x/docci.json: finished in 0s"
    for verb in ("plan", "train"):  # plan's stdout is the plan; train prints its own lines
        with cli._heartbeat(argparse.Namespace(verb=verb)):
            time.sleep(0.2)
    assert capsys.readouterr().out == ""


@pytest.mark.slow  # a trainer subprocess sent SIGTERM
@pytest.mark.parametrize("progress_every", [0.2, 600])
def test_a_trainer_sent_sigterm_stops_saying_so_and_leaves_its_run_free(tmp_path, progress_every):
    """``kill`` (SIGTERM, also a scheduler's time limit): the job unwinds instead of dying mid-line; its
    progress line says where it stopped, the log's last line (what onerror shows) says it was terminated and at
    which step, exit status 143, and the run's folders are free for the restart. With ``progress_every`` 600 the
    job is killed before its first progress line: the stop still names its step on both."""
    import signal
    import time

    import hnclip
    from hnclip.job_errors import last_line
    from hnclip.run_lock import LOCK_NAME, live_holder

    paths = make_dataset(tmp_path / "data", n=24)
    out, ckpt = tmp_path / "run" / "out", tmp_path / "ckpt"
    env = dict(os.environ, PYTHONPATH=str(Path(hnclip.__file__).resolve().parents[1]))
    command = [sys.executable, "-m", "hnclip", "train", "--init", str(paths["init_model_dir"]),
               "--manifest", str(paths["train_manifest"]), "--images", str(paths["store_dir"]), "--out", str(out),
               "--checkpoint-dir", str(ckpt), "--threads", "1"]
    for item in ("micro_batch=4", "accum_steps=2", "epochs=200", "device=cpu", "dynamics_every=1",
                 f"progress_every={progress_every}"):
        command += ["--set", item]
    log = tmp_path / "train.log"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)
        lines = []
        if progress_every < 1:
            for line in proc.stdout:  # wait until it trains
                lines.append(line.rstrip("\n"))
                if re.match(r"^hnclip train \S+: step [1-9]\d*/600 ", lines[-1]):
                    break
        else:  # no progress line yet: tqdm's bar in the log says it trains
            deadline = time.monotonic() + 120
            while not re.search(r"train:\s+\d+%\|[^|\n]*\| [1-9]\d*/600", log.read_text()):
                assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        rest, _ = proc.communicate(timeout=120)
    lines += rest.splitlines()
    assert proc.returncode == 143, log.read_text()[-3000:]
    shown = re.match(rf"^hnclip train {re.escape(str(out))}: terminated by SIGTERM at step (\d+)/600 after \S+$",
                     lines[-1])
    assert shown, lines[-3:]
    assert re.match(rf"^hnclip train: terminated by SIGTERM at step {shown.group(1)}/600 after \S+ \(kill, a time "
                    r"limit or a cancelled job\)$", last_line(log)), last_line(log)
    assert "Traceback" not in log.read_text()
    assert live_holder(out) is None and not (out / LOCK_NAME).exists() and not (ckpt / LOCK_NAME).exists()
