"""One trainer per run (hnclip.training.run_lock): a second trainer on the same checkpoint folder stops
naming the holder; a lock left by a killed trainer on this host is taken over with a warning."""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from hnclip.training.run_lock import LOCK_NAME, RunLock, RunLockedError

_CTX = multiprocessing.get_context("spawn")  # no fork of a process that has torch threads running


def _hold(directory: str, ready, done) -> None:
    with RunLock(directory):
        ready.set()
        done.wait(60)


def _hold_and_die(directory: str, ready) -> None:
    RunLock(directory).acquire()
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: nothing is released by Python


def test_a_second_holder_is_refused_naming_the_first_pid_host_and_since(tmp_path):
    ready, done = _CTX.Event(), _CTX.Event()
    holder = _CTX.Process(target=_hold, args=(str(tmp_path), ready, done))
    holder.start()
    try:
        assert ready.wait(60)
        recorded = json.loads((tmp_path / LOCK_NAME).read_text())
        with pytest.raises(RunLockedError) as info:
            RunLock(tmp_path).acquire()
        message = str(info.value)
        assert f"PID {holder.pid}" in message and socket.gethostname() in message
        assert recorded["pid"] == holder.pid and recorded["since"] in message
    finally:
        done.set()
        holder.join(60)
    assert holder.exitcode == 0 and not (tmp_path / LOCK_NAME).exists()  # released on exit
    with RunLock(tmp_path):  # free again
        assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()


def test_a_lock_left_by_a_killed_holder_is_taken_over_with_a_warning(tmp_path, caplog):
    ready = _CTX.Event()
    holder = _CTX.Process(target=_hold_and_die, args=(str(tmp_path), ready))
    holder.start()
    holder.join(60)
    assert holder.exitcode == -signal.SIGKILL and (tmp_path / LOCK_NAME).exists()
    with caplog.at_level(logging.WARNING, logger="hnclip.training.run_lock"):
        with RunLock(tmp_path):
            assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert "stale run lock" in caplog.text and f"PID {holder.pid}" in caplog.text and "gone" in caplog.text


def test_a_stale_lock_of_another_host_is_taken_over_naming_that_host(tmp_path, caplog):
    # a SLURM job preempted on one node and requeued on another finds the first node's lock file
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "node-elsewhere", "since": "2026-01-01T00:00:00"}))
    with caplog.at_level(logging.WARNING, logger="hnclip.training.run_lock"):
        with RunLock(tmp_path):
            assert json.loads((tmp_path / LOCK_NAME).read_text())["host"] == socket.gethostname()
    assert "node-elsewhere" in caplog.text and "another host" in caplog.text


def test_a_second_trainer_on_a_running_run_stops_before_touching_its_logs(tmp_path):
    """A real trainer paused inside its first step holds the run; a second one on the same folders fails."""
    import dataclasses

    from test_train_support import TRAIN_SCRIPT, make_dataset, run_training, small_config

    paths = make_dataset(tmp_path / "data", n=16)
    cfg = small_config()
    run_paths = dict(paths, out_dir=tmp_path / "run" / "out", checkpoint_dir=tmp_path / "run" / "ckpt")
    script = tmp_path / "first.py"
    script.write_text(TRAIN_SCRIPT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    payload = json.dumps({"config": dataclasses.asdict(cfg), "paths": {k: str(v) for k, v in run_paths.items()},
                          "pause": {"objective_call": 1}, "threads": 1})
    first = subprocess.Popen([sys.executable, str(script), payload], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, PYTHONPATH=src))
    try:
        for line in first.stdout:
            if line.strip() == "PAUSED":
                break
        logs = {p.name: p.read_bytes() for p in (tmp_path / "run" / "out").glob("*.csv")}
        with pytest.raises(RunLockedError, match=f"PID {first.pid}"):
            run_training(paths, tmp_path / "run", cfg)
        assert {p.name: p.read_bytes() for p in (tmp_path / "run" / "out").glob("*.csv")} == logs
    finally:
        first.kill()
        first.wait()
        first.stdout.close()
    run_training(paths, tmp_path / "run", cfg)  # the killed trainer's lock is stale: this run takes over
