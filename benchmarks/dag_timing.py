"""Time the workflow itself: the paper grid's dry run, and (``--full``) the embedded default end to end.

Issue targets: the paper config's DAG (all experiments, all seeds) dry-runs in 10 s or less; the
embedded default runs end to end in 15 minutes or less on a 2-core machine after set-up. The full run
works in a fresh copy of the repository's tracked files, so earlier results cannot shorten it.

    .venv/bin/python benchmarks/dag_timing.py            # dry runs only (seconds)
    .venv/bin/python benchmarks/dag_timing.py --full     # + the embedded default end to end (minutes)
"""

from __future__ import annotations

import argparse
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

    for label, extra in (("paper grid", ["--configfile", "config/paper.yaml"]), ("embedded default", [])):
        elapsed, out = snakemake(["-n", "--cores", "2", "--quiet", "rules", *extra], REPO)
        print(f"dry run, {label:16s}: {job_total(out):4d} jobs in {elapsed:5.1f} s (target <= 10 s)")

    if args.full:
        # kept afterwards (printed) so a failed or slow run can be inspected
        work = Path(tempfile.mkdtemp(prefix="hnclip-default-"))
        print(f"working copy: {work}", flush=True)
        files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.split()
        for rel in files:
            (work / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, work / rel)
        elapsed, out = snakemake(["--cores", args.cores], work)
        report = work / "results" / "report.html"
        print(f"embedded default end to end: {elapsed / 60:.1f} min on {args.cores} cores "
              f"(target <= 15 min), report {'present' if report.is_file() else 'MISSING'}")
        for name, rule in (("pretrain", "backbone"), ("train", "train"), ("evaluate", "evaluate")):
            seconds = [float(p.read_text().splitlines()[1].split()[0])
                       for p in (work / "results/benchmarks" / rule).rglob("*.tsv")
                       if name != "pretrain" or p.stem == "pretrain"]
            if seconds:
                print(f"  {name:9s}: {len(seconds):3d} jobs, {sum(seconds) / 60:5.1f} job-min, "
                      f"mean {sum(seconds) / len(seconds):5.1f} s")

if __name__ == "__main__":
    main()
