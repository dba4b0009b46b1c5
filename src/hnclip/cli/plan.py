"""``hnclip plan``: the verb run before submitting (no rule calls it): what a config will submit, and what it
will cost, printed from :mod:`hnclip.cost` (jobs, samples, GPU-hours) and :mod:`hnclip.job_needs` (what each
kind of job needs against its limits, and the probe's share).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from hnclip import paths
from hnclip.cli.common import add_verb

if TYPE_CHECKING:  # the parser must not import them (hnclip.cost imports pandas through hnclip.data)
    from hnclip.cost import ExperimentCost, Throughput
    from hnclip.job_needs import DiagnosticsCost, JobNeed


def add_plan(sub) -> None:
    p = add_verb(sub, "plan", cmd_plan, "list the jobs and estimated GPU-hours of a config before submitting")
    p.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                   help="config file(s); several layer in order, as with snakemake --configfile")
    p.add_argument("--profile", default=None,
                   help="profile folder whose train resources are shown (e.g. profiles/slurm, the cluster profile)")
    p.add_argument("--samples-per-s", type=float, default=None,
                   help="training samples/s per GPU (default: measured runs of the config's backbone, else the "
                        "Long-CLIP-L estimate for Long-CLIP-L, else none)")
    p.add_argument("--results", default=paths.RESULTS, help="results folder of earlier runs and prepared manifests")
    p.add_argument("--job-cost", default=None,
                   help="measured memory and time per job (default: the measurements shipped with hnclip, hnclip/job_cost.json); used "
                        "when it measured the config's backbone, else the backbone's earlier runs are")


def cmd_plan(args) -> None:
    configfiles = [Path(p) for p in args.configfile]
    print_plan(configfiles[0] if len(configfiles) == 1 else configfiles, profile=args.profile,
               samples_per_s=args.samples_per_s, results_dir=Path(args.results), job_cost=args.job_cost)


def print_plan(configfile, profile=None, samples_per_s: float | None = None, results_dir=paths.RESULTS,
               file=None, job_cost=None) -> list[ExperimentCost]:
    """Print the plan of ``configfile`` (one path, or several layered in order) with ``profile``'s train
    resources, if given, and what each job needs against its limits: from the measured job costs
    (``job_cost``, default hnclip/job_cost.json, package data) when they measured the config's backbone, else from
    the backbone's earlier runs in ``results_dir``, else a line saying there is no measurement (``job_cost``
    False: leave all of it out); return its rows."""
    from hnclip import plan
    from hnclip.checkpoint_formats import backbone_origin
    from hnclip.config.loading import job_resources, profile_train_resources
    from hnclip.config_checks import config_warnings
    from hnclip.cost import build_plan, planned_backbone, resolve_throughput, train_set_sizes
    from hnclip.job_needs import (
        diagnostics_cost,
        job_cost_fits,
        job_cost_path,
        job_needs,
        load_job_cost,
        run_needs,
        speed_against_reference,
    )
    from hnclip.workflow_config import load_config

    config = load_config(configfile)
    runs = plan.all_runs(config)
    train_sets = {r.train_set for r in runs}
    if backbone_origin(config).trained_in_dag:
        train_sets.add(config["pretrain"]["benchmark"])
    sizes = train_set_sizes(config, train_sets, results_dir)
    train_limits = job_resources(config, "train", profile)
    device_type = "cuda" if int(train_limits.get("gpu", 0) or 0) >= 1 else "cpu"
    throughput = resolve_throughput(config, results_dir, samples_per_s, device_type)
    resources = profile_train_resources(profile) if profile else None
    gpus = int((resources or {}).get("gpu", 1) or 1)
    rows = build_plan(config, throughput, sizes, gpus_per_job=gpus)
    label = configfile if isinstance(configfile, str | Path) else " + ".join(map(str, configfile))
    text = format_plan(rows, throughput, sizes, label, resources, profile)
    cost_path = None if job_cost is False else job_cost_path(job_cost)
    if job_cost is not False and job_cost is not None and not (cost_path and cost_path.is_file()):
        raise FileNotFoundError(f"hnclip plan: job costs {job_cost} do not exist")
    cost = load_job_cost(cost_path) if job_cost is not False and cost_path is not None and cost_path.is_file() else None
    backbone = planned_backbone(config, results_dir)
    if job_cost is False:
        pass
    elif cost is not None and job_cost_fits(config, cost, results_dir):
        needs = job_needs(config, cost, throughput, sizes, train_limits, job_resources(config, "evaluate", profile))
        text += "\n" + format_job_needs(needs, cost, cost_path, config["train"]["micro_batch"])
        text += format_speed(speed_against_reference(needs, config, sizes, throughput))
        text += "\n" + format_diagnostics(diagnostics_cost(config, cost, throughput, sizes, gpus), config,
                                          max(1, config["train"]["micro_batch"] // gpus))
    else:  # the file measured another model (or there is none): this backbone's own runs, or nothing
        other = (f"{cost_path} measures {cost.get('model', 'ViT-L-14-longclip')!r}, not this config's backbone "
                 f"{backbone!r}" if cost is not None else "no hnclip/job_cost.json")
        needs = run_needs(config, results_dir, sizes, train_limits)
        if needs:
            text += "\n" + format_run_needs(needs, backbone, paths.in_results(results_dir, paths.RUNS_DIR), other)
        else:
            text += (f"\nper-job needs: none measured for backbone {backbone!r} ({other}; no run of it in "
                     f"{Path(results_dir) / 'runs'}): train one run and plan again, or measure it with "
                     f"python benchmarks/job_cost.py --model {backbone} --out FILE and pass --job-cost FILE")
    text += "".join(f"\nwarning: {line}" for line in config_warnings(config))  # what snakemake -n logs too
    print(text, file=file or sys.stdout)
    return rows


def format_plan(rows: list[ExperimentCost], throughput: Throughput, sizes: dict[str, tuple[int, str]],
                configfile, resources: dict | None = None, profile=None) -> str:
    header = ("experiment", "train jobs", "new", "eval jobs", "new", "train samples", "GPU-h")
    table = [header]
    for r in rows:
        table.append((r.name, str(r.train_jobs), str(r.new_train_jobs), str(r.eval_jobs), str(r.new_eval_jobs),
                      f"{r.samples:,}", _hours(r.gpu_hours)))
    total_train = sum(r.new_train_jobs for r in rows)
    total_eval = sum(r.new_eval_jobs for r in rows)
    total_samples = sum(r.samples for r in rows)
    total_hours = sum(r.gpu_hours for r in rows)
    table.append(("total (each job once)", str(total_train), "", str(total_eval), "", f"{total_samples:,}",
                  _hours(total_hours)))
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]

    def line(row):
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))

    rule = "-" * len(line(header))
    out = [f"hnclip plan for {configfile}", "", line(header), rule, *(line(r) for r in table[1:-1]), rule,
           line(table[-1]), ""]
    seconds = f" ({total_hours * 3600:,.0f} GPU-seconds)" if total_hours == total_hours else " (no throughput)"
    out.append(f"total: {total_train} training jobs, {total_eval} evaluation jobs, {_hours(total_hours)} "
               f"GPU-hours{seconds} of training; evaluation and data preparation not included")
    if throughput.samples_per_s == throughput.samples_per_s:
        out.append(f"throughput: {throughput.samples_per_s:g} samples/s per GPU, {throughput.source}")
    else:
        out.append(f"throughput: {throughput.source}")
    out.append("training set sizes:")
    out += [f"  {name}: {n:,} ({source})" for name, (n, source) in sizes.items()]
    if resources is not None:
        gpus, runtime = int(resources.get("gpu", 1) or 1), resources.get("runtime")
        longest = max((r.longest_run_hours for r in rows), default=0.0)
        out.append(f"profile {profile}: train jobs on partition {resources.get('slurm_partition', '(default)')} "
                   f"with {gpus} GPU(s), runtime limit {runtime} min; longest run ~{_hours(longest)} h wall")
        if runtime is not None and longest * 60 > float(runtime):
            out.append(f"  warning: the longest run needs ~{longest * 60:,.0f} min, more than the {runtime} min "
                       f"limit; it will be cut and resumed from its checkpoint on retry")
    return "\n".join(out)


def format_job_needs(needs: list[JobNeed], job_cost: dict, path, micro_batch: int) -> str:
    m = job_cost["machine"]
    load = job_cost.get("load_average_before", [None])[0], job_cost.get("load_average_after", [None])[0]
    out = ["", f"per-job needs, measured by benchmarks/job_cost.py ({path}) on {job_cost['date'][:10]}: "
               f"{m.get('device', 'cpu')} ({m.get('gpu') or m.get('processor', '?')}, {m.get('cpus', '?')} CPUs, "
               f"{m.get('threads', '?')} thread(s), {job_cost.get('precision', 'fp32')}), load average "
               f"{load[0]} -> {load[1]}" + ("; times are inflated by other processes" if (load[0] or 0) > (m.get("cpus") or 1)
                                            else "")]
    header = ("job", "memory MB", "s/sample", "vs HN-CLIP", "longest job h", "limits (mem_mb, runtime min)", "methods")
    rows = [header]
    for n in needs:
        rows.append((n.job, f"{n.memory_mb:,.0f}" if n.memory_mb == n.memory_mb else "-",
                     f"{n.seconds_per_sample:.3g}" if n.seconds_per_sample == n.seconds_per_sample else "-",
                     f"{n.ratio:.2f}x" if n.ratio == n.ratio else "-",
                     _hours(n.longest_hours) if n.longest_hours == n.longest_hours else "-",
                     f"{n.limits.get('mem_mb', '-')}, {n.limits.get('runtime', '-')}", ", ".join(n.methods)))
    out += _table_lines(rows)
    out.append(f"memory: peak at micro-batch {micro_batch} per process ("
               f"{'device memory' if m.get('device') == 'cuda' else 'resident set of a CPU job'}; "
               f"{next((n.memory_how for n in needs if n.memory_how != 'not measured'), '')}); time: forward + backward on the measuring device, the "
               "longest job scaled from the plan's throughput by each framework's measured cost")
    out += [w for n in needs for w in n.warnings]
    return "\n".join(out)


def format_speed(rows: list[dict]) -> str:
    """The paper's cost claim (HN-CLIP trains 2.4x faster than GOAL, 5.4x than StructXLIP) at this config,
    each ratio beside the paper's number (report/published_numbers.yaml); empty when neither is trained."""
    if not rows:
        return ""
    from hnclip.analysis.published import load_published
    from hnclip.report import DEFAULT_PUBLISHED

    paper = {e["key"]: e.get("value") for e in load_published(DEFAULT_PUBLISHED)}
    out = ["", "the paper's cost claim (abstract; D.1): training time per sample against HN-CLIP's, from the job "
               "costs (plain steps: no gradient probe, no evaluation after each epoch)"]
    for r in rows:
        hours = ", ".join(f"{t} {_hours(h)} h" for t, h in r["hours"].items())
        ratio = f"{r['ratio']:.2f}x" if r["ratio"] == r["ratio"] else "-"
        out.append(f"  {r['framework']}: {ratio} HN-CLIP's time (paper: {paper.get(r['published'])}x); one full-data "
                   f"run {hours or '-'}; with preprocessing: {' and '.join(r['products']) or 'none'} of each train "
                   "set first, untimed here (benchmarks/job_cost.py does not run SAM; the cost table of a run "
                   "times it from the jobs' Snakemake benchmark files)")
    return "\n".join(out)


