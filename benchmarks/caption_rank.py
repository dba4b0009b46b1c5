"""In how many directions must crowded captions differ for InfoNCE to saturate? (issue 20, conditions 4 and 5)

Condition 4 asks for the paper's caption geometry (captions crowded: >= 50 % of in-batch negatives at cosine
>= 0.8, hardest companion >= 0.9, hardest minus mean <= 0.1) and condition 5 for the paper's saturation
(standard InfoNCE < 1e-3 on most epoch-1 micro-batches), which needs each image feature to beat every other
caption of its micro-batch by ~0.1 cosine. Whether both can hold depends on more than the cosines: captions
at one mean cosine leave that room only if they differ in enough directions.

This script measures it in two parts, with no image tower at all (both bounds of
``hnclip.analysis.geometry``, at logit scale ``--logit-scale``):

1. The pipeline's training captions under its backbone (``--backbone``, ``--manifest``): their effective
   dimensions (participation ratio of the covariance), the geometry over one epoch of random micro-batches
   of 16, and on 32 of those micro-batches the least InfoNCE of image features fitted per micro-batch
   (``least_infonce_batches``) and with one feature per scene (``least_infonce_scenes``, what an image tower
   can aim at): median and share below 1e-3.
2. Isotropic captions with the same number of scenes, embedding width and mean cosine, differing in k
   random directions (``--dims``): the same columns. Which k reproduces the pipeline's captions, and which
   the paper's geometry, says what the toy's captions lack.
3. Where the directions go (``--ngrams``, ``--towers``): the same captions as L2-normalised counts of their
   word n-grams (``--ngrams 1 2 3``: what the captions' words themselves spread over, no tower at all), and
   under other models' text towers (``--towers DIR...``: e.g. an untrained tower from ``hnclip init-model
   --context-length 248``, or a backbone pretrained another way; a tower with fewer positions than a
   caption's tokens sees its first part only, and its row says how many it has).

    .venv/bin/python benchmarks/caption_rank.py --backbone results/backbone/model \\
        --manifest results/data/synthetic/train.csv --ngrams 1 2 3 4
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from hnclip.analysis.geometry import (  # noqa: E402
    batch_geometry,
    effective_dimensions,
    least_infonce_batches,
    least_infonce_scenes,
    unit_features,
)
from hnclip.dynamics_log import SATURATION_LOSS  # noqa: E402

MICRO_BATCH = 16
BOUND_BATCHES = 32


def describe(name: str, captions: np.ndarray, logit_scale: float, seed: int) -> None:
    """One row: effective dimensions, geometry over an epoch of micro-batches, both bounds on 32 of them."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(captions))
    batches = order[:len(order) // MICRO_BATCH * MICRO_BATCH].reshape(-1, MICRO_BATCH)
    geometry = batch_geometry(captions, list(batches))
    evaluation = batches[:BOUND_BATCHES]
    per_batch = least_infonce_batches(captions[evaluation], logit_scale)
    per_scene = least_infonce_scenes(captions, evaluation, logit_scale, seed=seed)
    print(f"{name:>40s} {effective_dimensions(captions):6.1f} {geometry['mean_offdiag']:6.3f} "
          f"{geometry['frac_ge_0.8']:6.2f} {geometry['mean_hardest']:7.3f} "
          f"{geometry['mean_hardest'] - geometry['mean_offdiag']:9.3f} {np.median(per_batch):9.2g} "
          f"{np.mean(per_batch < SATURATION_LOSS):6.2f} {np.median(per_scene):9.2g} "
          f"{np.mean(per_scene < SATURATION_LOSS):6.2f}", flush=True)


def isotropic_captions(n: int, width: int, k: int, mean_cosine: float, seed: int) -> np.ndarray:
    """``n`` unit rows: a shared direction plus a residual spread evenly over ``k`` other directions, scaled
    so that two rows' expected cosine is ``mean_cosine``."""
    if not 1 <= k < width:
        raise SystemExit(f"--dims: each k must lie in [1, {width - 1}] (the embedding width less the shared "
                         f"direction), got {k}")
    rng = np.random.default_rng(seed)
    residual = np.zeros((n, width))
    residual[:, 1:k + 1] = rng.standard_normal((n, k))
    residual /= np.linalg.norm(residual, axis=1, keepdims=True)
    return np.sqrt(mean_cosine) * np.eye(width)[0] + np.sqrt(1 - mean_cosine) * residual


def ngram_counts(texts: list[str], n: int) -> np.ndarray:
    """L2-normalised counts of each text's word n-grams (lower-cased, punctuation as words): [N, V] float64
    over the n-grams the texts use. A bag of words for n = 1; larger n keeps which word follows which, so
    "large red square" and "large red circle" differ in more columns than one."""
    if n < 1:
        raise SystemExit(f"--ngrams: each n must be >= 1, got {n}")
    words = [re.findall(r"[a-z0-9-]+|[^\sa-z0-9-]", text.lower()) for text in texts]
    counts = [Counter(tuple(w[i:i + n]) for i in range(len(w) - n + 1)) for w in words]
    if not all(counts):
        raise SystemExit(f"--ngrams {n}: a caption has fewer than {n} words")
    column = {gram: j for j, gram in enumerate(sorted(set().union(*counts)))}
    matrix = np.zeros((len(texts), len(column)))
    for row, grams in enumerate(counts):
        for gram, count in grams.items():
            matrix[row, column[gram]] = count
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def caption_features(model, texts: list[str]) -> np.ndarray:
    """The texts under ``model``'s text tower: unit float64 rows, as every row of the table measures them."""
    from hnclip.analysis.geometry_job import encode_captions

    return unit_features(encode_captions(model, texts, device="cpu").double().numpy())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", type=Path, default=REPO / "results" / "backbone" / "model")
    parser.add_argument("--manifest", type=Path, default=REPO / "results" / "data" / "synthetic" / "train.csv",
                        help="the training split whose captions to measure (column --caption-column)")
    parser.add_argument("--caption-column", default="caption")
    parser.add_argument("--dims", type=int, nargs="+", default=[2, 4, 6, 8, 12, 16, 32])
    parser.add_argument("--logit-scale", type=float, default=None,
                        help="default: the backbone's (clamped, as the trainer uses it)")
    parser.add_argument("--ngrams", type=int, nargs="*", default=[],
                        help="add rows for the captions' word n-gram counts, one per n")
    parser.add_argument("--towers", type=Path, nargs="*", default=[],
                        help="add rows for the captions under these models' text towers")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    began = time.time()

    from hnclip.data.manifest import read_manifest
    from hnclip.models import load_model

    model = load_model(args.backbone)
    logit_scale = args.logit_scale or float(model.scale().detach())
    manifest = read_manifest(args.manifest)
    if args.caption_column not in manifest.columns:
        raise SystemExit(f"{args.manifest}: no column {args.caption_column!r} (has {list(manifest.columns)})")
    texts = [str(c) for c in manifest[args.caption_column]]
    # tokens of the longest caption, EOT included, as far as the backbone's positions reach
    longest = int((model.tokenize(texts) > 0).sum(1).max())
    captions = caption_features(model, texts)
    del model
    n, width = captions.shape
    mean_cosine = float((captions.sum(0) @ captions.sum(0) - n) / (n * (n - 1)))
    print(f"{n} captions of {args.manifest}, width {width}, logit scale {logit_scale:g}, mean pairwise cosine "
          f"{mean_cosine:.3f}; micro-batches of {MICRO_BATCH}, bounds on {BOUND_BATCHES} of them")
    print(f"{'captions':>40s} {'dims':>6s} {'mean':>6s} {'>=0.8':>6s} {'hardest':>7s} {'hard-mean':>9s} "
          f"{'per-batch':>9s} {'<1e-3':>6s} {'per-scene':>9s} {'<1e-3':>6s}")
    describe("the pipeline's", captions, logit_scale, args.seed)
    for k in args.dims:
        describe(f"isotropic, k = {k}", isotropic_captions(n, width, k, mean_cosine, args.seed), logit_scale,
                 args.seed)
    for k in args.ngrams:
        describe(f"word {k}-grams", ngram_counts(texts, k), logit_scale, args.seed)
    for path in args.towers:
        tower = load_model(path)
        seen = "" if tower.context_length >= longest else f", first {tower.context_length} tokens"
        describe(f"{path.parent.name}/{path.name}{seen}"[-40:], caption_features(tower, texts), logit_scale,
                 args.seed)
    print(f"[{time.time() - began:.0f} s]")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
