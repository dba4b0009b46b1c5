"""Two results folders of the same DAG, one trained with the old gradient probe on every run and one with
today's probe where the report reads it: are the premise figures unchanged within run-to-run noise, and
by how much did the training jobs' CPU time fall?

Issue 24's test of the cheaper probe: "the premise figures of the embedded default stay within their
run-to-run noise (compare before and after on the same commit)" and "the embedded default's training
job-minutes fall by at least the measured probe share". The *before* folder comes from the same commit
with the old probe swapped in and ``train.probe_runs: all`` (how, in benchmarks/README.md); the *after*
folder from the commit as it is. Run-to-run noise is the spread of each figure over the seeds of the
*after* folder: each seed's runs give the figure on their own (``premise_figures`` on that seed's runs),
and a before/after difference counts as within noise when it is no larger than that range (max - min),
or, for a figure only one seed measures (the HN-only run), when it is float rounding: a relative
difference of at most :data:`ROUNDING` (the new probe sums float32 chunks where the old one summed
float64 copies).

CPU time per training job is Snakemake's ``benchmark:`` file of the train rule
(``results/benchmarks/train/**.tsv``, column ``cpu_time``): unlike wall seconds it is the job's own work,
not what else the machine ran beside it.

    .venv/bin/python benchmarks/probe_before_after.py --before A/results --after B/results --gamma 0.5
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
ROUNDING = 1e-6  # relative: float32 partial sums reduced in float64 against whole float64 sums
sys.path.insert(0, str(REPO / "src"))

from hnclip.analysis.premise import PREMISE_KEYS, classify_runs, premise_figures  # noqa: E402


def run_folders(results: Path) -> list[Path]:
    return sorted(p.parent for p in (results / "runs").rglob("summary.json"))


def seed_of(run: dict) -> int:
    return int(run["summary"]["config"]["seed"])


def figures_by_seed(roles: dict[str, list[dict]]) -> dict[int, dict]:
    """Each seed's premise figures from that seed's runs alone."""
    seeds = sorted({seed_of(r) for runs in roles.values() for r in runs})
    return {s: premise_figures({role: [r for r in runs if seed_of(r) == s] for role, runs in roles.items()})
            for s in seeds}


def train_cpu(results: Path) -> dict[str, float]:
    """CPU seconds of each training job, keyed by its benchmark file's path under train/."""
    root = results / "benchmarks" / "train"
    return {str(p.relative_to(root)): float(pd.read_csv(p, sep="\t")["cpu_time"].iloc[0])
            for p in sorted(root.rglob("*.tsv"))}


def probed(results: Path) -> set[str]:
    """Benchmark keys of the runs that logged probe columns (grad_ratio has a value)."""
    keys = set()
    for run in run_folders(results):
        frame = pd.read_csv(run / "dynamics.csv")
        if "grad_ratio" in frame and pd.to_numeric(frame["grad_ratio"], errors="coerce").notna().any():
            rel = run.relative_to(results / "runs")
            keys.add(str(rel) + ".tsv")
    return keys


def _fmt(x) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "-"
    return f"{x:.4g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="results/ of the old probe, every run probing")
    parser.add_argument("--after", type=Path, required=True, help="results/ of today's probe")
    parser.add_argument("--gamma", type=float, required=True, help="the config's gamma (the HN-only runs' role)")
    args = parser.parse_args()

    roles = {side: classify_runs(run_folders(path), args.gamma) for side, path in
             (("before", args.before), ("after", args.after))}
    overall = {side: premise_figures(r) for side, r in roles.items()}
    per_seed = figures_by_seed(roles["after"])
    print(f"premise figures over {', '.join(f'{k} {len(v)}' for k, v in roles['after'].items())} runs "
          f"(seeds {sorted(per_seed)}); noise = max - min over the seeds of 'after'")
    print(f"{'figure':34s} {'before':>10s} {'after':>10s} {'|diff|':>10s} {'noise':>10s}  within")
    within_all = True
    for key in PREMISE_KEYS:
        before, after = overall["before"][key], overall["after"][key]
        seeds = [f[key] for f in per_seed.values() if f[key] is not None and math.isfinite(f[key])]
        noise = max(seeds) - min(seeds) if len(seeds) > 1 else None
        if before is None or after is None:
            diff, within = None, before is None and after is None
        else:
            diff = abs(before - after)
            within = diff <= (noise or 0.0) or diff <= ROUNDING * max(abs(before), abs(after), 1e-30)
        within_all &= within
        print(f"{key:34s} {_fmt(before):>10s} {_fmt(after):>10s} {_fmt(diff):>10s} {_fmt(noise):>10s}  "
              f"{'yes' if within else 'NO'}")
    print(f"every figure within noise: {'yes' if within_all else 'no'}")

    cpu = {side: train_cpu(path) for side, path in (("before", args.before), ("after", args.after))}
    common = sorted(set(cpu["before"]) & set(cpu["after"]))
    if not common:
        sys.exit("no training job is in both folders' results/benchmarks/train/")
    reading = probed(args.after)
    groups = defaultdict(lambda: [0.0, 0.0, 0])
    for key in common:
        group = "probing (read)" if key in reading else "not probing"
        for g in (group, "all"):
            groups[g][0] += cpu["before"][key]
            groups[g][1] += cpu["after"][key]
            groups[g][2] += 1
    print("\ntraining jobs, CPU minutes (Snakemake benchmark cpu_time)")
    print(f"{'runs':16s} {'n':>3s} {'before':>8s} {'after':>8s} {'after/before':>13s}")
    for g in ("probing (read)", "not probing", "all"):
        b, a, n = groups[g]
        if n:
            print(f"{g:16s} {n:3d} {b / 60:8.2f} {a / 60:8.2f} {a / b:13.3f}")
    unread_share = (groups["not probing"][0] - groups["not probing"][1]) / groups["all"][0]
    fall = 1 - groups["all"][1] / groups["all"][0]
    print(f"training CPU fell by {100 * fall:.1f} %; the probe's share of the before-grid spent in runs the report "
          f"does not read (what they shed): {100 * unread_share:.1f} %")
    print(json.dumps({"within_noise": within_all, "cpu_after_over_before": 1 - fall, "fall": fall,
                      "unread_probe_share": unread_share}))


if __name__ == "__main__":
    main()
