"""Verbs of ``workflow/rules/data.smk``: benchmark files -> manifests + image stores -> subsets, and the
GOAL/StructXLIP preprocessing products (segments, edges)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hnclip import paths
from hnclip.cli.common import WEIGHTS_DIR, add_verb, json_arg, set_threads

log = logging.getLogger("hnclip")


def add_fetch(sub) -> None:
    p = add_verb(sub, "fetch", cmd_fetch, "render, download or verify a benchmark's files; write its source record")
    p.add_argument("--benchmark", required=True, help="config key of the benchmark")
    p.add_argument("--adapter", required=True, help="hnclip.data adapter name")
    p.add_argument("--root", required=True, help="folder of the publisher's files")
    p.add_argument("--settings", type=json_arg, default={}, help="the benchmark's config block (JSON)")
    p.add_argument("--files-of", default=None,
                   help="source record of the benchmark whose files this one reads (its files_from)")
    p.add_argument("--out", required=True, help="source record (JSON) to write")


def cmd_fetch(args) -> None:
    """Make the benchmark's files exist at its root: render (synthetic), download, or verify them."""
    from hnclip.data.fetch import fetch_benchmark
    from hnclip.data.roots import RootRefusedError
    from hnclip.fileio import write_json_atomic

    files_of = json.loads(Path(args.files_of).read_text()) if args.files_of else None
    try:
        source = fetch_benchmark(args.benchmark, args.adapter, Path(args.root), args.settings, files_of)
    except RootRefusedError as error:  # one line naming the folder and its config key, no traceback
        raise SystemExit(str(error)) from None
    write_json_atomic(args.out, source, sort_keys=True)


def add_prepare(sub) -> None:
    p = add_verb(sub, "prepare", cmd_prepare, "write a split's manifest and its pre-resized image store")
    p.add_argument("--source", required=True, help="source record written by `hnclip fetch`")
    p.add_argument("--split", required=True,
                   help="train, test, or a test variant of another published protocol (hnclip.data.test_variants)")
    p.add_argument("--image-size", type=int, required=True, help="backbone input resolution")
    p.add_argument("--context-length", type=int, required=True,
                   help="text tower positions (backbone.context_length): captions cut there are counted")
    p.add_argument("--model", default=None,
                   help="the backbone's model folder, whose interpolation the store takes and whose image size "
                        "--image-size must be (a converted open_clip or transformers backbone)")
    p.add_argument("--manifest", required=True, help="manifest CSV to write")
    p.add_argument("--images", required=True, help="image store folder to write")


def cmd_prepare(args) -> None:
    from hnclip.data.prepare import prepare_split

    resample = "bicubic"
    if args.model:
        from hnclip.model_files import model_geometry

        size, resample = model_geometry(args.model)
        if size != args.image_size:
            raise SystemExit(f"hnclip prepare: backbone.image_size is {args.image_size}, but the backbone "
                             f"{args.model} reads {size} px images: set backbone.image_size: {size}")
    source = json.loads(Path(args.source).read_text())
    manifest = prepare_split(source, args.split, args.image_size, Path(args.manifest), Path(args.images),
                             resample=resample)
    from hnclip.models.tokenizer import log_truncation

    log_truncation([str(c) for c in manifest["caption"]], args.context_length, f"{source['benchmark']}/{args.split}",
                   log)


def add_store(sub) -> None:
    p = add_verb(sub, "store", cmd_store,
                 "an image store of a split in one model's geometry (its image size and interpolation)")
    p.add_argument("--manifest", required=True, help=f"the split's manifest ({paths.manifest_path('<benchmark>', '<split>')})")
    p.add_argument("--model", required=True, help="the model folder whose geometry the store takes")
    p.add_argument("--like", default=None,
                   help="the split's own store: linked instead of rebuilt when its geometry is the model's")
    p.add_argument("--out", required=True, help="image store folder to write")


def cmd_store(args) -> None:
    from hnclip.data.model_store import store_for_model

    store_for_model(Path(args.manifest), args.model, args.out, like=args.like)


def add_verify_store(sub) -> None:
    p = add_verb(sub, "verify-store", cmd_verify_store, "check image stores against the sha256 recorded when built")
    p.add_argument("images", nargs="+", help="image store folders")


