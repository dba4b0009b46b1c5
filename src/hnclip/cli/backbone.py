"""Verbs of ``workflow/rules/backbone.smk``: the backbone every run fine-tunes, pretrained in the DAG
(pool, init-model, stretch; its training stages are ``hnclip train``) or converted from a checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

from hnclip.cli.common import WEIGHTS_DIR, add_verb


def add_pool(sub) -> None:
    p = add_verb(sub, "pool", cmd_pool, "render the backbone's pretraining pool: a manifest and an image store")
    p.add_argument("--source", required=True, help="source record of the synthetic benchmark the pool avoids")
    p.add_argument("--count", type=int, required=True, help="scenes in the pool")
    p.add_argument("--seed", type=int, required=True, help="seed of the pool's scenes (pretrain.pool.seed)")
    p.add_argument("--image-size", type=int, required=True, help="backbone input resolution")
    p.add_argument("--manifest", required=True, help="manifest CSV to write")
    p.add_argument("--images", required=True, help="image store folder to write")


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
    p = add_verb(sub, "convert-checkpoint", cmd_convert_checkpoint,
                 "convert a Long-CLIP/OpenAI checkpoint to a model folder")
    p.add_argument("--format", choices=["longclip", "openai"], required=True)
    p.add_argument("--source", required=True, help="local .pt path or hf://OWNER/REPO/FILE")
    p.add_argument("--download-dir", default=WEIGHTS_DIR, help="where Hub weights are placed and checksum-locked")
    p.add_argument("--revision", default=None, help="Hub commit of an hf:// source (config backbone.revision)")
    p.add_argument("--sha256", default=None, help="the file's expected sha256 (config backbone.sha256)")
    p.add_argument("--out", required=True)


def cmd_convert_checkpoint(args) -> None:
    from hnclip.data.weights import fetch_weights
    from hnclip.models import load_longclip_checkpoint, load_openai_checkpoint, save_model

    loader = load_longclip_checkpoint if args.format == "longclip" else load_openai_checkpoint
    path = fetch_weights(args.source, Path(args.download_dir), revision=args.revision, sha256=args.sha256)
    save_model(loader(path), args.out)


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
