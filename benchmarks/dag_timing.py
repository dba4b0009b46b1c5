"""Time the workflow itself: the paper grid's dry run, and (``--full``) the embedded default end to end.

Issue targets: the paper config's DAG (all experiments, all seeds) dry-runs in 10 s or less; the
embedded default runs end to end in 12 minutes or less on a quiet 2-core machine after set-up (issue 43,
from the released backbone). Everything runs in a fresh copy of the repository's tracked files, so neither
earlier results nor the checkout's .snakemake/ can shorten or disturb it, and nothing is written to the
checkout. The load average is printed before and after: a busy machine's minutes are not a quiet one's.

    .venv/bin/python benchmarks/dag_timing.py            # dry runs only (seconds)
    .venv/bin/python benchmarks/dag_timing.py --full     # + the embedded default end to end (minutes)
    .venv/bin/python benchmarks/dag_timing.py --log .snakemake/log/FILE.snakemake.log   # where a run's time went
    .venv/bin/python benchmarks/dag_timing.py --quick    # profiles a made-up three-job log: a smoke run

Where the time goes (``--log``, and after ``--full``): from the Snakemake log's start and finish stamps, each
rule's jobs and wall-minutes, and the critical path, the longest chain of jobs linked by their files, which
no number of cores shortens (stamps have one-second resolution).
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
from dataclasses import dataclass, field
from datetime import datetime
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
    parser.add_argument("--log", type=Path, help="only profile this Snakemake log (no runs)")
    parser.add_argument("--quick", action="store_true",
                        help="only profile a made-up log of three jobs (no runs, no copy): a smoke run")
    args = parser.parse_args()
    if args.quick:
        with tempfile.TemporaryDirectory(prefix="hnclip-dag-timing-") as tmp:
            log = Path(tmp) / "quick.snakemake.log"
            log.write_text(QUICK_LOG)
            print_profile(log)
        return
    if args.log:
        print_profile(args.log)
        return

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
          f"(target <= 12 min), report {'present' if report.is_file() else 'MISSING'}; load average {_load()}")
    for stage in sorted((work / "results/benchmarks/backbone").glob("*.tsv")):
        print(f"  backbone {stage.stem:14s}: {_seconds(stage) / 60:5.1f} min")
    for name in ("train", "evaluate"):
        seconds = [_seconds(p) for p in (work / "results/benchmarks" / name).rglob("*.tsv")]
        if seconds:
            print(f"  {name:23s}: {len(seconds):3d} jobs, {sum(seconds) / 60:5.1f} job-min, "
                  f"mean {sum(seconds) / len(seconds):5.1f} s")
    logs = sorted((work / ".snakemake/log").glob("*.snakemake.log"))
    if logs:
        print_profile(logs[-1])


# a Snakemake log of three jobs, a -> b -> c (what --quick profiles)
QUICK_LOG = """[Sun Dec  6 04:00:00 2026]
rule a:
    output: results/a.txt
    jobid: 1

[Sun Dec  6 04:00:05 2026]
Finished jobid: 1 (Rule: a)
[Sun Dec  6 04:00:05 2026]
rule b:
    input: results/a.txt
    output: results/b
    jobid: 2

[Sun Dec  6 04:00:12 2026]
Finished jobid: 2 (Rule: b)
[Sun Dec  6 04:00:12 2026]
localrule c:
    input: results/b/file.txt
    output: results/c.txt
    jobid: 3

[Sun Dec  6 04:00:13 2026]
Finished jobid: 3 (Rule: c)
"""


@dataclass(eq=False)
class Job:
    rule: str
    start: datetime
    end: datetime | None = None
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds() if self.end else 0.0


_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")


def parse_log(path: Path) -> list[Job]:
    """The finished jobs of one Snakemake log: rule, start and finish stamps, input and output files."""
    jobs: dict[str, Job] = {}
    stamp, current = None, None
    for line in path.read_text().splitlines():
        if m := _STAMP.match(line.strip()):
            stamp, current = datetime.strptime(m.group(1), "%a %b %d %H:%M:%S %Y"), None
        elif m := re.match(r"^(?:local)?rule (\w+):$", line) or re.match(r"^(?:local)?checkpoint (\w+):$", line):
            current = Job(m.group(1), stamp)
        elif current is not None and (m := re.match(r"^    (input|output): (.*)$", line)):
            getattr(current, m.group(1) + "s").extend(f.strip() for f in m.group(2).split(", "))
        elif current is not None and (m := re.match(r"^    jobid: (\d+)$", line)):
            jobs[m.group(1)] = current
        elif m := re.match(r"^Finished jobid: (\d+)", line):
            if m.group(1) in jobs:
                jobs[m.group(1)].end = stamp
    return [j for j in jobs.values() if j.end is not None]


def critical_path(jobs: list[Job]) -> list[Job]:
    """The longest chain of jobs, each consuming a file (or a file inside a folder) the one before made."""
    producer = {out: job for job in jobs for out in job.outputs}

    def made_by(path: str) -> Job | None:
        while path and path not in producer:
            path = path.rpartition("/")[0]
        return producer.get(path)

    longest: dict[int, tuple[float, list[Job]]] = {}
    for job in sorted(jobs, key=lambda j: j.end):  # a job's producers finished before it started
        chains = [longest[id(p)] for p in {made_by(f) for f in job.inputs} - {None} if id(p) in longest]
        best = max(chains, key=lambda c: c[0], default=(0.0, []))
        longest[id(job)] = (best[0] + job.seconds, [*best[1], job])
    return max(longest.values(), key=lambda c: c[0], default=(0.0, []))[1]


def print_profile(log: Path) -> None:
    jobs = parse_log(log)
    if not jobs:
        print(f"{log}: no finished jobs")
        return
    wall = (max(j.end for j in jobs) - min(j.start for j in jobs)).total_seconds()
    print(f"{log.name}: {len(jobs)} finished jobs, {wall / 60:.1f} min from the first start to the last finish")
    rules: dict[str, list[float]] = {}
    for job in jobs:
        rules.setdefault(job.rule, []).append(job.seconds)
    print(f"  {'rule':26s} {'jobs':>4s} {'wall-min':>8s} {'max s':>6s}")
    for rule, seconds in sorted(rules.items(), key=lambda kv: -sum(kv[1])):
        print(f"  {rule:26s} {len(seconds):4d} {sum(seconds) / 60:8.1f} {max(seconds):6.0f}")
    path = critical_path(jobs)
    print(f"  critical path: {sum(j.seconds for j in path) / 60:.1f} min over {len(path)} jobs: "
          + " -> ".join(f"{j.rule} {j.seconds:.0f}s" for j in path))


def _seconds(benchmark_tsv: Path) -> float:
    """Wall seconds of one job from its Snakemake benchmark file (first column of the data row)."""
    return float(benchmark_tsv.read_text().splitlines()[1].split()[0])


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


if __name__ == "__main__":
    main()
