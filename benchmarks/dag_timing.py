"""Time the workflow itself: the paper grid's dry run, and (``--full``) the embedded default end to end.

Issue targets: the paper config's DAG (all experiments, all seeds) dry-runs in 10 s or less; the
embedded default runs end to end in 15 minutes or less on a quiet 2-core machine after set-up,
pretraining included. Everything runs in a fresh copy of the repository's tracked files, so neither
earlier results nor the checkout's .snakemake/ can shorten or disturb it, and nothing is written to the
checkout. The load average is printed before and after: a busy machine's minutes are not a quiet one's.

    .venv/bin/python benchmarks/dag_timing.py            # dry runs only (seconds)
    .venv/bin/python benchmarks/dag_timing.py --full     # + the embedded default end to end (minutes)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def snakemake(args: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=cwd, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return elapsed, proc.stdout + proc.stderr


def job_total(output: str) -> int:
    m = re.search(r"^total\s+(\d+)$", output, re.M)
    return int(m.group(1)) if m else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="also run the embedded default end to end")
    parser.add_argument("--cores", default="2")
    args = parser.parse_args()

    # a fresh copy of the tracked files (with --full kept afterwards, printed, so a slow run can be inspected)
    work = Path(tempfile.mkdtemp(prefix="hnclip-default-"))
    print(f"working copy: {work}; load average {_load()}", flush=True)
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for rel in files:
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, work / rel)
    for label, extra in (("paper grid", ["--configfile", "config/paper.yaml"]), ("embedded default", [])):
        elapsed, out = snakemake(["-n", "--cores", "2", "--quiet", "rules", *extra], work)
        print(f"dry run, {label:16s}: {job_total(out):4d} jobs in {elapsed:5.1f} s (target <= 10 s)")

    if not args.full:
        shutil.rmtree(work)
        return
    # the embedded default end to end; the copy is kept for inspection
    elapsed, out = snakemake(["--cores", args.cores], work)
    report = work / "results" / "report.html"
    print(f"embedded default end to end: {job_total(out)} jobs in {elapsed / 60:.1f} min on {args.cores} cores "
          f"(target <= 15 min), report {'present' if report.is_file() else 'MISSING'}; load average {_load()}")
    for stage in sorted((work / "results/benchmarks/backbone").glob("*.tsv")):
        print(f"  backbone {stage.stem:14s}: {_seconds(stage) / 60:5.1f} min")
    for name in ("train", "evaluate"):
        seconds = [_seconds(p) for p in (work / "results/benchmarks" / name).rglob("*.tsv")]
        if seconds:
            print(f"  {name:23s}: {len(seconds):3d} jobs, {sum(seconds) / 60:5.1f} job-min, "
                  f"mean {sum(seconds) / len(seconds):5.1f} s")


def _seconds(benchmark_tsv: Path) -> float:
    """Wall seconds of one job from its Snakemake benchmark file (first column of the data row)."""
    return float(benchmark_tsv.read_text().splitlines()[1].split()[0])


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
