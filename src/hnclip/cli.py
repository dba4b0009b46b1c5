"""The ``hnclip`` command: one verb per workflow step, so every Snakemake rule is a single call.

Verbs import their modules lazily: ``hnclip table`` must not pay for importing torch, and a rule's conda
environment only carries the extras its verb needs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

log = logging.getLogger("hnclip")
WEIGHTS_DIR = "resources/checkpoints"  # Hub weights, one locked folder per source (hnclip.data.weights)
SPEC_HELP = "experiment spec file (results/specs/<experiment>.json, written by hnclip.plan.write_spec)"


def _json_arg(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text[:200]!r}") from e


def _set_threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


# ---------------------------------------------------------------------------------------------- data
def cmd_fetch(args) -> None:
    """Make the benchmark's files exist at its root: render (synthetic), download, or verify them."""
    from hnclip.data.fetch import fetch_benchmark
    from hnclip.fileio import write_json_atomic

    source = fetch_benchmark(args.benchmark, args.adapter, Path(args.root), args.settings)
    write_json_atomic(args.out, source, sort_keys=True)


def cmd_prepare(args) -> None:
    from hnclip.data.prepare import prepare_split

    source = json.loads(Path(args.source).read_text())
    prepare_split(source, args.split, args.image_size, Path(args.manifest), Path(args.images))


def cmd_subset(args) -> None:
    from hnclip.data.manifest import read_manifest
    from hnclip.data.subsets import subset_ids, write_subset

    manifest = read_manifest(args.manifest)
    ids = subset_ids(list(manifest["image_id"]), args.fraction, args.seed)
    write_subset(ids, args.out)
    log.info("subset f=%s seed=%s: %d of %d ids", args.fraction, args.seed, len(ids), len(manifest))


def cmd_pool(args) -> None:
    """The backbone's pretraining pool: fresh scenes rendered like the benchmark's, none of them its own."""
    from hnclip.data.pool import build_pool

    source = json.loads(Path(args.source).read_text())
    if source.get("adapter") not in ("synthetic", "synthetic_shift"):
        raise SystemExit(f"hnclip pool: {args.source} describes adapter {source.get('adapter')!r}; the pool is "
                         "rendered like a synthetic benchmark only")
    render_size = source.get("origin", {}).get("settings", {}).get("image_size", 96)
    build_pool(source["root"], args.count, args.seed, render_size, args.image_size, Path(args.manifest),
               Path(args.images))


# --------------------------------------------------------------------------------------------- models
def cmd_init_model(args) -> None:
    from hnclip.models import create_model, save_model

    model = create_model(args.name, context_length=args.context_length, seed=args.seed)
    save_model(model, args.out)


def cmd_convert_checkpoint(args) -> None:
    from hnclip.data.weights import fetch_weights
    from hnclip.models import load_longclip_checkpoint, load_openai_checkpoint, save_model

    loader = load_longclip_checkpoint if args.format == "longclip" else load_openai_checkpoint
    path = fetch_weights(args.source, Path(args.download_dir), revision=args.revision, sha256=args.sha256)
    save_model(loader(path), args.out)


def cmd_stretch(args) -> None:
    import math

    import torch

    from hnclip.models import load_model, save_model, stretch_model

    model = stretch_model(load_model(args.model), keep=args.keep, factor=args.factor)
    if args.logit_scale is not None:  # Long-CLIP's train.py starts its long-caption stage at log scale 4.6052
        with torch.no_grad():
            model.logit_scale.fill_(math.log(args.logit_scale))
    if args.context_length is not None and model.context_length != args.context_length:
        raise SystemExit(
            f"hnclip stretch: stretching {args.model} with keep={args.keep}, factor={args.factor} gives "
            f"{model.context_length} text positions, but backbone.context_length asks for {args.context_length}"
        )
    save_model(model, args.out)