def cmd_verify_store(args) -> None:
    from hnclip.data.image_store import ImageStore

    for store_dir in args.images:
        checked = ImageStore(store_dir).verify()
        log.info("%s: %s", store_dir, "sha256 matches" if checked else "size matches (no checksum recorded)")


def add_subset(sub) -> None:
    p = add_verb(sub, "subset", cmd_subset, "write a nested, deterministic fraction of a training manifest's ids")
    p.add_argument("--manifest", required=True)
    p.add_argument("--fraction", type=float, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", required=True)


def cmd_subset(args) -> None:
    from hnclip.data.manifest import read_manifest
    from hnclip.data.subsets import subset_ids, write_subset

    manifest = read_manifest(args.manifest)
    ids = subset_ids(list(manifest["image_id"]), args.fraction, args.seed)
    write_subset(ids, args.out)
    log.info("subset f=%s seed=%s: %d of %d ids", args.fraction, args.seed, len(ids), len(manifest))


def add_segments(sub) -> None:
    p = add_verb(sub, "segments", cmd_segments, "GOAL/StructXLIP preprocessing: segments matched to caption sentences")
    p.add_argument("--manifest", required=True)
    p.add_argument("--source", required=True, help="source record of the benchmark (for the oracle segmenter)")
    p.add_argument("--model", required=True, help="backbone that embeds crops and sentences")
    p.add_argument("--segmenter", choices=["sam", "oracle"], required=True, help="preprocess.segmenter")
    p.add_argument("--sam-model", default=None, help="SAM in transformers format: a local folder or hf://OWNER/REPO")
    p.add_argument("--sam-revision", default=None, help="Hub commit of an hf:// SAM (config preprocess.sam_revision)")
    p.add_argument("--download-dir", default=WEIGHTS_DIR, help="where Hub weights are placed and checksum-locked")
    p.add_argument("--min-area-ratio", type=float, required=True, help="preprocess.min_area_ratio")
    p.add_argument("--max-area-ratio", type=float, required=True, help="preprocess.max_area_ratio")
    p.add_argument("--max-pairs", type=int, required=True, help="preprocess.max_pairs")
    p.add_argument("--matcher", choices=["backbone", "oracle"], default="backbone", help="preprocess.matcher")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", required=True)


def cmd_segments(args) -> None:
    from hnclip.data.manifest import read_manifest
    from hnclip.preprocess.segments import build_segments

    generator = matcher = None
    if args.matcher == "oracle" and args.segmenter != "oracle":
        raise SystemExit("hnclip segments: preprocess.matcher oracle needs preprocess.segmenter oracle (the "
                         "scenes' object boxes are what it names sentences for)")
    if args.segmenter == "oracle":
        from hnclip.preprocess.oracle import synthetic_mask_generator, synthetic_sentence_matcher

        source = json.loads(Path(args.source).read_text())
        generator = synthetic_mask_generator(source["root"])
        if args.matcher == "oracle":
            matcher = synthetic_sentence_matcher(source["root"])
    elif not args.sam_model:
        raise SystemExit("hnclip segments: --segmenter sam needs --sam-model (config key preprocess.sam_model)")
    sam_dir = None
    if args.sam_model:
        from hnclip.data.weights import fetch_weights

        sam_dir = fetch_weights(args.sam_model, Path(args.download_dir), revision=args.sam_revision)
    set_threads(args.threads)
    build_segments(read_manifest(args.manifest), Path(args.model), Path(args.out), sam_dir=sam_dir,
                   min_area_ratio=args.min_area_ratio, max_area_ratio=args.max_area_ratio,
                   max_pairs=args.max_pairs, mask_generator=generator, sentence_matcher=matcher)


def add_edges(sub) -> None:
    p = add_verb(sub, "edges", cmd_edges, "StructXLIP preprocessing: Canny edge maps of images and segments")
    p.add_argument("--images", required=True, help="image store")
    p.add_argument("--segments", required=True, help="segment product")
    p.add_argument("--out", required=True)


def cmd_edges(args) -> None:
    from hnclip.preprocess.edges import build_edges

    build_edges(Path(args.images), Path(args.segments), Path(args.out))
