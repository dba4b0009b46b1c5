"""One trainer per run: an exclusive lock file in the run's output folder and in its checkpoint folder.

Two trainers on one run (a second ``snakemake`` in the same folder after ``--unlock``, a job resubmitted
while the first still runs on another node, two ``hnclip train`` by hand) would both append to
``dynamics.csv`` and both replace ``last.pt``: the logs interleave and the checkpoint belongs to neither.
Either folder shared is enough for that (the same ``--out`` with another ``--checkpoint-dir`` writes its
rows into the first one's ``dynamics.csv``), so a trainer holds a lock (``run.lock``, JSON with the
holder's PID, host and start time) in both, taken before anything is written and released when training
ends, by return or by exception; the second trainer stops naming the holder, whichever folder it shares.

How it is held: ``fcntl.flock`` on the open lock file, which the kernel drops when the process dies, even
by ``kill -9``, so a crash never needs a person to clean up. A live holder keeps the flock: the second
trainer is refused, naming it. A lock file whose flock nobody holds is stale (its writer died without
removing it): it is taken over with a warning that says whether its PID is gone (same host) or that it
came from another host. Another host's lock is taken over too, because a SLURM job preempted or
cancelled on one node resumes on another (the README's requeue); the shared filesystems clusters use
(NFSv4, Lustre with ``flock``, GPFS) keep flock coherent across nodes, so a trainer still running there
holds it and is not taken over. On a filesystem with node-local locks only (Lustre ``localflock``), two
nodes cannot see each other's flock, and only Snakemake's own directory lock keeps them apart.

A process forked from the holder (a DataLoader worker with ``num_workers > 0``, which forks without exec)
shares the holder's open lock file, and a flock lives while any copy of it is open: after ``kill -9`` of the
trainer its orphaned workers kept the run locked until they noticed (about 5 s), and a restart was refused
naming a dead PID. The forked child therefore closes its copy at once (``os.register_at_fork``): the lock
stays the parent's alone, held while the parent lives and dropped when it dies. (Closing a copy never
unlocks; only ``LOCK_UN`` or closing the last copy does.)

A trainer's lock cannot protect its run from a second Snakemake: Snakemake deletes a job's declared
outputs and its log before the job's command starts, so the second trainer's refusal comes after the
damage. :func:`refuse_held_folders` is therefore asked by the workflow's ``onstart`` (before any job) for
the output folders of every job it is about to run: a folder a live trainer holds stops the whole
invocation, naming the holder (README, "After a crash").
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import logging
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

__all__ = ["LOCK_NAME", "RunLock", "RunLockedError", "live_holder", "refuse_held_folders"]

log = logging.getLogger(__name__)

LOCK_NAME = "run.lock"
# a refused flock is tried again for this long: a probe (live_holder) holds it for microseconds
_RETRY_S = 1.0
_BUSY = (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)


class RunLockedError(RuntimeError):
    """Another trainer holds the run; the message names it (PID, host, since) and the lock file."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _read_holder(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 65536).decode("utf-8", "replace")
    try:
        holder = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError:
        holder = {}
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict) -> str:
    return (f"PID {holder.get('pid', '?')} on host {holder.get('host', '?')}, "
            f"since {holder.get('since', '?')}")


def _flock(fd: int, mode: int) -> bool:
    """Whether ``fd`` got the flock ``mode`` (non-blocking), tried again for :data:`_RETRY_S`."""
    deadline = time.monotonic() + _RETRY_S
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return True
        except OSError as err:
            if err.errno not in _BUSY:
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