def format_run_needs(needs: list[JobNeed], backbone: str, runs_dir, other: str) -> str:
    """The per-job needs read off the backbone's own earlier runs (:func:`hnclip.job_needs.run_needs`)."""
    out = ["", f"per-job needs of backbone {backbone!r}, measured by its earlier runs in {runs_dir} "
               f"(summary.json: peak memory, samples/s over the run; {other})"]
    header = ("job", "memory MB", "samples/s", "s/sample", "vs HN-CLIP", "longest job h", "limits (mem_mb, runtime min)",
              "methods")
    rows = [header]
    for n in needs:
        measured = n.seconds_per_sample == n.seconds_per_sample
        rows.append((n.job, f"{n.memory_mb:,.0f}" if n.memory_mb == n.memory_mb else "-",
                     f"{1 / n.seconds_per_sample:,.1f}" if measured else "-",
                     f"{n.seconds_per_sample:.3g}" if measured else "-",
                     f"{n.ratio:.2f}x" if n.ratio == n.ratio else "-",
                     _hours(n.longest_hours) if n.longest_hours == n.longest_hours else "-",
                     f"{n.limits.get('mem_mb', '-')}, {n.limits.get('runtime', '-')}", ", ".join(n.methods)))
    out += _table_lines(rows)
    out.append("memory: " + "; ".join(f"{n.job}: {n.memory_how}" for n in needs if n.memory_how != "not measured"))
    out += [w for n in needs for w in n.warnings]
    return "\n".join(out)


