"""Verbs of ``workflow/rules/backbone.smk``: the backbone every run fine-tunes, pretrained in the DAG
(pool, init-model, stretch; its training stages are ``hnclip train``) or converted from a checkpoint (also the
released checkpoints a config evaluates, ``workflow/rules/released.smk``)."""

from __future__ import annotations

import json
from pathlib import Path

from hnclip import paths
from hnclip.cli.common import WEIGHTS_DIR, add_verb, json_arg


def add_pool(sub) -> None:
    p = add_verb(sub, "pool", cmd_pool, "render the backbone's pretraining pool: a manifest and an image store")
    p.add_argument("--source", nargs="+", required=True,
                   help="source records of the synthetic benchmarks whose families the pool draws and whose "
                        "scenes it avoids")
    p.add_argument("--share", nargs="+", type=float, default=None,
                   help="each source family's share of the pool, in --source order (default: equal)")
    p.add_argument("--count", type=int, required=True, help="scenes in the pool")
    p.add_argument("--seed", type=int, required=True, help="seed of the pool's scenes (pretrain.pool.seed)")
    p.add_argument("--image-size", type=int, required=True, help="backbone input resolution")
    p.add_argument("--slices", type=int, default=0,
                   help="draw every scene within one of this many narrow slices of its family (0: the whole family)")
    p.add_argument("--slice-inventory", type=int, default=7, help="(colour, shape) kinds of each slice")
    p.add_argument("--slice-objects", type=int, nargs=2, default=None, metavar=("MIN", "MAX"),
                   help="objects per scene within a slice")
    p.add_argument("--slice-backgrounds", type=int, default=1, help="backgrounds of each slice")
    p.add_argument("--phrasing", choices=["benchmark", "pool"], default="benchmark",
                   help="long captions in the benchmarks' words or in the pool's own (pretrain.pool.phrasing)")
    p.add_argument("--benchmark-words", type=float, default=0.0,
                   help="under --phrasing pool, the share of scenes captioned in the benchmarks' words "
                        "(pretrain.pool.benchmark_words)")
    p.add_argument("--manifest", required=True, help="manifest CSV to write")
    p.add_argument("--images", required=True, help="image store folder to write")


def cmd_pool(args) -> None:
    """The backbone's pretraining pool: fresh scenes rendered like the benchmarks', none of them their own."""
    from hnclip.data.fetch import SYNTHETIC_ADAPTERS
    from hnclip.data.pool import build_pool
    from hnclip.data.synthetic import MAX_OBJECTS, MIN_OBJECTS, PoolSlices

    shares = args.share or [1.0] * len(args.source)
    if len(shares) != len(args.source):
        raise SystemExit(f"hnclip pool: {len(args.source)} --source but {len(shares)} --share")
    sources = []
    for path, share in zip(args.source, shares, strict=True):
        source = json.loads(Path(path).read_text())
        if source.get("adapter") not in SYNTHETIC_ADAPTERS:
            raise SystemExit(f"hnclip pool: {path} describes adapter {source.get('adapter')!r}; the pool is "
                             "rendered like a synthetic benchmark only")
        sources.append((source["root"], share, source.get("origin", {}).get("settings", {}).get("image_size", 96)))
    slices = (PoolSlices(args.slices, args.slice_inventory, tuple(args.slice_objects or (MIN_OBJECTS, MAX_OBJECTS)),
                         args.slice_backgrounds) if args.slices else None)
    build_pool(sources, args.count, args.seed, args.image_size, Path(args.manifest), Path(args.images), slices,
               args.phrasing, args.benchmark_words)


def add_init_model(sub) -> None:
    p = add_verb(sub, "init-model", cmd_init_model, "build a randomly initialised dual encoder from a named config")
    p.add_argument("--name", required=True)
    p.add_argument("--context-length", type=int, required=True, help="text positions (pretrain.context_length)")
    p.add_argument("--seed", type=int, required=True, help="initialisation seed (the first of seeds)")
    p.add_argument("--out", required=True)