def cmd_segments(args) -> None:
    from hnclip.data.manifest import read_manifest
    from hnclip.preprocess.segments import build_segments

    generator = None
    if args.segmenter == "oracle":
        from hnclip.preprocess.oracle import synthetic_mask_generator

        source = json.loads(Path(args.source).read_text())
        generator = synthetic_mask_generator(source["root"])
    elif not args.sam_model:
        raise SystemExit("hnclip segments: --segmenter sam needs --sam-model (config key preprocess.sam_model)")
    sam_dir = None
    if args.sam_model:
        from hnclip.data.weights import fetch_weights

        sam_dir = fetch_weights(args.sam_model, Path(args.download_dir), revision=args.sam_revision)
    _set_threads(args.threads)
    build_segments(read_manifest(args.manifest), Path(args.model), Path(args.out), sam_dir=sam_dir,
                   min_area_ratio=args.min_area_ratio, max_area_ratio=args.max_area_ratio,
                   max_pairs=args.max_pairs, mask_generator=generator)


def cmd_edges(args) -> None:
    from hnclip.preprocess.edges import build_edges

    build_edges(Path(args.images), Path(args.segments), Path(args.out))


def _verify_stores(*dirs) -> None:
    """Re-hash each image store a job reads against the checksum recorded when it was built: a corrupted
    file fails the job before it trains on it (~1 s per GB, once per job; see hnclip.data.image_store)."""
    from hnclip.data.image_store import ImageStore

    for store_dir in dirs:
        if store_dir:
            ImageStore(store_dir).verify()


def cmd_verify_store(args) -> None:
    from hnclip.data.image_store import ImageStore

    for store_dir in args.images:
        checked = ImageStore(store_dir).verify()
        log.info("%s: %s", store_dir, "sha256 matches" if checked else "size matches (no checksum recorded)")


