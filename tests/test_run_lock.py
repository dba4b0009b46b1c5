"""One trainer per run (hnclip.run_lock): a second trainer on the same output or checkpoint folder
stops naming the holder; a lock left by a killed trainer on this host is taken over with a warning."""

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

from hnclip.run_lock import LOCK_NAME, RunLock, RunLockedError, live_holder, refuse_held_folders

_CTX = multiprocessing.get_context("spawn")  # no fork of a process that has torch threads running


def _hold(directory: str, ready, done) -> None:
    with RunLock(directory):
        ready.set()
        done.wait(60)


def _hold_and_die(directory: str, ready) -> None:
    RunLock(directory).acquire()
    ready.set()
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: nothing is released by Python


_FORKS_AND_DIES = """
import os, signal, sys, time
from hnclip.run_lock import RunLock
RunLock(sys.argv[1]).acquire()
children = []
for _ in range(2):  # as a DataLoader with num_workers=2 forks its workers: no exec
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)  # not the test's pipe: it waits for the parent's output alone
        os.dup2(devnull, 2)
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print(" ".join(map(str, children)), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_trainer_killed_while_its_forked_workers_live_leaves_its_run_free_at_once(tmp_path):
    # after kill -9 the orphaned workers live on (a DataLoader worker notices its parent gone within ~5 s);
    # they must not keep the run locked: the restart takes it over at once, without waiting
    proc = subprocess.run([sys.executable, "-c", _FORKS_AND_DIES, str(tmp_path)], capture_output=True, text=True,
                          timeout=60)
    children = [int(pid) for pid in proc.stdout.split()]
    try:
        assert proc.returncode == -signal.SIGKILL and len(children) == 2, proc.stderr
        assert all(_alive(pid) for pid in children)  # the workers still run
        with RunLock(tmp_path):
            assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    finally:
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


_FORKS_A_CHILD_THAT_EXITS = """
import os, sys, time
from hnclip.run_lock import RunLock
with RunLock(sys.argv[1]):
    pid = os.fork()
    if pid == 0:
        os._exit(0)  # its copy of the lock file was closed at fork; exiting must not unlock the parent's
    os.waitpid(pid, 0)
    print("child gone", flush=True)
    time.sleep(60)
