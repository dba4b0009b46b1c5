"""``hnclip premise`` without ``--out``: is fine-tuning in the paper's regime? Each regime figure printed beside
the paper's, with its definition, from any of three sources:

- a finished ``results/`` folder (:func:`from_results`): every run under ``DIR/runs`` classified by
  :func:`hnclip.analysis.premise.run_role` (plain InfoNCE, HN only, HN-CLIP; full data, the given gamma) and
  :func:`hnclip.analysis.premise.premise_figures` computed from their ``dynamics.csv`` / ``epochs.csv``; the
  caption geometry from ``DIR/geometry/<benchmark>.json``, the regime conditions from ``DIR/regime/``;
- a backbone on a prepared benchmark (:func:`probe_backbone`, a quick probe, no training): zero-shot
  Recall@1 on the test split, and on random micro-batches of the training split at s = 100 the share with
  standard InfoNCE < 1e-3 and the exact-zero shares of :mod:`hnclip.training.dynamics` (loss, positive-logit
  and feature gradient; the parameter gradient needs a training step, so the probe leaves it out), plus the
  caption geometry;
- regime files (``results/regime/<benchmark>.json``, written by ``hnclip regime``, :func:`print_regime`): the
  eight conditions of the paper's regime (:mod:`hnclip.analysis.regime`), each beside its target.

Toy-scale numbers on the synthetic benchmark; the paper's are Long-CLIP-L on DOCCI/DCI.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from hnclip.analysis.premise import (
    DEFINITIONS,
    PAPER,
    PAPER_GEOMETRY,
    PREMISE_KEYS,
    classify_runs,
    objective_active_min_epoch,
    premise_figures,
    premise_sources,
)
from hnclip.paths import RUNS_DIR, geometry_path, in_results, regime_path

__all__ = ["from_results", "print_figures", "print_geometry", "print_regime", "probe_backbone"]


def _fmt(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and value != 0 and (abs(value) >= 1e4 or abs(value) < 1e-2):
        return f"{value:.2e}"
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def print_figures(figures: dict, sources: dict | None = None) -> None:
    print(f"{'figure':34s} {'ours':>10s} {'paper':>10s}  definition")
    for key in PREMISE_KEYS:
        if key not in figures:
            continue
        print(f"{key:34s} {_fmt(figures[key]):>10s} {_fmt(PAPER[key]):>10s}  {DEFINITIONS[key]}")
    if sources:
        runs = sorted({run for key in figures for run in sources.get(key, [])})
        print(f"runs: {len(runs)} ({', '.join(Path(r).relative_to(Path(r).parents[4]).as_posix() for r in runs)})")


def print_geometry(name: str, geometry: dict) -> None:
    print(f"caption geometry, {name} (batches of {geometry['batch_size']}, {geometry['n_batches']} batches):")
    for key, (low, high) in PAPER_GEOMETRY.items():
        print(f"  {key:14s} ours {geometry[key]:.3f}   paper {low:.2f}-{high:.2f}")


def from_results(results: Path, gamma: float) -> None:
    run_dirs = sorted(p.parent for p in in_results(results, RUNS_DIR).rglob("summary.json"))
    roles = classify_runs(run_dirs, gamma)
    print(f"== {results}: {len(run_dirs)} runs; plain {len(roles['plain'])}, HN only {len(roles['hn'])}, "
          f"HN-CLIP {len(roles['hnclip'])} ==")
    print_figures(premise_figures(roles), premise_sources(roles))
    other = objective_active_min_epoch(roles["hn"])
    print(f"other reading of 'active' (HN objective itself >= 1e-3), min over epochs: {_fmt(other)}")
    for path in sorted(in_results(results, geometry_path("*")).parent.glob("*.json")):
        print_geometry(path.stem, json.loads(path.read_text()))
    print_regime(sorted(in_results(results, regime_path("*")).parent.glob("*.json")))


def print_regime(paths) -> None:
    from hnclip.analysis.regime import format_conditions, load_regime

    for path in paths:
        print(format_conditions(load_regime(path)))


def probe_backbone(model_dir: Path, data: Path, n_batches: int, batch: int, seed: int) -> None:
    import numpy as np
    import torch

    from hnclip.analysis.geometry import caption_geometry
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.evaluate import encode_split, recall_at_k
    from hnclip.losses import contrastive_loss
    from hnclip.models import load_model
    from hnclip.training.dynamics import EXACT_ZERO_DTYPES, SATURATION_LOSS, exact_zero_flags

    model = load_model(model_dir)
    test = recall_at_k(*encode_split(model, read_manifest(data / "test.csv"), ImageStore(data / "test_images")))
    images, texts = encode_split(model, read_manifest(data / "train.csv"), ImageStore(data / "train_images"))
    rng = np.random.default_rng(seed)
    scale = torch.tensor(100.0)
    saturated, zero = [], {}
    for _ in range(n_batches):
        rows = torch.from_numpy(rng.choice(len(images), batch, replace=False))
        saturated.append(float(contrastive_loss(images[rows], texts[rows], scale)) < SATURATION_LOSS)
        for name, dtype in EXACT_ZERO_DTYPES.items():
            for quantity, flag in exact_zero_flags(images[rows], texts[rows], scale, dtype).items():
                zero.setdefault(f"exact_zero.{quantity}.{name}", []).append(flag)
    print(f"== backbone {model_dir} on {data} (toy scale; the backbone before any fine-tuning) ==")
    print(f"zero-shot R@1 on the test split: I->T {test['i2t_r1']:.1f}  T->I {test['t2i_r1']:.1f} "
          f"(R@5 {test['i2t_r5']:.1f} / {test['t2i_r5']:.1f})")
    print(f"random training micro-batches of {batch} at s = 100 ({n_batches} batches):")
    print_figures({"saturated_share_epoch1": float(np.mean(saturated)),
                   **{k: float(np.mean(v)) for k, v in zero.items()}})
    print_geometry("training split", caption_geometry(texts.numpy(), batch, n_batches, seed))