def format_diagnostics(rows: list[DiagnosticsCost], config: dict, micro_batch: int) -> str:
    train = config["train"]
    every, probe_runs = train["dynamics_every"], train.get("probe_runs", "read")
    probed, total = sum(r.probed for r in rows), sum(r.runs for r in rows)
    out = ["", f"diagnostics: the gradient-dynamics probe on every {every}th optimizer step of {probed} of {total} "
               f"runs (train.probe_runs: {probe_runs}" + ("; the runs whose probe columns the report reads"
                                                           if probe_runs == "read" else "") + ")"]
    if not every:
        out[-1] = "diagnostics: none (train.dynamics_every is 0: no run probes)"
        return "\n".join(out)
    header = ("training job", "probing runs", "probed step", "of a probing job", "of the kind's GPU-h",
              "all runs probing")
    table = [header]
    for r in rows:
        measured = r.step_s == r.step_s
        table.append((r.job.removeprefix("train "), f"{r.probed} of {r.runs}",
                       f"+{r.probe_s / r.step_s:.0%}" if measured else "-",
                       f"{r.job_share:.1%}" if measured else "-",
                       f"{r.probe_hours / r.hours:.1%}" if measured and r.hours else "-",
                       f"{r.probe_hours_all / r.hours:.1%}" if measured and r.hours else "-"))
    widths = [max(len(t[i]) for t in table) for i in range(len(header))]
    out += ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(t, widths, strict=True)))
            for t in table]
    measured = [r for r in rows if r.step_s == r.step_s]
    hours = sum(r.hours for r in measured)
    probe_hours, probe_hours_all = sum(r.probe_hours for r in measured), sum(r.probe_hours_all for r in measured)
    if hours:
        out.append(f"the grid: {_hours(probe_hours)} of {_hours(hours)} training GPU-hours probing "
                   f"({probe_hours / hours:.1%}); with every run probing (train.probe_runs: all) "
                   f"{_hours(probe_hours_all)} ({probe_hours_all / hours:.1%})"
                   + ("" if len(measured) == len(rows) else f"; {len(rows) - len(measured)} kind(s) not measured"))
    out.append(f"probe cost: what a probed micro-batch adds, relative to its forward + backward, measured in one "
               f"process each ({', '.join(r.how for r in measured) or 'not measured'}), on the plain step's cost at "
               f"micro-batch {micro_batch}; the per-epoch evaluation is not counted")
    earlier = [r.job.removeprefix("train ") for r in measured if r.earlier_probe]
    if earlier:
        out.append(f"  {', '.join(earlier)}: measured with the probe before it read the step's .grad (two passes where the "
                   "objectives differ, fp32 copies of both gradients): an upper bound; re-measure with "
                   f"benchmarks/job_cost.py --probe-only --frameworks {','.join(earlier)}")
    return "\n".join(out)


def _table_lines(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as aligned text: the first column left, the others right, the last one (a list) as it is."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=False)))
            + "  " + r[-1] for r in rows]


def _hours(x: float) -> str:
    if x != x:  # no throughput to price it with
        return "?"
    return f"{x:,.1f}" if x >= 10 else f"{x:.3g}"
