"""The regime figures of a backbone alone, before any fine-tuning: what its release card states.

The regime conditions proper (:mod:`hnclip.analysis.regime`) need the fine-tuning runs; a released backbone is
judged before them by what it brings to them: its zero-shot R@1 on each split it is scored on (validation,
test, the transfer targets), and on random micro-batches of the training split at the trainer's micro-batch
size, the caption geometry (mean, hardest, share >= 0.8, share of micro-batches holding a pair >= 0.9) and the
standard InfoNCE its own features reach at its own logit scale (median, share below the saturation threshold):
the epoch-1 saturation plain fine-tuning starts from.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["FIGURES_SEED", "backbone_figures", "micro_batch_figures"]

FIGURES_SEED = 0  # the random micro-batches' draw: the same batches for every backbone compared


def micro_batch_figures(images: np.ndarray, texts: np.ndarray, logit_scale: float, micro_batch: int,
                        n_batches: int, seed: int = FIGURES_SEED) -> dict:
    """Geometry and standard InfoNCE over ``n_batches`` random micro-batches of unit features (float64):
    ``images[k]`` is caption ``k``'s image (one row per caption, as the trainer pairs them)."""
    import torch

    from hnclip.analysis.geometry import (
        _batched_infonce,
        batch_geometry,
        effective_dimensions,
        sample_batches,
    )
    from hnclip.analysis.regime import EXTREME_COSINE, GEOMETRY_COSINE, micro_batch_has_extreme_pair
    from hnclip.dynamics_log import SATURATION_LOSS

    batches = sample_batches(len(texts), micro_batch, n_batches, seed)
    geometry = batch_geometry(texts, batches)
    rows = np.stack(batches)
    losses = _batched_infonce(torch.from_numpy(images[rows]), torch.from_numpy(texts[rows]), logit_scale).numpy()
    return {
        "micro_batch": micro_batch, "n_batches": n_batches,
        "mean_offdiag": geometry["mean_offdiag"], "mean_hardest": geometry["mean_hardest"],
        f"frac_ge_{GEOMETRY_COSINE:g}": geometry[f"frac_ge_{GEOMETRY_COSINE:g}"],
        "pair_share": float(np.mean([micro_batch_has_extreme_pair(texts, rows, EXTREME_COSINE) for rows in batches])),
        "infonce_median": float(np.median(losses)),
        "saturated_share": float(np.mean(losses < SATURATION_LOSS)),
        "effective_dimensions": effective_dimensions(texts),
    }


def backbone_figures(model_dir, train: tuple, scored: dict[str, tuple], micro_batch: int, n_batches: int,
                     device: str = "auto", caption_column: str = "caption") -> dict:
    """The figures of the backbone in ``model_dir``.

    ``train``: (manifest, image store) of the training split the runs fine-tune on; ``scored``: label
    (``<benchmark>/<split>``) -> (manifest, image store) of each split whose zero-shot R@1 is stated.
    """
    import torch

    from hnclip.evaluate import _unique_images, encode_split, recall_at_k, resolve_device
    from hnclip.models import load_model

    device = resolve_device(device)
    model = load_model(Path(model_dir)).to(device).eval()
    logit_scale = float(model.scale().detach())
    figures = {"logit_scale": logit_scale, "zeroshot": {}}
    for label, (manifest, store) in scored.items():
        images, texts = encode_split(model, manifest, store, device=device, caption_column=caption_column)
        _, text_image = _unique_images(manifest)
        metrics = recall_at_k(images, texts, ks=(1,), text_image_ids=text_image)
        figures["zeroshot"][label] = {"i2t_r1": metrics["i2t_r1"], "t2i_r1": metrics["t2i_r1"],
                                      "n_images": int(images.shape[0])}
    manifest, store = train
    images, texts = encode_split(model, manifest, store, device=device, caption_column=caption_column)
    _, text_image = _unique_images(manifest)
    images = torch.nn.functional.normalize(images[text_image].double(), dim=-1).numpy()
    texts = torch.nn.functional.normalize(texts.double(), dim=-1).numpy()
    figures["train"] = micro_batch_figures(images, texts, logit_scale, micro_batch, n_batches)
    return figures
