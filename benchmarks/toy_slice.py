"""How crowded is each candidate slice of the synthetic family under the backbone? (issue 20, condition 4)

The embedded default's benchmark is a narrow slice of the family its backbone was pretrained on
(``hnclip.data.synthetic.family_slice``: ``inventory`` kinds, ``backgrounds``, ``objects``, ``patterns``,
drawn by the benchmark's seed). Which kinds a seed draws changes how close the captions sit in the
backbone's text tower, so the seed is chosen here, on scenes of the slice drawn from a stream no split
uses, by the paper's caption geometry alone (negatives >= 0.8, hardest in-batch cosine, hardest minus
mean; ``dims``: the captions' effective dimensions, ``hnclip.analysis.geometry.effective_dimensions``, and
``img`` the images' under the image tower: contrastive pretraining aligns the two, so a tower that resolves
a slice in few directions leaves its captions in as few, benchmarks/README.md "caption_rank.py"), never
by a retrieval result of any fine-tuned model. Zero-shot R@1 is printed for information.

    .venv/bin/python benchmarks/toy_slice.py --backbone results/backbone/model --seeds 0 1 2 3 4 5 6 7

``--bound N`` adds what the geometry allows of condition 5 (saturation): on N of the micro-batches, the
least standard InfoNCE that *any* image tower could reach against these captions with the text tower as
it is (``hnclip.analysis.geometry.least_infonce``: 16 free unit image vectors, optimised for the symmetric
loss at the backbone's logit scale), and the share of
micro-batches where that least loss is below the saturation threshold 1e-3; then the same micro-batches'
loss when each of the slice's scenes has one free image feature, fitted to the mean loss over random
micro-batches (``least_infonce_scenes``: what an image tower, which gives a scene one feature whatever its
batch, can aim at), its median and share below 1e-3 (benchmarks/README.md, "toy_slice.py").

Micro-batches of 16 are random permutations cut in order, like the trainer's (one epoch).
"""

from __future__ import annotations

import argparse
import random
import sys
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
)
from hnclip.analysis.regime import NEAR_DUPLICATE_COSINE  # noqa: E402
from hnclip.data import synthetic as syn  # noqa: E402
from hnclip.data.image_store import resize_center_crop, to_model_input  # noqa: E402
from hnclip.dynamics_log import SATURATION_LOSS  # noqa: E402
from hnclip.models import load_model  # noqa: E402


def slice_scenes(family: str, where, count: int, seed: int, stream: str = "slice-probe") -> list:
    """``count`` distinct scenes of the slice from the stream ``<family>:<stream>:<seed>`` (no split uses it)."""
    scenes, seen, index = [], set(), 0
    while len(scenes) < count:
        scene = syn.sample_scene(family, random.Random(f"{family}:{stream}:{seed}:{index}"), where)
        index += 1
        if scene.signature() not in seen:
            seen.add(scene.signature())
            scenes.append(scene)
    return scenes


@torch.no_grad()
def encode(model, scenes, render_size: int):
    captions = [syn.describe_scene(s) for s in scenes]
    side = int(model.image_size[0])  # square inputs: the store resizes to this side
    pixels = np.stack([np.asarray(resize_center_crop(syn.render_scene(s, render_size), side), dtype=np.uint8)
                       for s in scenes])
    model.eval()
    images, texts = [], []
    for start in range(0, len(scenes), 256):
        batch = to_model_input(pixels[start:start + 256], model.image_mean, model.image_std)
        images.append(torch.nn.functional.normalize(model.encode_image(batch).float(), dim=-1))
        tokens = model.tokenize(captions[start:start + 256])
        texts.append(torch.nn.functional.normalize(model.encode_text(tokens).float(), dim=-1))
    return torch.cat(images).numpy(), torch.cat(texts).numpy()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", type=Path, default=REPO / "results" / "backbone" / "model")
    parser.add_argument("--family", default="synthetic")
    parser.add_argument("--inventory", type=int, default=9)
    parser.add_argument("--backgrounds", type=int, default=1)
    parser.add_argument("--objects", type=int, nargs=2, default=[7, 7])
    parser.add_argument("--patterns", nargs="*", default=["solid"])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    parser.add_argument("--scenes", type=int, default=1024)
    parser.add_argument("--render-size", type=int, default=96)
    parser.add_argument("--bound", type=int, default=0, metavar="N",
                        help="micro-batches on which to compute the least reachable InfoNCE (0: skip)")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    model = load_model(args.backbone)
    logit_scale = float(model.scale().detach())
    bound_columns = f" {'least':>8s} {'<1e-3':>6s} {'scene':>8s} {'<1e-3':>6s}" if args.bound else ""
    print(f"{'seed':>4s} {'>=0.8':>6s} {'hardest':>7s} {'hard-mean':>9s} {'dims':>5s} {'img':>5s} {'mate>=0.9':>9s}{bound_columns} "
          f"{'zs I→T':>7s} {'zs T→I':>7s}  kinds")
    for seed in args.seeds:
        where = syn.family_slice(args.family, args.inventory, args.backgrounds, seed, tuple(args.objects),
                                 args.patterns)
        images, texts = encode(model, slice_scenes(args.family, where, args.scenes, seed), args.render_size)
        order = np.random.default_rng(seed).permutation(len(texts))
        batches = [order[k:k + 16] for k in range(0, len(order) - 15, 16)]
        geometry = batch_geometry(texts.astype(np.float64), batches)
        covered = np.concatenate(batches)
        cos = texts @ texts.T
        np.fill_diagonal(cos, -1.0)
        mate = np.zeros(len(texts), bool)
        for rows in batches:
            mate[rows] = (cos[np.ix_(rows, rows)] >= NEAR_DUPLICATE_COSINE).any(axis=1)
        scores = images @ texts.T
        i2t = 100 * float(np.mean(scores.argmax(1) == np.arange(len(texts))))
        t2i = 100 * float(np.mean(scores.argmax(0) == np.arange(len(texts))))
        kinds = ", ".join(f"{c} {s}" for c, s in where.kinds) if where.kinds else "all"
        bound = ""
        if args.bound:
            evaluation = np.stack(batches[:args.bound])
            least = least_infonce_batches(texts.astype(np.float64)[evaluation], logit_scale)
            scene = least_infonce_scenes(texts.astype(np.float64), evaluation, logit_scale)
            bound = (f" {np.median(least):8.2g} {np.mean(least < SATURATION_LOSS):6.2f}"
                     f" {np.median(scene):8.2g} {np.mean(scene < SATURATION_LOSS):6.2f}")
        print(f"{seed:4d} {geometry['frac_ge_0.8']:6.2f} {geometry['mean_hardest']:7.3f} "
              f"{geometry['mean_hardest'] - geometry['mean_offdiag']:9.3f} {effective_dimensions(texts):5.1f} "
              f"{effective_dimensions(images):5.1f} {mate[covered].mean():9.2f}{bound} "
              f"{i2t:7.1f} {t2i:7.1f}  {kinds} on {', '.join(where.backgrounds or ['all'])}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
