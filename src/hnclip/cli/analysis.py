"""Verbs of ``workflow/rules/analysis.smk``: the experiments' tables and figures, caption geometry, the
premise measurements, the regime conditions and the retrieval gallery."""

from __future__ import annotations

from pathlib import Path

from hnclip import paths
from hnclip.cli.common import SPEC_HELP, add_verb, caption, run_folders, set_threads, verify_stores
from hnclip.scales import SCALES, scale_runs


def add_geometry(sub) -> None:
    p = add_verb(sub, "geometry", cmd_geometry, "caption geometry of a benchmark under a model's text encoder")
    p.add_argument("--model", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--benchmark", required=True)
    p.add_argument("--batch-size", type=int, required=True, help="captions per batch (geometry.batch_size)")
    p.add_argument("--loss-batch-size", type=int, default=None,
                   help="the batch the loss and G span (train.micro_batch), measured first; the default: --batch-size")
    p.add_argument("--n-batches", type=int, required=True, help="random batches (geometry.n_batches)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-figure", required=True)


def cmd_geometry(args) -> None:
    from hnclip.analysis.geometry_job import run_geometry

    set_threads(args.threads)
    run_geometry(model_dir=Path(args.model), manifest=Path(args.manifest), benchmark=args.benchmark,
                 batch_size=args.batch_size, n_batches=args.n_batches, seed=args.seed,
                 loss_batch_size=args.loss_batch_size,
                 out_json=Path(args.out_json), out_figure=Path(args.out_figure))


def add_table(sub) -> None:
    p = add_verb(sub, "table", cmd_table, "one experiment's retrieval table")
    p.add_argument("--spec", type=Path, required=True, help=SPEC_HELP)
    p.add_argument("--out-prefix", required=True)


def cmd_table(args) -> None:
    from hnclip.analysis.records import load_records, load_run_summaries, load_spec
    from hnclip.analysis.tables import build_table, write_table

    spec = load_spec(args.spec)
    records, summaries = load_records(spec), load_run_summaries(spec)
    table = build_table(spec, records, summaries=summaries)
    write_table(table, args.out_prefix, caption=caption(spec, records, summaries))


def add_table_epochs(sub) -> None:
    p = add_verb(sub, "table-epochs", cmd_table_epochs, "retrieval per epoch of the main runs")
    p.add_argument("--spec", type=Path, required=True, help=SPEC_HELP)
    p.add_argument("--out-prefix", required=True)


def cmd_table_epochs(args) -> None:
    from hnclip.analysis.records import load_run_summaries, load_spec
    from hnclip.analysis.tables import build_epochs_table, write_table

    spec = load_spec(args.spec)
    table = build_epochs_table(spec, summaries=load_run_summaries(spec))
    write_table(table, args.out_prefix, caption="R@1 per epoch: " + caption(spec))


def add_table_cost(sub) -> None:
    p = add_verb(sub, "table-cost", cmd_table_cost, "training cost per run")
    p.add_argument("--summaries", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="*", default=[])
    p.add_argument("--scale", choices=SCALES, required=True)
    p.add_argument("--gamma", type=float, required=True,
                   help="gamma of the reference (HN-CLIP) runs the time ratio divides by (config gamma)")
    p.add_argument("--preprocess", nargs="*", default=[],
                   help="Snakemake benchmark TSVs of the preprocessing jobs (.../segments/<benchmark>.tsv, "
                        ".../edges/<benchmark>.tsv) the GOAL and StructXLIP runs need")
    p.add_argument("--out-prefix", required=True)


def cmd_table_cost(args) -> None:
    from hnclip.analysis.tables import build_cost_table, write_table

    table = build_cost_table([Path(p) for p in args.summaries], [Path(p) for p in args.benchmarks], scale=args.scale,
                             reference_gamma=args.gamma, preprocess=[Path(p) for p in args.preprocess])
    write_table(table, args.out_prefix, caption=f"training cost: {scale_runs(args.scale)}")


# the figures drawn from runs' logs, each by its own function; every other name is an experiment whose
# registration row declares a figure drawn from its table (hnclip.experiments, figures.plot_experiment)
LOG_FIGURES = ("dynamics", "epochs", "convergence", "training")


def add_figure(sub) -> None:
    from hnclip.experiments import figured_experiments

    p = add_verb(sub, "figure", cmd_figure, "one figure of the paper: from runs' logs, or an experiment's from its table")
    p.add_argument("name", choices=[*LOG_FIGURES, *figured_experiments()])
    p.add_argument("--spec", type=Path, required=True, help=SPEC_HELP)
    p.add_argument("--out-prefix", required=True)
    p.add_argument("--zeroshot", action="store_true",
                   help="epochs: the zero-shot rows' R@1 as lines (their evaluation records must exist)")


def cmd_figure(args) -> None:
    from hnclip.analysis import figures

    if args.name == "training":  # your own data: loss and learning rate per step
        from hnclip.analysis.own_figures import plot_training

        plot_training(args.spec, args.out_prefix)
        return
    if args.name == "epochs":
        figures.plot_epochs(args.spec, args.out_prefix, zeroshot=args.zeroshot)
        return
    draw = {
        "dynamics": figures.plot_dynamics,
        "convergence": figures.plot_convergence,
    }.get(args.name, figures.plot_experiment)
    draw(args.spec, args.out_prefix)


def add_gallery(sub) -> None:
    p = add_verb(sub, "gallery", cmd_gallery, "qualitative retrieval gallery: where HN-CLIP and the val-chosen competitor disagree")
    p.add_argument("--spec", type=Path, required=True, help="spec file of the main experiment")
    p.add_argument("--captions", type=int, required=True, help="query captions shown (report.gallery_captions)")
    p.add_argument("--pick", choices=["disagreements", "changed"], default="disagreements",
                   help="disagreements: captions where HN-CLIP and the competitor do not both rank the ground truth "
                        "first, with each kind's count; changed: those whose own image's rank changed most between the "
                        "two runs (their evaluation records' ranks; your own data)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out-prefix", required=True)


def cmd_gallery(args) -> None:
    from hnclip.analysis.gallery_job import run_gallery

    set_threads(args.threads)
    run_gallery(args.spec, n_captions=args.captions, out_prefix=args.out_prefix, pick=args.pick)


def add_premise(sub) -> None:
    p = add_verb(sub, "premise", cmd_premise,
                 "the paper's regime figures (saturation, exact zeros, HN gradients) from run logs: written to "
                 f"--out (the workflow's {paths.PREMISE}), or printed beside the paper's from --results, "
                 "--regime and/or --backbone with --data")
    p.add_argument("--runs", nargs="*", default=[], help="run folders or their summary.json files (with --out)")
    p.add_argument("--gamma", type=float, default=None,
                   help="gamma of the HN and HN-CLIP runs to use (config gamma; needed with --out and --results)")
    p.add_argument("--confidence", type=float, default=0.95, help="interval level (statistics.confidence)")
    p.add_argument("--resamples", type=int, default=2000,
                   help="bootstrap resamples of where InfoNCE flattens (statistics.resamples)")
    p.add_argument("--bootstrap-seed", type=int, default=0, help="bootstrap seed (statistics.seed)")
    p.add_argument("--out", default=None, help="JSON to write (hnclip.analysis.premise.premise_report)")
    printed = p.add_argument_group("printed beside the paper's figures (without --out)")
    printed.add_argument("--results", type=Path, default=None, help=f"a finished {paths.RESULTS}/ folder")
    printed.add_argument("--regime", type=Path, nargs="+", default=[],
                         help=f"regime files ({paths.regime_path('<benchmark>')}) to print")
    printed.add_argument("--backbone", type=Path, default=None, help="a model folder to probe (with --data)")
    printed.add_argument("--data", type=Path, default=None,
                         help="prepared benchmark folder: train.csv, test.csv, *_images")
    printed.add_argument("--batches", type=int, default=500, help="random micro-batches of the probe")
    printed.add_argument("--batch", type=int, default=16, help="micro-batch size of the probe (paper: 16)")
    printed.add_argument("--seed", type=int, default=0, help="seed of the probe's micro-batches")


def cmd_premise(args) -> None:
    from hnclip.analysis.premise import premise_report
    from hnclip.fileio import write_json_atomic

    if args.out is None:
        _print_premise(args)
        return
    if args.gamma is None:
        raise SystemExit("hnclip premise: --out needs --gamma (the config's gamma)")
    write_json_atomic(Path(args.out), premise_report(run_folders(args.runs), gamma=args.gamma,
                                                     confidence=args.confidence, resamples=args.resamples,
                                                     seed=args.bootstrap_seed))


def _print_premise(args) -> None:
    from hnclip.analysis import premise_print

    if not args.results and not args.backbone and not args.regime:
        raise SystemExit("hnclip premise: give --out (with --runs), or --results, --regime and/or --backbone with --data")
    if args.backbone and not args.data:
        raise SystemExit("hnclip premise: --backbone needs --data")
    if args.results and args.gamma is None:
        raise SystemExit("hnclip premise: --results needs --gamma (the config's gamma, e.g. 0.5 in config/paper.yaml)")
    if args.results:
        premise_print.from_results(args.results, args.gamma)
    if args.backbone:
        premise_print.probe_backbone(args.backbone, args.data, args.batches, args.batch, args.seed)
    premise_print.print_regime(args.regime)


def add_regime(sub) -> None:
    p = add_verb(sub, "regime", cmd_regime, "the conditions of the paper's regime on one benchmark "
                                            "(hnclip.analysis.regime)")
    p.add_argument("--benchmark", required=True, help="the benchmark whose test split is judged")
    p.add_argument("--backbone", required=True, help="model folder of the backbone (caption cosines, zero-shot)")
    p.add_argument("--train-manifest", required=True, help="training manifest the plain runs trained on")
    p.add_argument("--test-manifest", required=True)
    p.add_argument("--test-images", required=True, help="image store of the test manifest")
    p.add_argument("--zeroshot", required=True, help="the backbone's evaluation record on the test split")
    p.add_argument("--runs", nargs="+", required=True,
                   help="plain fine-tuning run folders (or their summary.json): gamma 0, no token term, full data")
    p.add_argument("--evals", nargs="+", required=True, help="the runs' evaluation records on the benchmark")
    p.add_argument("--main-spec", default=None, help="spec of the main experiment (condition 7's comparison)")
    p.add_argument("--transfer", nargs="*", default=[],
                   help="the zero-shot backbone's records on the train set's transfer targets (transfer_readable)")
    p.add_argument("--confidence", type=float, required=True, help="interval level (statistics.confidence)")
    p.add_argument("--resamples", type=int, required=True, help="bootstrap resamples (statistics.resamples)")
    p.add_argument("--bootstrap-seed", type=int, required=True, help="bootstrap seed (statistics.seed)")
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", required=True, help=f"JSON to write ({paths.regime_path('<benchmark>')})")


def cmd_regime(args) -> None:
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.analysis.regime_job import run_regime

    set_threads(args.threads)
    verify_stores(args.test_images)
    run_regime(benchmark=args.benchmark, backbone=Path(args.backbone), train_manifest=Path(args.train_manifest),
               test_manifest=Path(args.test_manifest), test_images=Path(args.test_images),
               zeroshot_eval=Path(args.zeroshot), run_dirs=run_folders(args.runs),
               eval_paths=[Path(p) for p in args.evals], out_json=Path(args.out),
               main_spec=Path(args.main_spec) if args.main_spec else None,
               transfer_evals=[Path(p) for p in args.transfer],
               settings=BootstrapSettings(args.confidence, args.resamples, args.bootstrap_seed),
               device=args.device)
