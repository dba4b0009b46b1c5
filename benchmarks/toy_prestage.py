"""Does a backbone strong on the slice, with its caption geometry kept, saturate InfoNCE? (issue 20, condition 5)

Condition 5 asks for the paper's saturation: standard InfoNCE < 1e-3 on most epoch-1 micro-batches of plain
fine-tuning, from a backbone whose captions crowd (condition 4). The embedded default's backbone is weak on
its slice (zero-shot R@1 ~10), and a pre-stage that trained both towers on the slice made it strong but
spread the captions. This probe tries the remaining split: an image-only pre-stage on slice scenes with the
text tower frozen, so the caption geometry stays exactly the backbone's, while the image tower learns the
slice. At each ``--steps`` point it prints, on ``--probe`` (1,024) probe scenes of the slice: zero-shot R@1,
the share of random micro-batches of 16 whose standard InfoNCE is < 1e-3 at those weights, the median of
that loss, and the caption geometry under the current text tower. At each ``--ft-at`` point it then
fine-tunes a copy of the whole model, plainly (standard InfoNCE, the trainer's AdamW settings: betas 0.9 /
0.98, eps 1e-6, weight decay 0.1, 5 warm-up steps, cosine, clip 1.0, micro-batch 16 x 2, 3 epochs) on
``--ft-scenes`` slice scenes at each of ``--ft-lrs``, and prints the share of its epoch-1 micro-batches
whose training loss is < 1e-3 (condition 5's measurement), how many of those hold a caption pair at cosine
>= 0.9 under the backbone, and the probe numbers after the 3 epochs.

The text side can be replaced (``--targets ngrams``: fixed features of the captions' word n-gram counts,
optionally without the relation chain the image does not fix; ``--distill-text``: the backbone's text tower
first trained to give the captions those features), and the pre-stage's scenes drawn from the slice, the
whole family or other slices of the same shape (``--pool-source``): benchmarks/README.md, "The text tower is
the limit, not the image tower".

Every scene is drawn from a stream of its own (``synthetic:prestage-pool|probe|ft:<seed>``) that no split
of the benchmark uses; nothing reads the benchmark's files. An emulation, not the pipeline's trainer: a
probe of the design, recorded in benchmarks/README.md ("toy_prestage.py").

    .venv/bin/python benchmarks/toy_prestage.py --backbone results/backbone/model --steps 0 4000 \\
        --ft-at 4000 --ft-lrs 3e-5 1e-4 3e-4
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from caption_rank import ngram_counts  # noqa: E402  (this folder: the script's own)
from toy_slice import slice_scenes  # noqa: E402

from hnclip.analysis.geometry import batch_geometry  # noqa: E402
from hnclip.analysis.regime import hardest_partner, micro_batch_has_pair, pairwise_outcomes  # noqa: E402
from hnclip.data import synthetic as syn  # noqa: E402
from hnclip.data.image_store import resize_center_crop, to_model_input  # noqa: E402
from hnclip.dynamics_log import SATURATION_LOSS  # noqa: E402
from hnclip.models import load_model  # noqa: E402
from hnclip.models.dual_encoder import build_clip  # noqa: E402

MICRO_BATCH = 16
ACCUM_STEPS = 2
FT_EPOCHS = 3
FT_WARMUP = 5
PRESTAGE_WARMUP = 50


class Scenes:
    """Pixels (model input), tokens and scenes of a list of scenes; ``targets``: fixed caption features, if
    any, that stand in for the text tower."""

    def __init__(self, model, scenes, render_size: int = 96):
        side = int(model.image_size[0])
        pixels = np.stack([np.asarray(resize_center_crop(syn.render_scene(s, render_size), side), dtype=np.uint8)
                           for s in scenes])
        self.pixels = to_model_input(pixels, model.image_mean, model.image_std)
        self.scenes = list(scenes)
        self.tokens = model.tokenize([syn.describe_scene(s) for s in scenes])
        self.targets = None

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def subset(cls, data: Scenes, n: int) -> Scenes:
        """The first ``n`` scenes of ``data``."""
        part = cls.__new__(cls)
        part.pixels, part.tokens, part.scenes = data.pixels[:n], data.tokens[:n], data.scenes[:n]
        part.targets = None if data.targets is None else data.targets[:n]
        return part


@torch.no_grad()
def features(model, data: Scenes) -> tuple[torch.Tensor, torch.Tensor]:
    model.eval()
    images = torch.cat([model.encode_image(data.pixels[k:k + 256]) for k in range(0, len(data), 256)])
    if data.targets is not None:
        return images.float(), data.targets
    texts = torch.cat([model.encode_text(data.tokens[k:k + 256]) for k in range(0, len(data), 256)])
    return images.float(), texts.float()


def standard_infonce(images: torch.Tensor, texts: torch.Tensor, logit_scale: float) -> torch.Tensor:
    logits = logit_scale * images @ texts.T
    labels = torch.arange(len(images))
    return 0.5 * (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels))


def share_with_pair(saturated: np.ndarray, pairs: np.ndarray) -> str:
    return f"{pairs[saturated].mean():.2f}" if saturated.any() else "-"


def random_micro_batches(n: int) -> list[np.ndarray]:
    """Rows of ``n`` scenes in random micro-batches of 16 (one fixed shuffle)."""
    order = np.random.default_rng(1).permutation(n)
    return [order[k:k + MICRO_BATCH] for k in range(0, n - MICRO_BATCH + 1, MICRO_BATCH)]


def micro_batch_losses(images: torch.Tensor, texts: torch.Tensor, batches, logit_scale: float) -> np.ndarray:
    return np.array([float(standard_infonce(images[rows], texts[rows], logit_scale)) for rows in batches])


def report(model, probe: Scenes, backbone_texts, logit_scale: float, tag: str,
           others: list[tuple[str, Scenes, torch.Tensor]] = ()) -> None:
    """Probe numbers; with ``others`` ((what, scenes, their frozen caption features) each: the pre-stage's
    own scenes, fresh scenes of the pre-stage's source), also the micro-batch loss there: what the image tower
    can fit, against what it generalises to, on the slice and off it."""
    images, texts = features(model, probe)
    scores = images @ texts.T
    truth = torch.arange(len(probe))
    i2t = 100 * float((scores.argmax(1) == truth).float().mean())
    t2i = 100 * float((scores.argmax(0) == truth).float().mean())
    batches = random_micro_batches(len(probe))
    losses = micro_batch_losses(images, texts, batches, logit_scale)
    pairs = np.array([micro_batch_has_pair(backbone_texts, rows) for rows in batches])
    geometry = batch_geometry(texts.double().numpy(), batches)
    saturated = losses < SATURATION_LOSS
    # condition 6's measure: each probe scene against its hardest caption partner under the backbone
    pairwise = pairwise_outcomes(images.double().numpy(), texts.double().numpy(), hardest_partner(backbone_texts)[0])
    print(f"{tag}: probe R@1 {i2t:.1f} / {t2i:.1f} (pairwise vs the hardest partner "
          f"{100 * pairwise['i2t'].mean():.1f} / {100 * pairwise['t2i'].mean():.1f}); "
          f"micro-batches < {SATURATION_LOSS:g}: {saturated.mean():.2f} "
          f"(with a pair {share_with_pair(saturated, pairs)}), median InfoNCE {np.median(losses):.3g}; "
          f"captions >= 0.8 {geometry['frac_ge_0.8']:.2f}, hardest {geometry['mean_hardest']:.3f}, "
          f"hardest - mean {geometry['mean_hardest'] - geometry['mean_offdiag']:.3f}", flush=True)
    for what, data, texts in others:
        losses = micro_batch_losses(features(model, data)[0], texts, random_micro_batches(len(data)), logit_scale)
        print(f"{' ' * (len(tag) - len(tag.lstrip()))}  on {len(data)} {what}: micro-batches "
              f"< {SATURATION_LOSS:g}: {(losses < SATURATION_LOSS).mean():.2f}, median InfoNCE "
              f"{np.median(losses):.3g}", flush=True)


def fresh_image_tower(model, shape: str) -> None:
    """Replace the backbone's image tower by a randomly initialised one of ``shape``
    ("WIDTH,LAYERS,IMAGE_SIZE,PATCH"; the backbone's is 64,2,32,8), projecting to the same embedding: is
    the tower's size what holds the micro-batch loss above the threshold?"""
    try:
        width, layers, size, patch = (int(v) for v in shape.split(","))
    except ValueError:
        raise SystemExit(f"--image-tower: expected WIDTH,LAYERS,IMAGE_SIZE,PATCH, got {shape!r}") from None
    config = copy.deepcopy(model.spec["config"])
    config["vision_cfg"] = dict(config["vision_cfg"], width=width, layers=layers, image_size=size, patch_size=patch)
    model.clip.visual = build_clip(config, 2).visual  # seeded by the script's torch.manual_seed
    model.image_size = (size, size)


def rechained(scene, rng: random.Random):
    """The same scene with another relation chain: the one part of a caption its image does not fix."""
    n = len(scene.objects)
    order = rng.sample(range(n), n)
    return dataclasses.replace(scene, relations=tuple((order[k], order[k + 1]) for k in range(n - 1)))


def clustered_scenes(where, count: int, seed: int, stream: str, cluster_size: int, max_changes: int) -> list:
    """``count`` distinct slice scenes in clusters of ``cluster_size`` near-duplicates (a base scene and
    variants with 1..``max_changes`` details changed, as the benchmark's ``synthetic.cluster_size`` draws
    them), consecutive, each cluster from its own stream of ``syn.iter_scenes`` labelled ``<stream>:<seed>``
    (no split of the benchmark uses it): hard negatives that come in rare groups, so random micro-batches
    seldom hold one while every gallery does."""
    return [scene for _, _, scene in syn.iter_scenes("synthetic", f"{stream}:{seed}", count, seed, cluster_size,
                                                     max_changes, where=where)]


def pool_scenes(source: str, where, count: int, seed: int, inventory: int, other_slices: int,
                slice_share: float = 0.0) -> list:
    """The pre-stage's scenes (``--pool-source``): of the benchmark's slice ``where``, of the whole family
    (``slice_share`` of them from the slice instead, as a pool whose own scenes include some like the
    benchmark's), or an equal share of each of ``other_slices`` other slices of the same shape (``inventory``
    solid kinds on one background; ``family_slice`` seeds 100000 and up, which no benchmark uses), shuffled."""
    if source == "slice":
        return slice_scenes("synthetic", where, count, seed, "prestage-pool")
    if source == "family" and not slice_share:
        return slice_scenes("synthetic", syn.Slice(), count, seed, "prestage-pool")
    if source == "family":
        on_slice = round(count * slice_share)
        scenes = (slice_scenes("synthetic", where, on_slice, seed, "prestage-pool")
                  + slice_scenes("synthetic", syn.Slice(), count - on_slice, seed, "prestage-pool-family"))
        random.Random(seed).shuffle(scenes)
        return scenes
    shares = [count // other_slices + (k < count % other_slices) for k in range(other_slices)]
    scenes = [scene for k, share in enumerate(shares)
              for scene in slice_scenes("synthetic", syn.family_slice("synthetic", inventory, 1, 100000 + k, (7, 7),
                                                                      ["solid"]), share, seed, "prestage-pool")]
    random.Random(seed).shuffle(scenes)
    return scenes


# offsets to --slice-seed of the streams besides the pre-stage pool's: the distillation's own captions
# (--distill-source other than --pool-source) and --unseen's fresh scenes, so no two of the three share a scene
DISTILL_SEED_OFFSET, UNSEEN_SEED_OFFSET = 1, 2


def without_relations(scene):
    """The scene with no relation chain: its caption keeps only what the image fixes (each object's kind,
    size and cell)."""
    return dataclasses.replace(scene, relations=())


def without_sizes(scene):
    """The scene with every object medium-sized: its caption no longer tells sizes apart (the image still
    does), for a text tower distilled blind to a detail fine-tuning could teach it."""
    return dataclasses.replace(scene, objects=tuple(dataclasses.replace(o, size="medium") for o in scene.objects))


def ngram_targets(datasets: list[Scenes], n: int, width: int, relations: bool = True,
                  sizes: bool = True) -> tuple[int, list[float]]:
    """Give each of ``datasets`` fixed caption features in place of the text tower: the L2-normalised
    counts of its captions' word n-grams (``caption_rank.ngram_counts``, one vocabulary over all of them;
    without the relation chain unless ``relations``, every object medium-sized unless ``sizes``), projected
    onto the ``width`` leading right singular vectors of the first dataset's (the pre-stage pool's; zero
    columns where it spans fewer) and normalised again, so they have the model's embedding width. Why:
    ``caption_rank.py`` found these counts spread the slice's captions over 18 directions with the paper's
    geometry, where the backbone's text tower keeps 3-4; trained against them, does the image tower reach
    the saturation the captions allow? An n-gram the pool never uses has no direction: the features are what
    a text tower that learned from the pool could know. Returns the number of n-grams and, per dataset, the
    mean share of its rows' squared norm the projection keeps."""
    def told(scene):
        scene = scene if relations else without_relations(scene)
        return syn.describe_scene(scene if sizes else without_sizes(scene))

    counts = ngram_counts([told(s) for data in datasets for s in data.scenes], n)
    pool = counts[:len(datasets[0])]
    basis = np.linalg.svd(pool, full_matrices=False)[2][:width].T
    basis = np.pad(basis, ((0, 0), (0, width - basis.shape[1])))
    projected = counts @ basis
    kept = []
    start = 0
    for data in datasets:
        rows = projected[start:start + len(data)]
        kept.append(float((np.linalg.norm(rows, axis=1) ** 2).mean()))
        data.targets = torch.from_numpy(rows / np.linalg.norm(rows, axis=1, keepdims=True)).float()
        start += len(data)
    return counts.shape[1], kept


def towers(model) -> tuple[list, list]:
    """The image tower's weights and the text tower's (every other weight but the logit scale, which no
    stage of this probe trains)."""
    image, text = [], []
    for name, p in model.named_parameters():
        if name != "logit_scale":
            (image if name.startswith("clip.visual.") else text).append(p)
    return image, text


def distill_text_tower(model, pool: Scenes, probe: Scenes, steps: int, lr: float, batch: int) -> None:
    """Train the text tower alone, for ``steps`` steps of ``batch`` pool captions, to give each caption
    the fixed feature ``--targets ngrams`` set (loss: 1 - cosine), then print how closely it does so on the
    probe captions, which it never saw. A stand-in for a text tower with knowledge of its own: can this
    tower's shape hold the captions as their n-grams spread them?"""
    text_tower = towers(model)[1]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in text_tower:
        p.requires_grad_(True)
    optimiser = adamw(text_tower, lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, cosine_schedule(PRESTAGE_WARMUP, steps))
    rng = np.random.default_rng(2)
    order, cursor = rng.permutation(len(pool)), 0
    model.train()
    began, recent = time.time(), []
    for step in range(1, steps + 1):
        if cursor + batch > len(pool):
            order, cursor = rng.permutation(len(pool)), 0
        rows = order[cursor:cursor + batch]
        cursor += batch
        loss = 1 - (model.encode_text(pool.tokens[rows]) * pool.targets[rows]).sum(1).mean()
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(text_tower, 1.0)
        optimiser.step()
        schedule.step()
        recent.append(float(loss.detach()))
        if step % 250 == 0 or step == steps:
            print(f"  text distillation step {step}: mean 1 - cosine {np.mean(recent):.4f} over the last "
                  f"{len(recent)} steps [{time.time() - began:.0f} s]", flush=True)
            recent = []
    model.eval()
    with torch.no_grad():
        texts = torch.cat([model.encode_text(probe.tokens[k:k + 256]) for k in range(0, len(probe), 256)]).float()
    agreement = (texts * probe.targets).sum(1)
    print(f"text tower distilled for {steps} steps: cosine to its targets on the probe captions median "
          f"{float(agreement.median()):.4f}, 5th percentile {float(agreement.quantile(0.05)):.4f}", flush=True)


@torch.no_grad()
def caption_features(model, scenes) -> torch.Tensor:
    model.eval()
    return torch.cat([model.encode_text(model.tokenize([syn.describe_scene(s) for s in scenes[k:k + 256]]))
                      for k in range(0, len(scenes), 256)]).float()


def cosine_schedule(warmup: int, total: int):
    total = max(total, 1)
    return lambda step: min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(step, total) / total))


def adamw(parameters, lr: float):
    return torch.optim.AdamW(parameters, lr=lr, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.1)


def fine_tune_groups(model, lr: float, text_lr_ratio: float = 1.0) -> list[dict]:
    """AdamW parameter groups of plain fine-tuning: the image tower at ``lr``, the text tower (every other
    weight but the logit scale, which stays fixed) at ``lr * text_lr_ratio``, left out when that is 0.
    A ratio other than 1 is not the paper's recipe (one rate for every weight): a diagnostic of whether the
    text tower's drift under fine-tuning is what holds text queries back."""
    image, text = towers(model)
    groups = [{"params": image, "lr": lr}]
    if text_lr_ratio > 0:
        groups.append({"params": text, "lr": lr * text_lr_ratio})
    return groups


def plain_fine_tune(start, data: Scenes, probe: Scenes, backbone_texts, train_texts, logit_scale: float,
                    lr: float, tag: str, text_lr_ratio: float = 1.0):
    """Returns the fine-tuned copy of ``start``."""
    model = copy.deepcopy(start)
    groups = fine_tune_groups(model, lr, text_lr_ratio)
    parameters = [p for group in groups for p in group["params"]]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in parameters:
        p.requires_grad_(True)
    steps = len(data) // (MICRO_BATCH * ACCUM_STEPS)
    optimiser = adamw(groups, lr)  # each group keeps its own rate
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, cosine_schedule(FT_WARMUP, FT_EPOCHS * steps))
    rng = np.random.default_rng(0)
    epoch1, pairs = [], []
    for epoch in range(FT_EPOCHS):
        order = rng.permutation(len(data))
        model.train()
        for step in range(steps):
            optimiser.zero_grad()
            for part in range(ACCUM_STEPS):
                start_row = (step * ACCUM_STEPS + part) * MICRO_BATCH
                rows = order[start_row:start_row + MICRO_BATCH]
                out = model(data.pixels[rows], data.tokens[rows])
                loss = standard_infonce(out["image_features"], out["text_features"], logit_scale)
                (loss / ACCUM_STEPS).backward()
                if epoch == 0:
                    epoch1.append(float(loss.detach()))
                    pairs.append(micro_batch_has_pair(train_texts, rows))
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimiser.step()
            schedule.step()
    epoch1, pairs = np.array(epoch1), np.array(pairs)
    saturated = epoch1 < SATURATION_LOSS
    print(f"  {tag}: epoch-1 micro-batches < {SATURATION_LOSS:g}: {saturated.mean():.2f} of {len(epoch1)} "
          f"(with a pair {share_with_pair(saturated, pairs)}), median {np.median(epoch1):.3g}", flush=True)
    report(model, probe, backbone_texts, logit_scale, f"  {tag}, after {FT_EPOCHS} epochs")
    return model


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", type=Path, default=REPO / "results" / "backbone" / "model")
    parser.add_argument("--inventory", type=int, default=7)
    parser.add_argument("--backgrounds", type=int, default=1,
                        help="the slice's backgrounds (0: the family's all; the benchmark's: 1)")
    parser.add_argument("--patterns", nargs="+", default=["solid"], choices=syn.PATTERNS,
                        help="the slice's fill patterns (the benchmark's: solid)")
    parser.add_argument("--objects", type=int, nargs=2, default=[7, 7], metavar=("MIN", "MAX"),
                        help="objects a scene of the slice (the benchmark's: 7 7)")
    parser.add_argument("--clusters", type=int, default=1, metavar="SIZE",
                        help="draw the probe and fine-tuning scenes in clusters of SIZE near-duplicates (the "
                             "benchmark's synthetic.cluster_size; 1: independent scenes)")
    parser.add_argument("--max-changes", type=int, default=2,
                        help="--clusters: details a variant changes from its cluster's base, at most")
    parser.add_argument("--slice-seed", type=int, default=2, help="the benchmark's seed (config: synthetic.seed)")
    parser.add_argument("--pool", type=int, default=16384, help="scenes of the image-only pre-stage")
    parser.add_argument("--pool-source", choices=("slice", "family", "other-slices"), default="slice",
                        help="draw the pre-stage's scenes from the benchmark's slice; from the whole family, as "
                             "the pipeline's pretraining pool does (then the slice is seldom seen); or from "
                             "--other-slices slices of the same shape, none the benchmark's")
    parser.add_argument("--pool-slice-share", type=float, default=0.0,
                        help="--pool-source family: this share of the pool drawn from the benchmark's slice")
    parser.add_argument("--other-slices", type=int, default=32,
                        help="--pool-source other-slices: how many (family_slice seeds 100000, 100001, ...)")
    parser.add_argument("--steps", type=int, nargs="+", default=[0, 1000, 4000],
                        help="pre-stage steps at which to report (the last is the stage's length)")
    parser.add_argument("--lr", type=float, default=1e-3, help="the pre-stage's peak rate")
    parser.add_argument("--batch", type=int, default=64, help="the pre-stage's batch")
    parser.add_argument("--ft-at", type=int, nargs="*", default=[4000])
    parser.add_argument("--ft-lrs", type=float, nargs="+", default=[1e-4])
    parser.add_argument("--ft-scenes", type=int, default=1536)
    parser.add_argument("--ft-text-lr-ratio", type=float, default=1.0,
                        help="plain FT's text-tower rate as a ratio of its image-tower rate (0: frozen; the "
                             "paper's recipe: 1); a diagnostic, not a recipe")
    parser.add_argument("--probe", type=int, default=1024,
                        help="probe scenes: the gallery of the probe R@1 (the paper's DOCCI test has 5,000 images "
                             "against micro-batches of 16; the toy's test split 1,024)")
    parser.add_argument("--image-tower", default=None, metavar="WIDTH,LAYERS,IMAGE_SIZE,PATCH",
                        help="pre-stage a fresh image tower of this shape instead of the backbone's")
    parser.add_argument("--targets", choices=("tower", "ngrams"), default="tower",
                        help="what the image tower is pre-staged against: the backbone's frozen text tower, or "
                             "fixed features of the captions' word n-gram counts (fine-tuning only with "
                             "--distill-text)")
    parser.add_argument("--distill-text", type=int, default=0, metavar="STEPS",
                        help="--targets ngrams: first train the text tower for STEPS steps to give the captions "
                             "those features, then pre-stage the image tower against the distilled tower")
    parser.add_argument("--ngram", type=int, default=3, help="n of --targets ngrams")
    parser.add_argument("--ngram-relations", choices=("keep", "drop"), default="keep",
                        help="--targets ngrams: count the caption's relation chain (which its image does not "
                             "fix) or only the objects' sentences")
    parser.add_argument("--ngram-sizes", choices=("keep", "drop"), default="keep",
                        help="--targets ngrams: count the objects' sizes, or read every object as medium (a text "
                             "tower distilled blind to sizes, which the image shows and fine-tuning could teach)")
    parser.add_argument("--distill-source", choices=("slice", "family", "other-slices"), default=None,
                        help="--distill-text on captions of these scenes (as --pool-source; default: the "
                             "pre-stage's own), with the n-gram directions theirs")
    parser.add_argument("--seen", type=int, default=0,
                        help="also report the micro-batch loss on this many pre-stage scenes (seen in training)")
    parser.add_argument("--unseen", type=int, default=0,
                        help="also report it on this many fresh scenes of --pool-source (drawn apart from the "
                             "pool): whether the tower generalises off its own scenes, not only to the slice")
    args = parser.parse_args(argv)
    if not 0.0 <= args.pool_slice_share <= 1.0 or (args.pool_slice_share and args.pool_source != "family"):
        parser.error("--pool-slice-share takes a share in [0, 1], with --pool-source family")
    if args.distill_source and not args.distill_text:
        parser.error("--distill-source needs --distill-text")
    if args.unseen and args.targets == "ngrams" and not args.distill_text:
        parser.error("--unseen reads fresh scenes' captions through a text tower: with --targets ngrams it needs "
                     "--distill-text")
    if args.clusters < 1 or args.max_changes < 1:
        parser.error("--clusters and --max-changes take a count >= 1")
    if args.ft_text_lr_ratio < 0:
        parser.error("--ft-text-lr-ratio takes a ratio >= 0")
    if args.distill_text and args.targets != "ngrams":
        parser.error("--distill-text needs --targets ngrams (the features it distils)")
    if args.targets == "ngrams" and args.ft_at and not args.distill_text:
        parser.error("--targets ngrams alone has no text tower to fine-tune: pass --ft-at with no steps, "
                     "or --distill-text")
    torch.set_num_threads(2)
    torch.manual_seed(0)
    began = time.time()
    model = load_model(args.backbone)
    logit_scale = float(model.scale().detach())
    if args.image_tower:
        fresh_image_tower(model, args.image_tower)
    where = syn.family_slice("synthetic", args.inventory, args.backgrounds, args.slice_seed, tuple(args.objects),
                             args.patterns)

    def slice_draw(count: int, stream: str) -> list:
        if args.clusters > 1:
            return clustered_scenes(where, count, args.slice_seed, stream, args.clusters, args.max_changes)
        return slice_scenes("synthetic", where, count, args.slice_seed, stream)

    probe_scenes = slice_draw(args.probe, "prestage-probe")
    chains = random.Random(0)
    compared = probe_scenes[:512]
    compared_rechained = [rechained(s, chains) for s in compared]
    same = (caption_features(model, compared) * caption_features(model, compared_rechained)).sum(1)
    print(f"a scene's caption against the same scene's with another relation chain: cosine median "
          f"{float(same.median()):.4f} ({len(compared)} probe scenes)", flush=True)
    pool, probe, tuning = (Scenes(model, scenes) for scenes in
                           (pool_scenes(args.pool_source, where, args.pool, args.slice_seed, args.inventory,
                                        args.other_slices, args.pool_slice_share), probe_scenes,
                            slice_draw(args.ft_scenes, "prestage-ft")))
    # the backbone's caption features, for the near-duplicate pairs (float64 rows, as the regime reads them)
    probe_texts = features(model, probe)[1].double().numpy()
    tuning_texts = features(model, tuning)[1].double().numpy()
    text_pool = pool
    if args.distill_source and args.distill_source != args.pool_source:
        text_pool = Scenes(model, pool_scenes(args.distill_source, where, args.pool,
                                              args.slice_seed + DISTILL_SEED_OFFSET, args.inventory,
                                              args.other_slices))
    if args.targets == "ngrams":
        named = {"distillation": text_pool, "pool": pool, "probe": probe} if text_pool is not pool else \
            {"pool": pool, "probe": probe}
        grams, kept = ngram_targets(list(named.values()), args.ngram, int(model.spec["config"]["embed_dim"]),
                                    relations=args.ngram_relations == "keep", sizes=args.ngram_sizes == "keep")
        counts = ngram_counts([syn.describe_scene(s) for s in compared + compared_rechained], args.ngram)
        shares = ", ".join(f"{name} {share:.3f}" for name, share in zip(named, kept, strict=True))
        print(f"targets: word {args.ngram}-gram counts ({grams} n-grams, relations {args.ngram_relations}, "
              f"sizes {args.ngram_sizes}), "
              f"projected to {model.spec['config']['embed_dim']} dimensions (squared norm kept: {shares}); as "
              f"such counts, a full caption against its scene's with another relation chain: cosine median "
              f"{float(np.median((counts[:len(compared)] * counts[len(compared):]).sum(1))):.4f} "
              f"({len(compared)} probe scenes)",
              flush=True)
    if args.distill_text:
        distill_text_tower(model, text_pool, probe, args.distill_text, args.lr, args.batch)
        # from here on the distilled tower is the backbone's text tower
        text_pool.targets = pool.targets = probe.targets = None
        probe_texts = features(model, probe)[1].double().numpy()
        tuning_texts = features(model, tuning)[1].double().numpy()
    pool_texts = features(model, pool)[1]
    others = [("pre-stage scenes (seen)", Scenes.subset(pool, args.seen), pool_texts[:args.seen])] \
        if args.seen else []
    if args.unseen:
        fresh = Scenes(model, pool_scenes(args.pool_source, where, args.unseen,
                                          args.slice_seed + UNSEEN_SEED_OFFSET, args.inventory, args.other_slices,
                                          args.pool_slice_share))
        others.append((f"fresh {args.pool_source} scenes (unseen)", fresh, features(model, fresh)[1]))
    print(f"{len(pool)} pre-stage, {len(probe)} probe, {len(tuning)} fine-tuning scenes rendered in "
          f"{time.time() - began:.0f} s; logit scale {logit_scale:g}", flush=True)

    image_tower = towers(model)[0]
    for p in model.parameters():
        p.requires_grad_(False)
    for p in image_tower:
        p.requires_grad_(True)
    last = max(args.steps)
    optimiser = adamw(image_tower, args.lr)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, cosine_schedule(PRESTAGE_WARMUP, last))
    rng = np.random.default_rng(0)
    order, cursor = rng.permutation(len(pool)), 0
    for step in range(last + 1):
        if step in args.steps:
            report(model, probe, probe_texts, logit_scale, f"pre-stage step {step}", others)
            for lr in args.ft_lrs if step in args.ft_at else ():
                text_rate = f", text tower x{args.ft_text_lr_ratio:g}" if args.ft_text_lr_ratio != 1 else ""
                plain_fine_tune(model, tuning, probe, probe_texts, tuning_texts, logit_scale, lr,
                                f"plain FT from step {step} at lr {lr:g}{text_rate}", args.ft_text_lr_ratio)
            print(f"  [{time.time() - began:.0f} s]", flush=True)
        if step == last:
            break
        if cursor + args.batch > len(pool):
            order, cursor = rng.permutation(len(pool)), 0
        rows = order[cursor:cursor + args.batch]
        cursor += args.batch
        model.train()
        images = F.normalize(model.clip.visual(pool.pixels[rows]), dim=-1)
        loss = standard_infonce(images, pool_texts[rows], logit_scale)  # the text tower stays the backbone's
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(image_tower, 1.0)
        optimiser.step()
        schedule.step()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