"""


def test_a_forked_child_ending_leaves_its_parents_lock_held(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", _FORKS_A_CHILD_THAT_EXITS, str(tmp_path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "child gone"
        assert live_holder(tmp_path)["pid"] == holder.pid
        with pytest.raises(RunLockedError, match=f"PID {holder.pid}"):
            RunLock(tmp_path).acquire()
    finally:
        holder.kill()
        holder.wait(60)


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
    with caplog.at_level(logging.WARNING, logger="hnclip.run_lock"):
        with RunLock(tmp_path):
            assert json.loads((tmp_path / LOCK_NAME).read_text())["pid"] == os.getpid()
    assert "stale run lock" in caplog.text and f"PID {holder.pid}" in caplog.text and "gone" in caplog.text


def test_a_stale_lock_of_another_host_is_taken_over_naming_that_host(tmp_path, caplog):
    # a SLURM job preempted on one node and requeued on another finds the first node's lock file
    (tmp_path / LOCK_NAME).write_text(json.dumps({"pid": 1, "host": "node-elsewhere", "since": "2026-01-01T00:00:00"}))
    with caplog.at_level(logging.WARNING, logger="hnclip.run_lock"):
        with RunLock(tmp_path):
            assert json.loads((tmp_path / LOCK_NAME).read_text())["host"] == socket.gethostname()
    assert "node-elsewhere" in caplog.text and "another host" in caplog.text


@pytest.mark.slow  # two trainer processes
def test_a_second_trainer_sharing_either_folder_of_a_running_run_stops_before_touching_its_logs(tmp_path):
    """A real trainer paused inside its first step holds the run; a second one that shares its output folder,
    its checkpoint folder or both fails naming it, and the first one's CSV logs are untouched. (Before the
    lock in the output folder, the same --out with another --checkpoint-dir trained, and dynamics.csv held
    its steps twice.)"""
    import dataclasses

    from test_train_support import TRAIN_SCRIPT, make_dataset, small_config

    from hnclip.train import train

    paths = make_dataset(tmp_path / "data", n=16)
    cfg = small_config()
    run = tmp_path / "run"
    run_paths = dict(paths, out_dir=run / "out", checkpoint_dir=run / "ckpt")
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
        logs = {p.name: p.read_bytes() for p in (run / "out").glob("*.csv")}
        assert logs  # the first trainer has started its logs
        for out_dir, checkpoint_dir in ((run / "out", run / "ckpt"), (run / "out", run / "other_ckpt"),
                                        (run / "other_out", run / "ckpt")):
            with pytest.raises(RunLockedError, match=f"PID {first.pid}"):
                train(cfg, out_dir=out_dir, checkpoint_dir=checkpoint_dir, **paths)
            assert {p.name: p.read_bytes() for p in (run / "out").glob("*.csv")} == logs
            # refused before writing: nothing of the second trainer in its own folder, no lock left held
            assert not list((run / "other_out").glob("*.csv"))
            assert not (run / "other_ckpt" / LOCK_NAME).exists() and not (run / "other_out" / LOCK_NAME).exists()
    finally:
        first.kill()
        first.wait()
        first.stdout.close()
    train(cfg, out_dir=run / "out", checkpoint_dir=run / "ckpt", **paths)  # the killed trainer's locks are stale


def test_one_folder_given_as_both_is_locked_once_and_the_probe_sees_the_holder(tmp_path):
    with RunLock(tmp_path, tmp_path / "sub" / "..") as lock:
        assert lock.paths == [tmp_path / LOCK_NAME]
        holder = live_holder(tmp_path)
        assert holder is not None and holder["pid"] == os.getpid()
        with pytest.raises(RunLockedError, match=str(tmp_path)):
            refuse_held_folders([tmp_path / "elsewhere", tmp_path])
    assert live_holder(tmp_path) is None
    refuse_held_folders([tmp_path])  # free: no error


def test_a_second_snakemake_stops_before_any_job_when_a_trainer_holds_a_runs_folder(tmp_path):
    """After `snakemake --unlock` while a training job still runs, a second Snakemake of the same target would
    delete that job's outputs and log before its own trainer could refuse (Snakemake removes them when it
    starts a job). The onstart check stops it first, naming the holder; nothing is built or removed."""
    from checkout import copy_checkout, user_env

    repo = copy_checkout(tmp_path / "repo")
    run = repo / "results/runs/synthetic/hnclip/g0.5/f1/s0"
    ready, done = _CTX.Event(), _CTX.Event()
    holder = _CTX.Process(target=_hold, args=(str(run), ready, done))
    holder.start()
    try:
        assert ready.wait(60)
        (run / "dynamics.csv").write_text("step\n1\n")  # the running trainer's log so far
        second = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", f"{run.relative_to(repo)}/summary.json",
                                 "--configfile", "tests/e2e/micro.yaml"], cwd=repo, env=user_env(),
                                capture_output=True, text=True, timeout=600)
    finally:
        done.set()
        holder.join(60)
    console = second.stdout + second.stderr
    assert second.returncode != 0, console[-3000:]
    assert f"PID {holder.pid}" in console and str(run.relative_to(repo)) in console, console[-3000:]
    assert (run / "dynamics.csv").read_text() == "step\n1\n"
    assert not (repo / "results/data").exists() and not (repo / "results/logs").exists()


def test_a_log_deleted_while_the_run_trains_stops_it_instead_of_restarting_headerless(tmp_path):
    """What a second Snakemake starting the same job does to the first's outputs (deletes them) used to leave a
    dynamics.csv of the later rows only, no header, and no error; now the trainer's next row stops it."""
    from hnclip.training.logs import CsvLog

    log = CsvLog(tmp_path / "dynamics.csv", ("step", "loss"))
    log.start()
    log.append({"step": 1, "loss": 0.5})
    (tmp_path / "dynamics.csv").unlink()
    with pytest.raises(RuntimeError, match=r"dynamics\.csv was deleted while this run trained"):
        log.append({"step": 2, "loss": 0.25})
    assert not (tmp_path / "dynamics.csv").exists()