def cmd_init_model(args) -> None:
    from hnclip.models import create_model, save_model

    model = create_model(args.name, context_length=args.context_length, seed=args.seed)
    save_model(model, args.out)


def add_convert_checkpoint(sub) -> None:
    from hnclip.checkpoint_formats import format_names

    p = add_verb(sub, "convert-checkpoint", cmd_convert_checkpoint,
                 "convert a checkpoint (Long-CLIP, OpenAI, open_clip, transformers, GOAL, StructXLIP, FineLIP) to a "
                 "model folder")
    p.add_argument("--format", choices=format_names(), required=True)
    p.add_argument("--source", default=None,
                   help="the checkpoint: a local file or folder, hf://OWNER/REPO/FILE, a transformers Hub id "
                        "OWNER/NAME, or an open_clip pretrained tag")
    p.add_argument("--model", default=None,
                   help="open_clip: the architecture (ViT-B-32), hf-hub:ORG/REPO or local-dir:FOLDER")
    p.add_argument("--base", default=None,
                   help="goal/structxlip: the CLIPModel (Hub id or folder) their released weights overlay")
    p.add_argument("--base-revision", default=None, help="Hub commit of --base")
    p.add_argument("--download-dir", default=WEIGHTS_DIR, help="where Hub weights are placed and checksum-locked")
    p.add_argument("--revision", default=None, help="Hub commit of the checkpoint (config backbone.revision)")
    p.add_argument("--sha256", default=None, help="the weights file's expected sha256 (config backbone.sha256)")
    p.add_argument("--stretch", type=int, default=None, metavar="KEEP",
                   help="apply Long-CLIP's positional stretch keeping KEEP rows (77 -> 248 with 20)")
    p.add_argument("--context-length", type=int, default=None,
                   help="the text positions the converted model must have (config backbone.context_length)")
    p.add_argument("--key", default="backbone", help="the config section named in errors (backbone, models.<name>)")
    p.add_argument("--out", required=True)


def cmd_convert_checkpoint(args) -> None:
    from hnclip.models.convert import convert_source

    convert_source(args.format, args.source, args.out, model=args.model, base=args.base,
                   base_revision=args.base_revision, revision=args.revision, sha256=args.sha256,
                   stretch=args.stretch, context_length=args.context_length, download_dir=args.download_dir,
                   key=args.key)


def add_install_backbone(sub) -> None:
    p = add_verb(sub, "install-backbone", cmd_install_backbone,
                 "check a released model folder against its pinned sha256 and install it as the backbone")
    p.add_argument("--source", required=True, help="the released folder (backbone.checkpoint)")
    p.add_argument("--sha256", default=None, help="the weights' expected sha256 (backbone.sha256)")
    p.add_argument("--image-size", type=int, required=True, help="backbone.image_size")
    p.add_argument("--context-length", type=int, required=True, help="backbone.context_length")
    p.add_argument("--out", required=True)


def cmd_install_backbone(args) -> None:
    import logging

    from hnclip.backbone.released import install_released

    digest = install_released(args.source, args.out, sha256=args.sha256, image_size=args.image_size,
                              context_length=args.context_length)
    logging.getLogger(__name__).info("installed the released backbone %s (weights sha256 %s)", args.source, digest)


def add_stretch(sub) -> None:
    p = add_verb(sub, "stretch", cmd_stretch, "stretch a 77-position text tower to 248 positions (Long-CLIP's scheme)")
    p.add_argument("--model", required=True)
    p.add_argument("--keep", type=int, required=True, help="positions kept as they are (backbone.frozen_positions)")
    p.add_argument("--factor", type=int, default=4)
    p.add_argument("--context-length", type=int, required=True,
                   help="expected positions after the stretch (backbone.context_length)")
    p.add_argument("--logit-scale", type=float, required=True,
                   help="the logit scale s the stretched model starts at (pretrain.long.logit_scale; Long-CLIP: 100)")
    p.add_argument("--out", required=True)


