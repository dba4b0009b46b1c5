"""``hnclip plan``: the verb run before submitting (no rule calls it): jobs and GPU-hours of a config."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import add_verb


def add_plan(sub) -> None:
    p = add_verb(sub, "plan", cmd_plan, "list the jobs and estimated GPU-hours of a config before submitting")
    p.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                   help="config file(s); several layer in order, as with snakemake --configfile")
    p.add_argument("--profile", default=None,
                   help="profile folder whose train resources are shown (e.g. profiles/slurm, the cluster profile)")
    p.add_argument("--samples-per-s", type=float, default=None,
                   help="training samples/s per GPU (default: measured runs, else the Long-CLIP-L estimate)")
    p.add_argument("--results", default="results", help="results folder of earlier runs and prepared manifests")
    p.add_argument("--job-cost", default=None,
                   help="measured memory and time per job (default benchmarks/job_cost.json, if present)")


def cmd_plan(args) -> None:
    from hnclip.plan_cli import print_plan

    configfiles = [Path(p) for p in args.configfile]
    print_plan(configfiles[0] if len(configfiles) == 1 else configfiles, profile=args.profile,
               samples_per_s=args.samples_per_s, results_dir=Path(args.results), job_cost=args.job_cost)
