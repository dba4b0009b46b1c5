"""Retrieval evaluation: encode a split once, score cosines, Recall@K in both directions.

Scores are computed in row chunks, so memory is ``chunk x N`` rather than ``N x N`` (a 100k-caption
gallery would need 40 GB for the full float32 matrix). Ranks count strictly higher scores only: a
target tied with others ranks first among them. This is deterministic and independent of the order of
the gallery, but optimistic for degenerate models whose scores are all equal (they score 100%).

A fine-tuning framework with its own score (FineLIP: a blend of global cosine and a token-level
similarity) goes through :func:`recall_at_k_from_scores`, which takes a score function over rows
instead of features; everything else is scored with :func:`recall_at_k` on the global features.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from hnclip.fileio import write_json_atomic

__all__ = ["GOAL_KS", "PAPER_KS", "RECORDED_KS", "check_store_matches_model", "encode_split",
           "encode_split_with_framework", "evaluate_checkpoint", "evaluate_model", "mean_caption_words",
           "recall_at_k", "recall_at_k_from_scores", "resolve_device"]


# Recall@K cut-offs: the paper's (and Long-CLIP's) R@1/5/10; GOAL's released evaluation reports
# R@1/5/25/50 (PerceptualAI-Lab/GOAL retrieval_goal.py). Both come from one ranking.
PAPER_KS = (1, 5, 10)
GOAL_KS = (1, 5, 25, 50)
RECORDED_KS = tuple(sorted(set(PAPER_KS) | set(GOAL_KS)))


def mean_caption_words(captions) -> float:
    """Mean number of whitespace-separated words per caption (the paper's D.1 reports 107-134)."""
    counts = [len(str(c).split()) for c in captions]
    return float(np.mean(counts)) if counts else 0.0


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    if device is None or str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def recall_at_k(image_features: torch.Tensor, text_features: torch.Tensor, ks=(1, 5, 10),
                text_image_ids: torch.Tensor | None = None, chunk_size: int = 1024,
                return_ranks: bool = False) -> dict[str, float]:
    """Recall@K in percent, keys ``i2t_r{k}`` and ``t2i_r{k}``, from L2-normalised features.

    ``text_image_ids[t]`` is the index of caption t's image (default: caption i belongs to image i).
    Image->text: an image is a hit at k if any of its captions ranks in its top k, i.e. if fewer than k
    captions score strictly higher than its best-scoring own caption. Text->image: a caption is a hit at
    k if fewer than k images score strictly higher than its own image. ``return_ranks`` adds the
    per-query outcomes under ``ranks`` (see :func:`_recall_metrics`).
    """
    n_images, n_texts = image_features.shape[0], text_features.shape[0]
    device = image_features.device
    text_features = text_features.to(device=device, dtype=image_features.dtype)
    text_image_ids, ks = _check_pairs(n_images, n_texts, text_image_ids, ks, device)

    i2t_ranks = torch.empty(n_images, dtype=torch.long, device=device)
    neg_inf = torch.finfo(image_features.dtype).min
    for start in range(0, n_images, chunk_size):
        scores = image_features[start:start + chunk_size] @ text_features.T  # [c, n_texts]
        own = text_image_ids[None, :] == torch.arange(start, start + scores.shape[0], device=device)[:, None]
        best_own = scores.masked_fill(~own, neg_inf).max(dim=1, keepdim=True).values
        i2t_ranks[start:start + scores.shape[0]] = (scores > best_own).sum(dim=1)

    t2i_ranks = torch.empty(n_texts, dtype=torch.long, device=device)
    for start in range(0, n_texts, chunk_size):
        scores = text_features[start:start + chunk_size] @ image_features.T  # [c, n_images]
        targets = text_image_ids[start:start + scores.shape[0]]
        positive = scores.gather(1, targets[:, None])
        t2i_ranks[start:start + scores.shape[0]] = (scores > positive).sum(dim=1)

    return _recall_metrics(i2t_ranks, t2i_ranks, ks, return_ranks, text_image_ids)


def _check_pairs(n_images: int, n_texts: int, text_image_ids, ks, device) -> tuple[torch.Tensor, list[int]]:
    """Validated (text_image_ids on ``device``, sorted distinct ks)."""
    if text_image_ids is None:
        if n_images != n_texts:
            raise ValueError(f"{n_images} images but {n_texts} captions: pass text_image_ids to pair them")
        text_image_ids = torch.arange(n_texts, device=device)
    text_image_ids = torch.as_tensor(text_image_ids, dtype=torch.long).to(device)
    if text_image_ids.shape != (n_texts,):
        raise ValueError(f"text_image_ids has shape {tuple(text_image_ids.shape)}, expected ({n_texts},)")
    if n_texts and (text_image_ids.min() < 0 or text_image_ids.max() >= n_images):
        raise ValueError(f"text_image_ids must lie in [0, {n_images}); got range "
                         f"[{int(text_image_ids.min())}, {int(text_image_ids.max())}]")
    captions_per_image = torch.bincount(text_image_ids, minlength=n_images)
    if (captions_per_image == 0).any():
        missing = int(torch.nonzero(captions_per_image == 0)[0])
        raise ValueError(f"image {missing} has no caption: image->text recall is undefined for it")
    ks = sorted({int(k) for k in ks})
    if not ks or ks[0] < 1:
        raise ValueError(f"ks must be positive integers, got {ks}")
    return text_image_ids, ks


def _recall_metrics(i2t_ranks: torch.Tensor, t2i_ranks: torch.Tensor, ks: list[int], return_ranks: bool = False,
                    text_image_ids: torch.Tensor | None = None) -> dict:
    """Recall@K in percent; with ``return_ranks`` also ``ranks``: each image's rank of its best own caption
    (``i2t``), each caption's rank of its image (``t2i``) and each caption's image index (``text_image``),
    as lists of ints, so that any Recall@K can be recomputed and resampled without encoding again
    (:mod:`hnclip.analysis.bootstrap`)."""
    metrics = {}
    for k in ks:
        metrics[f"i2t_r{k}"] = 100.0 * (i2t_ranks < k).double().mean().item()
    for k in ks:
        metrics[f"t2i_r{k}"] = 100.0 * (t2i_ranks < k).double().mean().item()
    if return_ranks:
        metrics["ranks"] = {"i2t": i2t_ranks.cpu().tolist(), "t2i": t2i_ranks.cpu().tolist(),
                            "text_image": text_image_ids.cpu().tolist()}
    return metrics


def recall_at_k_from_scores(score, n_images: int, n_texts: int, ks=(1, 5, 10), text_image_ids=None,
                            chunk_size: int = 256, device=None, return_ranks: bool = False) -> dict[str, float]:
    """Recall@K (same keys, semantics and tie rule as :func:`recall_at_k`) from a score function.

    ``score(image_rows, text_rows)`` takes two LongTensors of row indices and returns their
    [len(image_rows), len(text_rows)] scores; it must be row-wise (a pair's score independent of the
    other rows). Cost: one pass over ``chunk_size`` image rows x all captions, plus each caption's
    score with its own image (``chunk_size`` x ``chunk_size`` blocks, of which the diagonal is kept).
    A caption's own image never counts against it, even if its score, computed in another block,
    differs in the last bits.
    """
    device = torch.device("cpu") if device is None else torch.device(device)
    text_image_ids, ks = _check_pairs(n_images, n_texts, text_image_ids, ks, device)
    all_texts = torch.arange(n_texts, device=device)
    positives = torch.empty(n_texts, device=device)
    for start in range(0, n_texts, chunk_size):
        rows = all_texts[start:start + chunk_size]
        positives[start:start + len(rows)] = score(text_image_ids[rows], rows).diagonal().to(device)

    i2t_ranks = torch.empty(n_images, dtype=torch.long, device=device)
    t2i_ranks = torch.zeros(n_texts, dtype=torch.long, device=device)
    for start in tqdm(range(0, n_images, chunk_size), desc="score", leave=False):
        rows = torch.arange(start, min(start + chunk_size, n_images), device=device)
        scores = score(rows, all_texts).to(device=device, dtype=positives.dtype)  # [c, n_texts]
        own = text_image_ids[None, :] == rows[:, None]
        best_own = scores.masked_fill(~own, float("-inf")).max(dim=1, keepdim=True).values
        i2t_ranks[start:start + len(rows)] = (scores > best_own).sum(dim=1)
        t2i_ranks += ((scores > positives[None, :]) & ~own).sum(dim=0)
    return _recall_metrics(i2t_ranks, t2i_ranks, ks, return_ranks, text_image_ids)


def _unique_images(manifest) -> tuple[list[str], torch.Tensor]:
    """Distinct image ids in first-appearance order, and each caption row's index into them."""
    index: dict[str, int] = {}
    text_image_ids = [index.setdefault(str(image_id), len(index)) for image_id in manifest["image_id"]]
    return list(index), torch.tensor(text_image_ids, dtype=torch.long)


def _store_rows(store, image_ids: list[str], where) -> np.ndarray:
    rows = []
    for image_id in image_ids:
        try:
            rows.append(store.row(image_id))
        except KeyError:
            raise KeyError(f"image_id {image_id!r} of {where} is not in the image store") from None
    return np.asarray(rows, dtype=np.int64)


def check_store_matches_model(store, model, where) -> None:
    """Refuse a store prepared at another resolution (the model would run on a wrongly sized patch grid) or
    resized with another interpolation than the model's own preprocessing (a converted open_clip or
    transformers model that resizes bilinearly would be scored on pixels it never saw)."""
    size = getattr(store, "image_size", None)
    expected = tuple(int(v) for v in np.atleast_1d(model.image_size))
    if len(expected) == 1:
        expected = expected * 2
    if size is not None and (int(size), int(size)) != expected:
        raise ValueError(f"image store {where} holds {size}x{size} images but the model expects "
                         f"{expected[0]}x{expected[1]}; prepare the store at the model's image size")
    resample, wanted = getattr(store, "resample", "bicubic"), getattr(model, "interpolation", "bicubic")
    if resample != wanted:
        raise ValueError(f"image store {where} was resized {resample}, but the model's preprocessing resizes "
                         f"{wanted} (its model.json preprocess_cfg.interpolation); build the store with "
                         f"`hnclip store --model` for this model")


def tokenize_captions(model, manifest, caption_column: str = "caption") -> torch.Tensor:
    """Token ids [N_texts, context_length] of a split's captions, one row per manifest row: what
    :func:`evaluate_model` takes as ``tokens`` so that a caller evaluating the same split again (the
    training loop, after every epoch) tokenises it once. The same ids as tokenising batch by batch."""
    return model.tokenize([str(c) for c in manifest[caption_column]])


def _by_length(model, captions: list[str], tokens: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(the captions' tokens, the row order that batches them by length, shortest first).

    The text tower runs every caption of a batch up to the batch's longest (:meth:`DualEncoder._encode_text`),
    so batches of similar lengths skip most of the padding: a quarter of the text tower's work on the
    toy's dense captions. Rows never interact, so each caption's features are the same in any batch.
    """
    if tokens is None:
        tokens = model.tokenize(captions)
    lengths = tokens.argmax(dim=-1)  # EOT, the largest id, ends each caption
    return tokens, torch.argsort(lengths, stable=True)


def _in_manifest_order(rows: torch.Tensor, order: torch.Tensor) -> torch.Tensor:
    """``rows`` computed in ``order`` put back in manifest order."""
    restored = torch.empty_like(rows)
    restored[order] = rows
    return restored


def _check_tokens(tokens: torch.Tensor | None, n_captions: int) -> None:
    if tokens is not None and len(tokens) != n_captions:
        raise ValueError(f"tokens has {len(tokens)} rows, the evaluation manifest {n_captions} captions")


@torch.no_grad()
def encode_split(model, manifest, store, batch_size: int = 64, device=None, caption_column: str = "caption",
                 tokens: torch.Tensor | None = None):
    """(image_features [N_images, D], text_features [N_texts, D]): normalised float32, on the CPU.

    Images are encoded once per distinct ``image_id`` (first-appearance order), captions once per row.
    Encoding runs in fp32 with the model in eval mode (restored afterwards): retrieval ranks among
    near-duplicate dense captions move with bf16 rounding. ``tokens``: the captions already tokenised
    (:func:`tokenize_captions`); None tokenises them here.
    """
    from hnclip.data.image_store import to_model_input

    device = resolve_device(device) if device is not None else next(model.parameters()).device
    image_ids, _ = _unique_images(manifest)
    rows = _store_rows(store, image_ids, "the evaluation manifest")
    check_store_matches_model(store, model, getattr(store, "root", store))
    captions = [str(c) for c in manifest[caption_column]]
    _check_tokens(tokens, len(captions))
    tokens, order = _by_length(model, captions, tokens)
    was_training = model.training
    model.eval()
    try:
        image_chunks, text_chunks = [], []
        for start in tqdm(range(0, len(rows), batch_size), desc="encode images", leave=False):
            pixels = to_model_input(store.read(rows[start:start + batch_size]), model.image_mean, model.image_std)
            image_chunks.append(model.encode_image(pixels.to(device)).float().cpu())
        for start in tqdm(range(0, len(captions), batch_size), desc="encode captions", leave=False):
            batch = tokens[order[start:start + batch_size]]
            text_chunks.append(model.encode_text(batch.to(device)).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(image_chunks), _in_manifest_order(torch.cat(text_chunks), order)


@torch.no_grad()
def encode_split_with_framework(framework, model, manifest, store, batch_size: int = 64, device=None,
                                caption_column: str = "caption", tokens: torch.Tensor | None = None
                                ) -> tuple[dict, dict]:
    """Like :func:`encode_split`, through ``framework.encode_images/encode_texts``: two dicts of float32
    CPU tensors (images, resp. captions, on dim 0). Model and framework run in eval mode, fp32."""
    from hnclip.data.image_store import to_model_input

    device = resolve_device(device) if device is not None else next(model.parameters()).device
    image_ids, _ = _unique_images(manifest)
    rows = _store_rows(store, image_ids, "the evaluation manifest")
    check_store_matches_model(store, model, getattr(store, "root", store))
    captions = [str(c) for c in manifest[caption_column]]
    _check_tokens(tokens, len(captions))
    tokens, order = _by_length(model, captions, tokens)
    modes = (model.training, framework.training)
    model.eval()
    framework.eval()
    try:
        image_parts, text_parts = [], []
        for start in tqdm(range(0, len(rows), batch_size), desc="encode images", leave=False):
            pixels = to_model_input(store.read(rows[start:start + batch_size]), model.image_mean, model.image_std)
            part = framework.encode_images(model, pixels.to(device))
            image_parts.append({k: v.float().cpu() for k, v in part.items()})
        for start in tqdm(range(0, len(captions), batch_size), desc="encode captions", leave=False):
            part = framework.encode_texts(model, tokens[order[start:start + batch_size]].to(device))
            text_parts.append({k: v.float().cpu() for k, v in part.items()})
    finally:
        model.train(modes[0])
        framework.train(modes[1])
    return ({k: torch.cat([p[k] for p in image_parts]) for k in image_parts[0]},
            {k: _in_manifest_order(torch.cat([p[k] for p in text_parts]), order) for k in text_parts[0]})


def evaluate_model(model, manifest, store, batch_size: int = 64, device=None, ks=(1, 5, 10),
                   caption_column: str = "caption", framework=None, score_chunk: int = 64,
                   return_ranks: bool = False, tokens: torch.Tensor | None = None) -> dict[str, float]:
    """Recall@K of ``model`` on a manifest split (several captions per image allowed); ``return_ranks``
    adds the per-query ranks (key ``ranks``, see :func:`_recall_metrics`). ``tokens``: the split's
    captions tokenised once (:func:`tokenize_captions`), for a caller that evaluates it again.

    With a ``framework`` whose ``has_score`` is set, ranks come from its score (in ``score_chunk``
    image rows at a time); otherwise from the cosine of the global features.
    """
    _, text_image_ids = _unique_images(manifest)
    score_device = resolve_device(device) if device is not None else next(model.parameters()).device
    if framework is None or not framework.has_score:
        image_features, text_features = encode_split(model, manifest, store, batch_size, device, caption_column,
                                                     tokens)
        return recall_at_k(image_features.to(score_device), text_features.to(score_device), ks,
                           text_image_ids.to(score_device), return_ranks=return_ranks)
    images, texts = encode_split_with_framework(framework, model, manifest, store, batch_size, device,
                                                caption_column, tokens)
    images = {k: v.to(score_device) for k, v in images.items()}
    texts = {k: v.to(score_device) for k, v in texts.items()}

    @torch.no_grad()
    def score(image_rows, text_rows):
        return framework.score({k: v[image_rows] for k, v in images.items()},
                               {k: v[text_rows] for k, v in texts.items()})

    n_images = next(iter(images.values())).shape[0]
    return recall_at_k_from_scores(score, n_images, len(manifest), ks, text_image_ids.to(score_device),
                                   score_chunk, score_device, return_ranks)


def evaluate_checkpoint(model_dir, manifest_path, store_dir, out_json, run_info: dict, eval_benchmark: str,
                        batch_size: int = 64, device="auto", ks=PAPER_KS, split: str = "test") -> dict:
    """Evaluate a saved model on a test split and write the result JSON (returned as a dict too).

    The framework saved beside the model (its modules and score, e.g. FineLIP's) is loaded with it;
    a model saved without one is scored by the cosine of its global features. ``ks`` are the Recall@K
    cut-offs (one ranking serves them all: ``RECORDED_KS`` gives the paper's R@1/5/10 and GOAL's
    R@25/50 at no extra cost); ``split`` names the protocol split recorded (``test``, or an adapter's
    test variant such as DOCCI's ``test_goal``).
    """
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.framework_loading import load_framework
    from hnclip.models import load_model
    from hnclip.models.tokenizer import truncation

    started = time.perf_counter()
    device = resolve_device(device)
    model = load_model(model_dir)
    framework = load_framework(model_dir, model)
    model = model.to(device)
    if framework is not None:
        framework = framework.to(device)
    manifest = read_manifest(manifest_path)
    store = ImageStore(store_dir)
    image_ids, _ = _unique_images(manifest)
    metrics = evaluate_model(model, manifest, store, batch_size, device, ks=ks, framework=framework,
                             return_ranks=True)
    ranks = metrics.pop("ranks")
    result = {
        "run": run_info,
        "eval_benchmark": eval_benchmark,
        "split": split,
        "n_images": len(image_ids),
        "n_texts": len(manifest),
        "mean_caption_words": mean_caption_words(manifest["caption"]),
        # {count, captions, share, context_length, longest}: the test captions the text tower cut (scored on
        # their first tokens only, without an error); the report's sizes show the count
        "captions_truncated": truncation(list(manifest["caption"]), model.context_length),
        "ks": sorted({int(k) for k in ks}),
        "metrics": metrics,
        "wall_time_s": time.perf_counter() - started,
        # per-query outcomes: every table and claim resamples these for its intervals, without encoding again
        "ranks": ranks,
    }
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_json, result)
    return result
