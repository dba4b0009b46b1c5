"""One Snakemake dry run per configuration per test session, shared by every test that reads a DAG's plan.

Planning the paper's DAG takes about 10 s and the embedded default's about 5 s on 2 cores; a dozen tests read
the same plans (job counts, printed commands, rule blocks). :func:`planned` runs ``snakemake -n -p --cores 1``
once for each (config files, targets) pair, in a fresh temporary folder outside the checkout (``--directory``,
so no finished run of the user's is seen and nothing is written into the checkout), and hands every later
caller the same result. Tests that need another ``--cores`` or ``--config`` override run their own.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]


@dataclass(frozen=True)
class Plan:
    """A finished dry run: what Snakemake printed, its exit status, and the seconds the first call took."""
    stdout: str
    stderr: str
    returncode: int
    elapsed: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


_PLANS: dict[tuple[tuple[str, ...], tuple[str, ...]], Plan] = {}
_FOLDERS: list[Path] = []


def _remove_folders() -> None:
    for folder in _FOLDERS:
        shutil.rmtree(folder, ignore_errors=True)


atexit.register(_remove_folders)


def planned(*configfiles: str | Path, targets: tuple[str, ...] = ()) -> Plan:
    """``snakemake -n -p --cores 1 [--configfile FILES] [-- TARGETS]`` of the checkout's Snakefile, run once per
    session for each distinct argument list (no config files: the embedded default)."""
    key = (tuple(str(REPO / f) for f in configfiles), tuple(targets))
    if key not in _PLANS:
        folder = Path(tempfile.mkdtemp(prefix="hnclip-dry-run-"))
        _FOLDERS.append(folder)
        args = [*SNAKEMAKE, "--directory", str(folder), "-n", "-p", "--cores", "1"]
        if key[0]:
            args += ["--configfile", *key[0]]
        if targets:
            args += ["--", *targets]
        start = time.perf_counter()
        proc = subprocess.run(args, capture_output=True, text=True, timeout=600)
        _PLANS[key] = Plan(proc.stdout, proc.stderr, proc.returncode, time.perf_counter() - start)
    return _PLANS[key]
