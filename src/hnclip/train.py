"""Fine-tune a dual encoder with the HN objective: one readable loop (nanoGPT / open_clip style).

Per optimizer step: ``accum_steps`` micro-batches, each with its own contrastive loss (the paper's
16 x 8 = 128: negatives come from the micro-batch only), each backpropagated at 1/accum_steps; then
clip, AdamW, warmup+cosine schedule, clamp of the logit scale. Around it: a per-step log of the
gradient dynamics, resumable checkpoints (bit-identical to an uninterrupted run), evaluation after
each epoch, and at the end the merged model plus a summary.

Under ``torchrun`` (several processes, one per GPU) the same loop runs data-parallel: ``micro_batch``
is the global micro-batch, split into contiguous equal shares over the ranks, and the global
contrastive term with its negatives and HN margins spans all of it (see
:mod:`hnclip.training.distributed` for what stays per process). Rank 0 alone writes files.

What differs between fine-tuning frameworks (extra modules, data, loss terms, adapters, learning
rates, evaluation score) lives behind :class:`hnclip.frameworks.base.Framework`; the loop never looks
at the framework's name.

This module is the entry: it holds the run's folders, reads the inputs and runs a session; the loop's parts
live in :mod:`hnclip.training` (runtime, inputs, objective, session, step, timing, evaluation, loop,
finish), one job each.
"""

from __future__ import annotations

import contextlib

import torch.distributed as dist

from hnclip.config.train import TrainConfig
from hnclip.progress import Progress
from hnclip.run_lock import RunLock
from hnclip.training import loop
from hnclip.training.batches import TrainingSet
from hnclip.training.distributed import join_process_group, read_launch_env
from hnclip.training.finish import finish_run
from hnclip.training.inputs import eval_splits, load_training_set, run_fingerprint
from hnclip.training.runtime import resolve_runtime
from hnclip.training.session import start_session

__all__ = ["train", "train_model"]


def train_model(cfg: TrainConfig, model, data: TrainingSet, store, out_dir, checkpoint_dir, eval_data=None,
                data_fingerprint: str | None = None, run_info: dict | None = None, products=None) -> dict:
    """Train ``model`` (a plain DualEncoder, the initial weights) on ``data``; return the summary dict.

    ``eval_data``: (manifest, ImageStore), or a list of (benchmark name, manifest, ImageStore), evaluated
    after each epoch when ``cfg.eval_every_epoch``; each row of ``epochs.csv`` names its benchmark.
    ``data_fingerprint`` identifies the training data and initial model in checkpoints (default: the
    data alone). ``products`` maps the framework's preprocessing products (e.g. ``"segments"``) to
    their files or folders. Writes ``out_dir/{dynamics.csv, epochs.csv, model/, summary.json}`` (``model/``
    holds the framework's modules too) and keeps ``checkpoint_dir/last.pt`` as ``cfg.keep_checkpoint`` says.

    Under torchrun every process calls this with the same arguments (the folders on a filesystem
    they share); ``cfg.micro_batch`` is then the global micro-batch, only rank 0 writes (and
    evaluates), and every rank returns rank 0's summary.
    """
    with _hold_run(out_dir, checkpoint_dir), _progress(cfg, out_dir) as progress:
        return _train_held(cfg, model, data, store, out_dir, checkpoint_dir, eval_data, data_fingerprint, run_info,
                           products, progress)


def _is_main_process() -> bool:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank() == 0
    return read_launch_env().is_main


def _hold_run(out_dir, checkpoint_dir):
    """One trainer per run (hnclip.run_lock): rank 0 holds the output and the checkpoint folder
    for all ranks, before any log or checkpoint is touched; the other ranks hold nothing."""
    return RunLock(out_dir, checkpoint_dir) if _is_main_process() else contextlib.nullcontext()


def _progress(cfg: TrainConfig, out_dir) -> Progress:
    """The job's progress lines on stdout (rank 0; ``cfg.progress_every`` seconds apart, 0: none)."""
    return Progress(f"hnclip train {out_dir}", cfg.progress_every if _is_main_process() else 0)