def cmd_stretch(args) -> None:
    import math

    import torch

    from hnclip.models import load_model, save_model, stretch_model

    model = stretch_model(load_model(args.model), keep=args.keep, factor=args.factor)
    with torch.no_grad():  # Long-CLIP's train.py starts its long-caption stage at log scale 4.6052
        model.logit_scale.fill_(math.log(args.logit_scale))
    if model.context_length != args.context_length:
        raise SystemExit(
            f"hnclip stretch: stretching {args.model} with keep={args.keep}, factor={args.factor} gives "
            f"{model.context_length} text positions, but backbone.context_length asks for {args.context_length}"
        )
    save_model(model, args.out)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    """``key=value`` command-line items as a dict, naming the malformed one."""
    pairs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key or not value:
            raise SystemExit(f"hnclip: {what} expects KEY=VALUE items, got {item!r}")
        pairs[key] = value
    return pairs


def add_backbone_figures(sub) -> None:
    p = add_verb(sub, "backbone-figures", cmd_backbone_figures,
                 "a backbone's figures before fine-tuning: zero-shot R@1, micro-batch geometry and saturation")
    p.add_argument("--model", required=True, help="the backbone's model folder")
    p.add_argument("--train-manifest", required=True, help="the training split the runs fine-tune on")
    p.add_argument("--train-images", required=True, help="its image store")
    p.add_argument("--scored", nargs="+", required=True, metavar="LABEL=MANIFEST,IMAGES",
                   help="splits whose zero-shot R@1 is stated, e.g. "
                        f"synthetic/test={paths.manifest_path('synthetic', 'test')},{paths.images_dir('synthetic', 'test')}")
    p.add_argument("--micro-batch", type=int, required=True, help="the trainer's micro-batch (train.micro_batch)")
    p.add_argument("--batches", type=int, required=True, help="random micro-batches measured (geometry.n_batches)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--out", required=True)


def cmd_backbone_figures(args) -> None:
    from hnclip.backbone.figures import backbone_figures
    from hnclip.cli.common import set_threads, verify_stores
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.fileio import write_json_atomic

    set_threads(args.threads)
    scored = {}
    for label, files in _pairs(args.scored, "--scored").items():
        manifest, sep, images = files.partition(",")
        if not sep:
            raise SystemExit(f"hnclip backbone-figures: --scored {label}= needs MANIFEST,IMAGES, got {files!r}")
        verify_stores(images)
        scored[label] = (read_manifest(manifest), ImageStore(images))
    verify_stores(args.train_images)
    figures = backbone_figures(args.model, (read_manifest(args.train_manifest), ImageStore(args.train_images)),
                               scored, args.micro_batch, args.batches, device=args.device)
    write_json_atomic(Path(args.out), figures, sort_keys=True)


def add_release_backbone(sub) -> None:
    p = add_verb(sub, "release-backbone", cmd_release_backbone,
                 "write a backbone release (model, release.json, card) and set it beside the shipped one")
    p.add_argument("--name", required=True, help="the release's name (pretrain.release_name)")
    p.add_argument("--model", required=True, help="the pretrained model folder")
    p.add_argument("--figures", required=True, help="its figures (hnclip backbone-figures)")
    p.add_argument("--recipe", required=True, type=json_arg, help="the recipe it was built with, as JSON")
    p.add_argument("--summaries", nargs="+", required=True, metavar="STAGE=SUMMARY_JSON",
                   help="each training stage's summary.json, in order")
    p.add_argument("--timings", nargs="+", required=True, metavar="JOB=BENCHMARK_TSV",
                   help="Snakemake benchmark files of the jobs that built it")
    p.add_argument("--shipped", default=None, help="the shipped release folder to compare with")
    p.add_argument("--out", required=True, help="the release folder to write")


def cmd_release_backbone(args) -> None:
    from hnclip.backbone.release import compare_releases, write_release
    from hnclip.backbone.released import read_release

    release = write_release(args.name, args.model, args.out, args.recipe,
                            json.loads(Path(args.figures).read_text()), _pairs(args.summaries, "--summaries"),
                            {k: Path(v) for k, v in _pairs(args.timings, "--timings").items()})
    print(compare_releases(release, read_release(args.shipped) if args.shipped else None))