# ------------------------------------------------------------------------------------- train, evaluate
def _parse_sets(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"hnclip: expected key=value, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def cmd_train(args) -> None:
    from hnclip.train import train
    from hnclip.train_config import TrainConfig

    _set_threads(args.threads)
    cfg = TrainConfig.from_overrides(_parse_sets(args.set))
    _verify_stores(args.images, args.eval_images)
    train(
        cfg,
        init_model_dir=Path(args.init),
        train_manifest=Path(args.manifest),
        store_dir=Path(args.images),
        out_dir=Path(args.out),
        checkpoint_dir=Path(args.checkpoint_dir),
        subset_path=Path(args.subset) if args.subset else None,
        eval_manifest=Path(args.eval_manifest) if args.eval_manifest else None,
        eval_store_dir=Path(args.eval_images) if args.eval_images else None,
        products={name: Path(path) for name, path in _parse_sets(args.product).items()},
    )


def cmd_evaluate(args) -> None:
    from hnclip.evaluate import evaluate_checkpoint

    _set_threads(args.threads)
    _verify_stores(args.images)
    evaluate_checkpoint(Path(args.model), Path(args.manifest), Path(args.images), Path(args.out),
                        run_info=args.run_info, eval_benchmark=args.eval_benchmark,
                        batch_size=args.batch_size, ks=args.ks, split=args.split)


# -------------------------------------------------------------------------------- analysis and report
def cmd_geometry(args) -> None:
    from hnclip.analysis.geometry_cli import run_geometry

    _set_threads(args.threads)
    run_geometry(model_dir=Path(args.model), manifest=Path(args.manifest), benchmark=args.benchmark,
                 batch_size=args.batch_size, n_batches=args.n_batches, seed=args.seed,
                 out_json=Path(args.out_json), out_figure=Path(args.out_figure))


def cmd_premise(args) -> None:
    from hnclip.analysis.premise import premise_report
    from hnclip.fileio import write_json_atomic

    runs = [Path(p).parent if Path(p).name == "summary.json" else Path(p) for p in args.runs]
    write_json_atomic(Path(args.out), premise_report(runs, gamma=args.gamma))


def cmd_regime(args) -> None:
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.analysis.regime_cli import run_regime

    _set_threads(args.threads)
    _verify_stores(args.test_images)
    runs = [Path(p).parent if Path(p).name == "summary.json" else Path(p) for p in args.runs]
    run_regime(benchmark=args.benchmark, backbone=Path(args.backbone), train_manifest=Path(args.train_manifest),
               test_manifest=Path(args.test_manifest), test_images=Path(args.test_images),
               zeroshot_eval=Path(args.zeroshot), run_dirs=runs, eval_paths=[Path(p) for p in args.evals],
               out_json=Path(args.out), main_spec=Path(args.main_spec) if args.main_spec else None,
               settings=BootstrapSettings(args.confidence, args.resamples, args.bootstrap_seed),
               device=args.device)


def cmd_table(args) -> None:
    from hnclip.analysis.records import load_records, load_run_summaries, load_spec
    from hnclip.analysis.tables import build_table, write_table

    spec = load_spec(args.spec)
    table = build_table(spec, load_records(spec), summaries=load_run_summaries(spec))
    write_table(table, args.out_prefix, caption=_caption(spec))


def _scale_words(spec: dict) -> str:
    return {"toy": "toy-scale run (synthetic benchmark, small backbone pretrained in the DAG)",
            "rehearsal": "rehearsal-scale run (paper configuration, random weights, stand-in data)"}.get(
        spec.get("scale"), "paper-scale run")


def _caption(spec: dict) -> str:
    return f"{spec.get('experiment', '')}: {_scale_words(spec)}"


def cmd_table_epochs(args) -> None:
    from hnclip.analysis.records import load_run_summaries, load_spec
    from hnclip.analysis.tables import build_epochs_table, write_table

    spec = load_spec(args.spec)
    table = build_epochs_table(spec, summaries=load_run_summaries(spec))
    write_table(table, args.out_prefix, caption="R@1 per epoch: " + _caption(spec))


def cmd_table_convergence(args) -> None:
    from hnclip.analysis.records import load_run_summaries, load_spec
    from hnclip.analysis.tables import build_convergence_table, write_table

    spec = load_spec(args.spec)
    write_table(build_convergence_table(spec, summaries=load_run_summaries(spec)), args.out_prefix,
                caption="R@1 and retrieval error per epoch and direction, beside the epoch's standard InfoNCE: "
                + _caption(spec))


def cmd_table_protocols(args) -> None:
    from hnclip.analysis.records import load_protocol_spec
    from hnclip.analysis.tables import build_protocols_table, load_protocol_summaries, write_table

    spec = load_protocol_spec(args.spec)
    variants = {f"{c['split']} ({c['benchmark']})": c["split_description"] for c in spec["cells"]
                if c["split"] != "test"}
    caption = ("evaluation protocols side by side: R@1/5/10 are the paper's cut-offs, R@1/5/25/50 GOAL's "
               "(one ranking serves both); split 'test' is the paper's protocol"
               + "".join(f"; {name}: {text}" for name, text in variants.items()))
    table = build_protocols_table(spec, summaries=load_protocol_summaries(spec))
    write_table(table, args.out_prefix, caption=f"{caption} ({_scale_words(spec)})")


def cmd_table_cost(args) -> None:
    from hnclip.analysis.tables import build_cost_table, write_table

    table = build_cost_table([Path(p) for p in args.summaries], [Path(p) for p in args.benchmarks], scale=args.scale,
                             reference_gamma=args.gamma)
    write_table(table, args.out_prefix, caption=f"training cost: {args.scale}-scale runs")


def cmd_figure(args) -> None:
    from hnclip.analysis import figures

    draw = {
        "dynamics": figures.plot_dynamics,
        "fractions": figures.plot_fractions,
        "gamma_sweep": figures.plot_gamma_sweep,
        "epochs": figures.plot_epochs,
        "convergence": figures.plot_convergence,
    }[args.name]
    draw(args.spec, args.out_prefix)


def cmd_gallery(args) -> None:
    from hnclip.analysis.gallery_cli import run_gallery

    _set_threads(args.threads)
    run_gallery(args.spec, n_captions=args.captions, out_prefix=args.out_prefix)


def cmd_report(args) -> None:
    from hnclip.analysis.records import load_spec
    from hnclip.report import render_report_from_files

    specs = {}
    for path in args.specs:
        spec = load_spec(path)
        if spec["experiment"] in specs:
            raise SystemExit(f"hnclip report: two specs of experiment {spec['experiment']!r} (second: {path})")
        specs[spec["experiment"]] = spec
    render_report_from_files(
        out_html=Path(args.out), title=args.title, scale=args.scale, specs=specs,
        tables=[Path(p) for p in args.tables], figures=[Path(p) for p in args.figures],
        geometry=[Path(p) for p in args.geometry], summaries=[Path(p) for p in args.summaries],
        premise=Path(args.premise) if args.premise else None,
        regime=[Path(p) for p in args.regime],
    )


def cmd_rehearsal_files(args) -> None:
    """The rehearsal's stand-ins (checkpoint, SAM, benchmark files, offline Hub cache), made once."""
    from hnclip.rehearsal.make import make_rehearsal_files

    config = args.config
    make_rehearsal_files(config["benchmarks"], checkpoint=config["backbone"]["checkpoint"],
                         sam_model=config["preprocess"]["sam_model"], folder=config["rehearsal"]["folder"],
                         seed=config["rehearsal"]["seed"], sam_image_size=config["rehearsal"]["sam_image_size"])


def cmd_plan(args) -> None:
    from hnclip.plan_cli import print_plan

    configfiles = [Path(p) for p in args.configfile]
    print_plan(configfiles[0] if len(configfiles) == 1 else configfiles, profile=args.profile,
               samples_per_s=args.samples_per_s, results_dir=Path(args.results), job_cost=args.job_cost)


# ------------------------------------------------------------------------------------- export, push
def cmd_export(args) -> None:
    """A model folder in Long-CLIP's, open_clip's or transformers' format, a model card beside it."""
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.export import ExportError, export_model

    try:
        export_model(Path(args.model), args.format, Path(args.out), run_dir=Path(args.run) if args.run else None,
                     eval_paths=[Path(p) for p in args.evals] if args.evals is not None else None,
                     settings=BootstrapSettings(args.confidence, args.resamples, args.bootstrap_seed),
                     name=args.name, encoder_only=args.encoder_only)
    except (ExportError, FileExistsError) as error:
        raise SystemExit(f"hnclip export: {error}") from None


def cmd_push(args) -> None:
    """Upload a folder to a Hub model repository; the token comes from HF_TOKEN only."""
    from hnclip.export.push import PushError, push_folder

    try:
        push_folder(Path(args.folder), args.repo, endpoint=args.endpoint, private=args.private or None,
                    revision=args.revision, message=args.message)
    except (PushError, FileNotFoundError) as error:
        raise SystemExit(str(error)) from None


# ------------------------------------------------------------------------------------------- parser
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hnclip", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(name, func, help_text):
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(func=func)
        return p

    p = verb("fetch", cmd_fetch, "render, download or verify a benchmark's files; write its source record")
    p.add_argument("--benchmark", required=True, help="config key of the benchmark")
    p.add_argument("--adapter", required=True, help="hnclip.data adapter name")
    p.add_argument("--root", required=True, help="folder of the publisher's files")
    p.add_argument("--settings", type=_json_arg, default={}, help="the benchmark's config block (JSON)")
    p.add_argument("--out", required=True, help="source record (JSON) to write")

    p = verb("prepare", cmd_prepare, "write a split's manifest and its pre-resized image store")
    p.add_argument("--source", required=True, help="source record written by `hnclip fetch`")
    p.add_argument("--split", required=True,
                   help="train, test, or a test variant of another published protocol (hnclip.data.test_variants)")
    p.add_argument("--image-size", type=int, required=True, help="backbone input resolution")
    p.add_argument("--manifest", required=True, help="manifest CSV to write")
    p.add_argument("--images", required=True, help="image store folder to write")

    p = verb("verify-store", cmd_verify_store, "check image stores against the sha256 recorded when built")
    p.add_argument("images", nargs="+", help="image store folders")

    p = verb("subset", cmd_subset, "write a nested, deterministic fraction of a training manifest's ids")
    p.add_argument("--manifest", required=True)
    p.add_argument("--fraction", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)

    p = verb("pool", cmd_pool, "render the backbone's pretraining pool: a manifest and an image store")
    p.add_argument("--source", required=True, help="source record of the synthetic benchmark the pool avoids")
    p.add_argument("--count", type=int, required=True, help="scenes in the pool")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--image-size", type=int, required=True, help="backbone input resolution")
    p.add_argument("--manifest", required=True, help="manifest CSV to write")
    p.add_argument("--images", required=True, help="image store folder to write")

    p = verb("init-model", cmd_init_model, "build a randomly initialised dual encoder from a named config")
    p.add_argument("--name", required=True)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)

    p = verb("convert-checkpoint", cmd_convert_checkpoint, "convert a Long-CLIP/OpenAI checkpoint to a model folder")
    p.add_argument("--format", choices=["longclip", "openai"], required=True)
    p.add_argument("--source", required=True, help="local .pt path or hf://OWNER/REPO/FILE")
    p.add_argument("--download-dir", default=WEIGHTS_DIR, help="where Hub weights are placed and checksum-locked")
    p.add_argument("--revision", default=None, help="Hub commit of an hf:// source (config backbone.revision)")
    p.add_argument("--sha256", default=None, help="the file's expected sha256 (config backbone.sha256)")
    p.add_argument("--out", required=True)

    p = verb("stretch", cmd_stretch, "stretch a 77-position text tower to 248 positions (Long-CLIP's scheme)")
    p.add_argument("--model", required=True)
    p.add_argument("--keep", type=int, default=20)
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--context-length", type=int, default=None, help="expected positions after the stretch")
    p.add_argument("--logit-scale", type=float, default=None,
                   help="set the logit scale s (Long-CLIP restarts at 100); default: keep the model's")
    p.add_argument("--out", required=True)

    p = verb("segments", cmd_segments, "GOAL/StructXLIP preprocessing: segments matched to caption sentences")
    p.add_argument("--manifest", required=True)
    p.add_argument("--source", required=True, help="source record of the benchmark (for the oracle segmenter)")
    p.add_argument("--model", required=True, help="backbone that embeds crops and sentences")
    p.add_argument("--segmenter", choices=["sam", "oracle"], default="sam")
    p.add_argument("--sam-model", default=None, help="SAM in transformers format: a local folder or hf://OWNER/REPO")
    p.add_argument("--sam-revision", default=None, help="Hub commit of an hf:// SAM (config preprocess.sam_revision)")
    p.add_argument("--download-dir", default=WEIGHTS_DIR, help="where Hub weights are placed and checksum-locked")
    p.add_argument("--min-area-ratio", type=float, default=0.01)
    p.add_argument("--max-area-ratio", type=float, default=0.8)
    p.add_argument("--max-pairs", type=int, default=3)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", required=True)

    p = verb("edges", cmd_edges, "StructXLIP preprocessing: Canny edge maps of images and segments")
    p.add_argument("--images", required=True, help="image store")
    p.add_argument("--segments", required=True, help="segment product")
    p.add_argument("--out", required=True)

    p = verb("train", cmd_train, "fine-tune a model folder on a prepared training split")
    p.add_argument("--init", required=True, help="model folder to start from")
    p.add_argument("--manifest", required=True)
    p.add_argument("--images", required=True, help="image store folder of the manifest")
    p.add_argument("--subset", default=None, help="file of image ids to train on (default: all)")
    p.add_argument("--eval-manifest", default=None, help="test split evaluated after each epoch")
    p.add_argument("--eval-images", default=None)
    p.add_argument("--out", required=True, help="run folder (summary, dynamics, model)")
    p.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints (not a workflow output)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="TrainConfig field")
    p.add_argument("--product", action="append", default=[], metavar="NAME=PATH",
                   help="a cached preprocessing product the framework needs (segments, edges)")

    p = verb("evaluate", cmd_evaluate, "retrieval Recall@K of a model folder on a prepared test split")
    p.add_argument("--model", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--eval-benchmark", required=True)
    p.add_argument("--run-info", type=_json_arg, default={})
    p.add_argument("--batch-size", type=int, default=128)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10, 25, 50],
                   help="Recall@K cut-offs (default: the paper's 1/5/10 and GOAL's 25/50, from one ranking)")
    p.add_argument("--split", default="test",
                   help="protocol split the manifest holds, recorded in the result (test, or a test variant)")
    p.add_argument("--out", required=True)

    p = verb("geometry", cmd_geometry, "caption geometry of a benchmark under a model's text encoder")
    p.add_argument("--model", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--benchmark", required=True)
    p.add_argument("--batch-size", type=int, required=True, help="captions per batch (geometry.batch_size)")
    p.add_argument("--n-batches", type=int, required=True, help="random batches (geometry.n_batches)")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out-json", required=True)
    p.add_argument("--out-figure", required=True)

    protocols_help = "protocol spec file (results/specs/protocols.json, written by hnclip.protocols.write_protocol_spec)"
    for name, func, text, spec_help in (
            ("table", cmd_table, "one experiment's retrieval table", SPEC_HELP),
            ("table-epochs", cmd_table_epochs, "retrieval per epoch of the main runs", SPEC_HELP),
            ("table-convergence", cmd_table_convergence,
             "R@1 and error per epoch and direction beside InfoNCE (main runs)", SPEC_HELP),
            ("table-protocols", cmd_table_protocols, "the main models under every published evaluation protocol",
             protocols_help)):
        p = verb(name, func, text)
        p.add_argument("--spec", type=Path, required=True, help=spec_help)
        p.add_argument("--out-prefix", required=True)

    p = verb("table-cost", cmd_table_cost, "training cost per run")
    p.add_argument("--summaries", nargs="+", required=True)
    p.add_argument("--benchmarks", nargs="*", default=[])
    p.add_argument("--scale", choices=["toy", "paper", "rehearsal"], required=True)
    p.add_argument("--gamma", type=float, required=True,
                   help="gamma of the reference (HN-CLIP) runs the time ratio divides by (config gamma)")
    p.add_argument("--out-prefix", required=True)

    p = verb("figure", cmd_figure, "one figure of the paper")
    p.add_argument("name", choices=["dynamics", "fractions", "gamma_sweep", "epochs", "convergence"])
    p.add_argument("--spec", type=Path, required=True, help=SPEC_HELP)
    p.add_argument("--out-prefix", required=True)

    p = verb("gallery", cmd_gallery, "qualitative retrieval gallery: HN-CLIP vs the strongest baseline")
    p.add_argument("--spec", type=Path, required=True, help="spec file of the main experiment")
    p.add_argument("--captions", type=int, required=True, help="query captions shown (report.gallery_captions)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out-prefix", required=True)

    p = verb("premise", cmd_premise, "the paper's regime figures (saturation, exact zeros, HN gradients) from run logs")
    p.add_argument("--runs", nargs="*", default=[], help="run folders or their summary.json files")
    p.add_argument("--gamma", type=float, required=True, help="gamma of the HN and HN-CLIP runs to use (config gamma)")
    p.add_argument("--out", required=True, help="JSON to write (hnclip.analysis.premise.premise_report)")

    p = verb("regime", cmd_regime, "the seven conditions of the paper's regime on one benchmark "
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
    p.add_argument("--confidence", type=float, default=0.95)
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--bootstrap-seed", type=int, default=0)
    p.add_argument("--device", default="auto")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", required=True, help="JSON to write (results/regime/<benchmark>.json)")

    p = verb("report", cmd_report, "render the self-contained HTML report")
    p.add_argument("--title", required=True)
    p.add_argument("--scale", choices=["toy", "paper", "rehearsal"], required=True)
    p.add_argument("--specs", type=Path, nargs="*", default=[], help="spec files of the experiments shown")
    p.add_argument("--tables", nargs="*", default=[])
    p.add_argument("--figures", nargs="*", default=[])
    p.add_argument("--geometry", nargs="*", default=[])
    p.add_argument("--summaries", nargs="*", default=[])
    p.add_argument("--premise", default=None,
                   help="JSON of the §2.4 / appendix C measurements (hnclip.analysis.claims.PREMISE_KEYS)")
    p.add_argument("--regime", nargs="*", default=[],
                   help="regime conditions per benchmark (results/regime/<benchmark>.json, hnclip regime)")
    p.add_argument("--out", required=True)

    p = verb("rehearsal-files", cmd_rehearsal_files,
             "make the rehearsal's stand-in checkpoint, SAM and benchmark files (config with a rehearsal section)")
    p.add_argument("--config", type=_json_arg, required=True,
                   help="the workflow config (JSON): benchmarks, backbone.checkpoint, preprocess.sam_model, rehearsal")

    p = verb("plan", cmd_plan, "list the jobs and estimated GPU-hours of a config before submitting")
    p.add_argument("--configfile", nargs="+", default=["config/config.yaml"],
                   help="config file(s); several layer in order, as with snakemake --configfile")
    p.add_argument("--profile", default=None,
                   help="profile folder whose train resources are shown (e.g. profiles/slurm, the cluster profile)")
    p.add_argument("--samples-per-s", type=float, default=None,
                   help="training samples/s per GPU (default: measured runs, else the Long-CLIP-L estimate)")
    p.add_argument("--results", default="results", help="results folder of earlier runs and prepared manifests")
    p.add_argument("--job-cost", default=None,
                   help="measured memory and time per job (default benchmarks/job_cost.json, if present)")
    p = verb("export", cmd_export, "write a model folder in Long-CLIP's, open_clip's or transformers' format, "
                                   "with a model card")
    p.add_argument("--model", required=True, help="model folder (model.json + model.safetensors)")
    p.add_argument("--format", choices=["longclip", "open_clip", "transformers"], required=True)
    p.add_argument("--out", required=True, help="folder to write (must not exist or be empty)")
    p.add_argument("--run", default=None,
                   help="run folder whose summary.json the card reads (default: the model folder's parent)")
    p.add_argument("--evals", nargs="*", default=None,
                   help="evaluation records for the card's results (default: results/evals/<run>/*.json)")
    p.add_argument("--name", default=None, help="open_clip model name (default: hnclip-<run path>)")
    p.add_argument("--encoder-only", action="store_true",
                   help="export a framework-scored model (FineLIP) as its encoder alone, the card saying so")
    p.add_argument("--confidence", type=float, default=0.95, help="interval coverage (config statistics)")
    p.add_argument("--resamples", type=int, default=2000)
    p.add_argument("--bootstrap-seed", type=int, default=0)

    p = verb("push", cmd_push, "upload a folder to a Hugging Face Hub model repository (token: HF_TOKEN only)")
    p.add_argument("--repo", required=True, help="OWNER/NAME of the model repository (created if missing)")
    p.add_argument("--folder", required=True, help="folder to upload, e.g. an `hnclip export` folder")
    p.add_argument("--endpoint", default=None, help="Hub URL (default: huggingface_hub's, HF_ENDPOINT)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--revision", default=None, help="branch to commit to (default: main)")
    p.add_argument("--message", default=None, help="commit message")
    return parser


def main(argv: list[str] | None = None) -> int:
    from hnclip.config_validation import ConfigError

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        args.func(args)
    except ConfigError as error:  # `hnclip plan` on a bad config: the key and the problem, no traceback
        print(f"hnclip {args.verb}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