def _train_held(cfg: TrainConfig, model, data: TrainingSet, store, out_dir, checkpoint_dir, eval_data,
                data_fingerprint, run_info, products, progress: Progress | None = None) -> dict:
    """:func:`train_model` once the run's folders are held."""
    device, amp_dtype = resolve_runtime(cfg)
    context, device = join_process_group(device)
    if progress is not None:
        progress.set_phase("setting up (model, framework, checkpoint)")
    session = start_session(context, device, amp_dtype, cfg, model, data, store, out_dir, checkpoint_dir,
                            eval_data, data_fingerprint, products, progress)
    try:
        loop.run_epochs(session)
        return finish_run(session, run_info)
    finally:
        session.close_report()  # flushed, also when a step fails


def train(cfg: TrainConfig, init_model_dir, train_manifest, store_dir, out_dir, checkpoint_dir,
          subset_path=None, eval_manifest=None, eval_store_dir=None, products=None, eval_benchmark=None) -> dict:
    """Load the initial model and the data from disk, then :func:`train_model`; returns the summary.

    ``eval_manifest``, ``eval_store_dir``, ``eval_benchmark``: the test split(s) evaluated after each epoch,
    each a path (a name) or a list of them, one per split (``eval_benchmark`` names each split's rows).

    ``products``: {name: file or folder} of the framework's cached preprocessing products of
    ``train_manifest``'s benchmark split (e.g. ``{"segments": ...}`` for GOAL); their bytes enter the
    resume fingerprint, so a rebuilt product refuses a stale checkpoint.
    """
    if (eval_manifest is None) != (eval_store_dir is None):
        raise ValueError("evaluation after each epoch needs both eval_manifest and eval_store_dir, got "
                         f"eval_manifest={eval_manifest} and eval_store_dir={eval_store_dir}")
    # the run's folders are held before the data loads (a minute at paper scale), so a second trainer stops
    # at once, and the window in which none holds them yet is the interpreter's start-up alone
    with _hold_run(out_dir, checkpoint_dir), _progress(cfg, out_dir) as progress:
        return _load_and_train(cfg, init_model_dir, train_manifest, store_dir, out_dir, checkpoint_dir, subset_path,
                               eval_manifest, eval_store_dir, products, eval_benchmark, progress)


def _load_and_train(cfg: TrainConfig, init_model_dir, train_manifest, store_dir, out_dir, checkpoint_dir,
                    subset_path, eval_manifest, eval_store_dir, products, eval_benchmark,
                    progress: Progress) -> dict:
    """:func:`train` once the run's folders are held."""
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.data.subsets import read_subset
    from hnclip.models import load_model

    progress.set_phase("loading the training data")
    store = ImageStore(store_dir)
    subset_ids = read_subset(subset_path) if subset_path is not None else None
    data = load_training_set(read_manifest(train_manifest), store, cfg.caption_column, str(train_manifest),
                             subset_ids, str(subset_path))
    manifests, stores, names = eval_splits(eval_manifest, eval_store_dir, eval_benchmark)
    eval_data = None
    if manifests and cfg.eval_every_epoch:
        eval_data = [(name, read_manifest(m), ImageStore(d)) for name, m, d in zip(names, manifests, stores, strict=True)]
    fingerprint = run_fingerprint(data, init_model_dir, products)
    run_info = {"init_model_dir": str(init_model_dir), "train_manifest": str(train_manifest),
                "store_dir": str(store_dir), "subset_path": None if subset_path is None else str(subset_path),
                "eval_manifest": None if not manifests else (str(manifests[0]) if len(manifests) == 1
                                                             else [str(m) for m in manifests]),
                **({"products": {k: str(v) for k, v in products.items()}} if products else {})}
    return _train_held(cfg, load_model(init_model_dir), data, store, out_dir, checkpoint_dir, eval_data,
                       fingerprint, run_info, products, progress)
