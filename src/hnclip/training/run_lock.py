"""One trainer per run: an exclusive lock file in the run's checkpoint folder.

Two trainers on one run (a second ``snakemake`` in the same folder after ``--unlock``, a job resubmitted
while the first still runs on another node) would both append to ``dynamics.csv`` and both replace
``last.pt``: the logs interleave and the checkpoint belongs to neither. The lock (``run.lock``, JSON with
the holder's PID, host and start time) is taken before anything is written and released when training
ends, by return or by exception.

How it is held: ``fcntl.flock`` on the open lock file, which the kernel drops when the process dies, even
by ``kill -9``, so a crash never needs a person to clean up. A live holder keeps the flock: the second
trainer is refused, naming it. A lock file whose flock nobody holds is stale (its writer died without
removing it): it is taken over with a warning that says whether its PID is gone (same host) or that it
came from another host. Another host's lock is taken over too, because a SLURM job preempted or
cancelled on one node resumes on another (the README's requeue); the shared filesystems clusters use
(NFSv4, Lustre with ``flock``, GPFS) keep flock coherent across nodes, so a trainer still running there
holds it and is not taken over. On a filesystem with node-local locks only (Lustre ``localflock``), two
nodes cannot see each other's flock, and only Snakemake's own directory lock keeps them apart.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import logging
import os
import socket
from pathlib import Path

__all__ = ["LOCK_NAME", "RunLock", "RunLockedError"]

log = logging.getLogger(__name__)

LOCK_NAME = "run.lock"


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


class RunLock:
    """``with RunLock(checkpoint_dir):`` holds the run for this process, or raises :class:`RunLockedError`."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.path = self.directory / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.directory.mkdir(parents=True, exist_ok=True)
        host = socket.gethostname()
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                holder = _read_holder(fd)
                os.close(fd)
                if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise RunLockedError(
                    f"run {self.directory} is being trained by another process ({_describe(holder)}); a second "
                    f"trainer would interleave its logs and checkpoints. Wait for it or stop it (lock: {self.path})"
                ) from None
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
        os.write(fd, (json.dumps(mine) + "\n").encode())
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)  # before closing, so a waiting trainer re-checks the inode
        finally:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