def live_holder(directory) -> dict | None:
    """The holder (PID, host, since) of ``directory``'s lock while a live process holds it, else None.

    Probes with a shared flock, dropped at once; a trainer taking the lock meanwhile retries
    (:data:`_RETRY_S`), so the probe never refuses it.
    """
    path = Path(directory) / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except (FileNotFoundError, NotADirectoryError):
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in _BUSY:
                raise
            return _read_holder(fd)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def refuse_held_folders(folders: Iterable) -> None:
    """:class:`RunLockedError` naming every folder of ``folders`` that a live trainer holds, and its holder.

    The workflow's ``onstart`` check: the output folders of the jobs a Snakemake is about to run. Snakemake
    would delete those jobs' outputs and logs before their trainers could refuse (module docstring).
    """
    held = []
    for folder in sorted({Path(f) for f in folders}):
        holder = live_holder(folder)
        if holder is not None:
            held.append(f"{folder} ({_describe(holder)})")
    if held:
        raise RunLockedError(
            "a trainer still runs in the output folder of a job this Snakemake would start: "
            + "; ".join(held) + ". Starting that job would delete the running one's outputs and log first "
            "(another Snakemake in this folder, still running after `snakemake --unlock`?). Wait for it to "
            f"end, or stop it, then run again (its lock: <folder>/{LOCK_NAME})")


# the descriptors of the lock files this process holds: a forked child closes its copies (module docstring)
_HELD_FDS: set[int] = set()


def _close_in_forked_child() -> None:
    for fd in _HELD_FDS:
        try:
            os.close(fd)  # the child's copy only: the parent's flock stays
        except OSError:
            pass
    _HELD_FDS.clear()


os.register_at_fork(after_in_child=_close_in_forked_child)


class _FolderLock:
    """The flock'd ``run.lock`` of one folder (module docstring)."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None
        self._pid: int | None = None  # the process that took it

    def acquire(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        host = socket.gethostname()
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            if not _flock(fd, fcntl.LOCK_EX):
                holder = _read_holder(fd)
                os.close(fd)
                raise RunLockedError(
                    f"run {self.directory} is being trained by another process ({_describe(holder)}); a second "
                    f"trainer would interleave its logs and checkpoints. Wait for it or stop it (lock: {self.path})")
            # a releasing holder unlinks the file before closing it: the inode locked here may be gone
            if not self.path.exists() or os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                os.close(fd)
                continue
            break
        holder = _read_holder(fd)
        if holder:
            pid = holder.get("pid")
            if holder.get("host") != host:
                why = "on another host, not holding it: a requeued job, or a node that went down"
            elif not isinstance(pid, int) or not _pid_alive(pid):
                why = "gone"
            else:
                why = "alive but no longer holding it (a reused PID)"
            log.warning("taking over the stale run lock %s of %s (process %s)", self.path, _describe(holder), why)
        mine = {"pid": os.getpid(), "host": host,
                "since": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(mine, sort_keys=True) + "\n").encode())
        os.fsync(fd)
        self._fd, self._pid = fd, os.getpid()
        _HELD_FDS.add(fd)
        log.info("holding %s as PID %d on host %s", self.path, mine["pid"], host)

    def release(self) -> None:
        if self._fd is None or self._pid != os.getpid():  # a forked child holds nothing (closed at fork)
            return
        try:
            self.path.unlink(missing_ok=True)  # before closing, so a waiting trainer re-checks the inode
        finally:
            _HELD_FDS.discard(self._fd)
            os.close(self._fd)
            self._fd = None


class RunLock:
    """``with RunLock(out_dir, checkpoint_dir):`` holds every folder for this process, or raises
    :class:`RunLockedError` (nothing held) naming the holder of the first one another trainer holds.

    Folders are taken in a fixed order (resolved paths, sorted; one folder given twice is locked once), so
    two trainers sharing both folders cannot each hold one and refuse the other forever.
    """

    def __init__(self, *directories):
        if not directories:
            raise ValueError("RunLock needs at least one folder")
        unique: dict[Path, Path] = {}
        for d in directories:
            unique.setdefault(Path(d).absolute().resolve(), Path(d))
        self._locks = [_FolderLock(unique[key]) for key in sorted(unique)]
        self.directory = Path(directories[0])
        self.path = self.directory / LOCK_NAME

    @property
    def paths(self) -> list[Path]:
        return [lock.path for lock in self._locks]

    def acquire(self) -> RunLock:
        taken = []
        try:
            for lock in self._locks:
                lock.acquire()
                taken.append(lock)
        except BaseException:
            for lock in reversed(taken):
                lock.release()
            raise
        return self

    def release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
