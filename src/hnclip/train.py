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
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import random
import resource
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from tqdm import tqdm

from hnclip import cpu_kernels
from hnclip.config.train import TrainConfig
from hnclip.dynamics_log import MICRO_BATCH_INFONCE, format_micro_batch_losses
from hnclip.fileio import write_json_atomic
from hnclip.frameworks import build_framework, save_framework
from hnclip.frameworks.base import Batch, Framework
from hnclip.hashing import fingerprint_files, fingerprint_tree, sha256_file
from hnclip.losses import HNClipLoss
from hnclip.models.tokenizer import describe_truncation, truncation
from hnclip.progress import Progress
from hnclip.provenance import git_commit
from hnclip.run_lock import RunLock
from hnclip.training.batches import MicroBatchImages, TrainingSet, epoch_order
from hnclip.training.checkpoint import Resumable, RunCheckpoint, TrainState
from hnclip.training.distributed import (
    DistributedContext,
    all_reduce_probe,
    join_process_group,
    rank_seed,
    read_launch_env,
    sync_gradients,
    wrap_data_parallel,
)
from hnclip.training.dynamics import DYNAMICS_COLUMNS, GradientProbe, sparse_embeddings, step_saturation
from hnclip.training.logs import CsvLog
from hnclip.training.report_to import RunReport, open_report
from hnclip.training.schedule import build_optimizer, build_scheduler, describe_recipe

__all__ = ["EPOCH_COLUMNS", "TrainState", "compute_objective", "load_training_set", "train", "train_model"]

log = logging.getLogger(__name__)

# ``benchmark``: which test split the row scores (a run may be evaluated on several after each epoch: DOCCI's
# runs on DOCCI and Long-DCI); empty in logs written before the column, which scored one split
EPOCH_COLUMNS = ("epoch", "step", "i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "benchmark")
# per-query outcomes of each epoch's evaluation (space-separated ranks), which the per-epoch claims resample
EPOCH_RANK_COLUMNS = ("epoch", "i2t", "t2i", "text_image", "benchmark")
MAX_LOG_LOGIT_SCALE = math.log(100.0)  # CLIP's cap on the temperature multiplier
# the dynamics' reference: plain InfoNCE on the global features (no margin, no smoothing), the quantity
# whose saturation the paper diagnoses; over the global micro-batch under torchrun
STANDARD_INFONCE = HNClipLoss(gamma=0.0)


# --------------------------------------------------------------------------------------- setup helpers
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def resolve_runtime(cfg: TrainConfig) -> tuple[torch.device, torch.dtype | None]:
    """(device, autocast dtype or None). ``fp16`` autocasts to float16 on any device (torch runs it on
    the CPU too); its gradient scaler is :func:`grad_scaler`'s."""
    if cfg.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        if cfg.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("TrainConfig.device='cuda' but no CUDA device is visible")
        device = torch.device(cfg.device)
    if cfg.precision == "bf16" and device.type != "cuda":
        raise ValueError(f"TrainConfig.precision='bf16' needs CUDA, but training runs on {device}")
    if cfg.precision == "fp16":
        return device, torch.float16
    use_bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and device.type == "cuda")
    return device, (torch.bfloat16 if use_bf16 else None)


def grad_scaler(cfg: TrainConfig, device: torch.device) -> torch.amp.GradScaler | None:
    """float16's gradient scaler (open_clip's ``--precision amp``): the loss is multiplied by a scale before
    backward so small gradients survive float16, ``.grad`` divided by it before clipping, and a step whose
    gradients overflowed is skipped with the scale halved (doubled again after 2,000 clean steps). None
    for the other precisions: bf16 has float32's exponent range and needs none."""
    return torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None


def configure_determinism(device: torch.device) -> None:
    """Make CUDA kernels repeatable, which bit-identical resume needs (CPU kernels already are).

    Costs some speed (deterministic index/scatter backward, no cuDNN autotuning). cuBLAS reads its
    workspace setting when its handle is created, so this must run before the first CUDA matmul.
    """
    if device.type != "cuda":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)


def load_training_set(manifest, store, caption_column: str, where: str, subset_ids=None,
                      subset_where: str = "") -> TrainingSet:
    """The manifest's rows (restricted to ``subset_ids``, manifest order kept) with their store rows.

    The kept manifest rows travel along (``TrainingSet.manifest``) for frameworks reading other columns.
    """
    if caption_column not in manifest.columns:
        raise ValueError(f"manifest {where} has no caption column {caption_column!r} (TrainConfig.caption_column); "
                         f"columns: {list(manifest.columns)}")
    image_ids = [str(i) for i in manifest["image_id"]]
    captions = [str(c) for c in manifest[caption_column]]
    keep = list(range(len(image_ids)))
    if subset_ids is not None:
        wanted = set(subset_ids)
        missing = wanted.difference(image_ids)
        if missing:
            raise ValueError(f"subset {subset_where} names image_id {sorted(missing)[0]!r} "
                             f"({len(missing)} in all) that manifest {where} does not have")
        keep = [i for i, image_id in enumerate(image_ids) if image_id in wanted]
        image_ids, captions = [image_ids[i] for i in keep], [captions[i] for i in keep]
    for image_id, caption in zip(image_ids, captions, strict=True):
        if not caption.strip():
            raise ValueError(f"manifest {where}: image_id {image_id!r} has an empty {caption_column!r}")
    rows = []
    for image_id in image_ids:
        try:
            rows.append(store.row(image_id))
        except KeyError:
            raise KeyError(f"image_id {image_id!r} of manifest {where} is not in the image store "
                           f"{getattr(store, 'root', store)}") from None
    return TrainingSet(image_ids, captions, np.asarray(rows, dtype=np.int64),
                       manifest=manifest.iloc[keep].reset_index(drop=True))


@torch.no_grad()
def encode_captions(model, tokens: torch.Tensor, device, amp_dtype, batch_size: int = 64) -> torch.Tensor:
    """Normalised float32 text features [N, D] of ``tokens``: the frozen-margin source, computed once."""
    was_training = model.training
    model.eval()
    chunks = []
    for start in tqdm(range(0, len(tokens), batch_size), desc="frozen margin features", leave=False):
        with _autocast(device, amp_dtype):
            chunks.append(model.encode_text(tokens[start:start + batch_size].to(device)).float())
    model.train(was_training)
    return torch.cat(chunks)


def _autocast(device, amp_dtype):
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def compute_objective(out: dict, cfg: TrainConfig, margin_features=None, standard_with_grad: bool = False,
                      framework: Framework | None = None, batch: Batch | None = None):
    """(trained objective, standard InfoNCE) of one micro-batch from the framework's outputs ``out``.

    The trained objective is the sum of ``framework.loss_terms`` (default framework: the global term,
    HN when gamma > 0, plus the token term), computed in float32 outside autocast. The standard value
    is plain InfoNCE on the global features (no margin, no label smoothing): the trained objective
    itself when the two coincide (only a global term, gamma = 0, no smoothing), else computed
    alongside, with a graph only if asked for. Under data parallelism both span the global
    micro-batch (every rank must call this: it gathers).
    """
    framework = framework if framework is not None else Framework(cfg)
    terms = framework.loss_terms(out, batch, margin_features)
    loss = sum(terms.values())
    if list(terms) == ["global"] and cfg.gamma == 0 and cfg.label_smoothing == 0:
        return loss, loss
    images, texts, scale = out["image_features"].float(), out["text_features"].float(), out["logit_scale"].float()
    if standard_with_grad:
        return loss, STANDARD_INFONCE.global_loss(images, texts, scale)
    with torch.no_grad():
        return loss, STANDARD_INFONCE.global_loss(images.detach(), texts.detach(), scale.detach())


def probes_step(cfg: TrainConfig, step: int) -> bool:
    """Whether the optimizer step after ``step`` done runs the gradient probe: steps 1, 1 + k, 1 + 2k, ...
    with k = ``dynamics_every``, in a run with ``dynamics_probe`` on."""
    return bool(cfg.dynamics_probe and cfg.dynamics_every and step % cfg.dynamics_every == 0)


def _clamp_logit_scale(model) -> None:
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.split(".")[-1] == "logit_scale":
                param.clamp_(max=MAX_LOG_LOGIT_SCALE)


def _peak_memory_mb(device: torch.device) -> float:
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


class _TrainStep(nn.Module):
    """One micro-batch's forward and objective, over the model and the framework's modules together.

    One module so that DistributedDataParallel covers every trainable parameter (the framework's own
    modules too) and a framework's several forward passes per micro-batch (short captions, crops,
    edge maps) run inside one DDP forward. On a single process it is called directly.
    """

    def __init__(self, model: nn.Module, framework: Framework, cfg: TrainConfig, device: torch.device,
                 amp_dtype: torch.dtype | None):
        super().__init__()
        self.model, self.framework = model, framework
        self.cfg, self.device, self.amp_dtype = cfg, device, amp_dtype

    def forward(self, batch: Batch, margin_features, standard_with_grad: bool):
        with _autocast(self.device, self.amp_dtype):
            out = self.framework.encode(self.model, batch)
        loss, standard = compute_objective(out, self.cfg, margin_features, standard_with_grad=standard_with_grad,
                                           framework=self.framework, batch=batch)
        # detached features feed the probe's exact-zero measurements (hnclip.training.dynamics)
        features = (out["image_features"].detach(), out["text_features"].detach(), out["logit_scale"].detach())
        return loss, standard, out["logit_scale"].detach(), features


@dataclass
class _Session:
    """One training session's run: settings, data, the live objects, where it stands and where it writes."""

    cfg: TrainConfig
    context: DistributedContext
    device: torch.device
    amp_dtype: torch.dtype | None
    data: TrainingSet
    store: object
    eval_data: list[tuple] | None  # (benchmark name or None, manifest, ImageStore) per evaluated split
    out_dir: Path
    fingerprint: str
    steps_per_epoch: int
    total_steps: int
    parts: Resumable
    checkpoint: RunCheckpoint
    state: TrainState
    started: float  # perf_counter at the session's start
    base_wall_time: float = 0.0  # wall time of the run's earlier sessions
    # each evaluated split's caption token ids, tokenised at the first evaluation and kept for the others
    eval_tokens: dict = field(default_factory=dict)
    steps_this_session: int = 0  # the first step of a session (warm-up, allocation) is not timed
    progress: Progress | None = None  # the job's progress lines (hnclip.progress)
    report: RunReport | None = None  # TensorBoard / W&B (TrainConfig.report_to), rank 0 only

    def __post_init__(self):
        # what the optimizer trains, in a fixed order (gradient clipping, the dynamics probe)
        self.params = [p for module in (self.parts.model, self.parts.framework) for p in module.parameters()
                       if p.requires_grad]
        # tables the gradient probe handles by their looked-up rows (a single process only: under
        # torchrun each rank looks up other rows)
        self.embeddings = ([] if self.context.is_distributed
                           else sparse_embeddings((self.parts.model, self.parts.framework), self.params))

    @property
    def shown(self) -> Progress:
        """The progress lines, or a silent stand-in where the caller gave none."""
        if self.progress is None:
            self.progress = Progress(f"hnclip train {self.out_dir}", 0)
        return self.progress

    def close_report(self) -> None:
        if self.report is not None:
            self.report.close()
            self.report = None

    def wall_time(self) -> float:
        """Seconds of the run over all its sessions, up to now."""
        return self.base_wall_time + time.perf_counter() - self.started

    def save(self) -> None:
        self.state.wall_time_s = self.wall_time()
        self.checkpoint.save(self.state, self.parts, self.state.step >= self.total_steps, self.cfg.accum_steps)


# ------------------------------------------------------------------------------------------- the loop
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
    session = _start_session(context, device, amp_dtype, cfg, model, data, store, out_dir, checkpoint_dir,
                             eval_data, data_fingerprint, products, progress)
    try:
        _run_epochs(session)
        return _finish_run(session, run_info)
    finally:
        session.close_report()  # flushed, also when a step fails


def _start_session(context: DistributedContext, device: torch.device, amp_dtype, cfg: TrainConfig, model,
                   data: TrainingSet, store, out_dir, checkpoint_dir, eval_data, data_fingerprint,
                   products, progress: Progress | None = None) -> _Session:
    """Everything up to the first step: the framework, its data, the optimizer, and a checkpoint resumed.

    The order of what draws random numbers is fixed (new modules, adapters, then the RNG streams of a
    resumed run), so that a resumed run continues bit for bit.
    """
    from hnclip.evaluate import check_store_matches_model

    started = time.perf_counter()
    out_dir = Path(out_dir)
    if context.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    configure_determinism(device)
    seed_everything(cfg.seed)  # the same on every rank: new modules start identical

    context.local_batch(cfg.micro_batch)  # refuses a global micro-batch that does not split evenly
    steps_per_epoch = len(data) // cfg.effective_batch  # the last incomplete effective batch is dropped
    if steps_per_epoch == 0:
        raise ValueError(f"the training set has {len(data)} samples, fewer than one effective batch "
                         f"(micro_batch {cfg.micro_batch} x accum_steps {cfg.accum_steps})")
    total_steps = cfg.epochs * steps_per_epoch
    if cfg.max_steps:
        total_steps = min(total_steps, cfg.max_steps)
    fingerprint = data_fingerprint or data.fingerprint()
    check_store_matches_model(store, model, getattr(store, "root", store))
    checkpoint = RunCheckpoint(checkpoint_dir, cfg.to_dict(), cfg.config_hash(), fingerprint, context,
                               cfg.keep_checkpoint)
    payload = checkpoint.read()  # every rank reads it (weights, its own RNG stream)

    model = model.to(device)
    # new modules draw their initial weights here, from the run's seed (resume overwrites them below)
    framework = build_framework(cfg, model).to(device)
    _prepare_framework(framework, cfg, data, model, products)
    margin_features = None
    if cfg.margin == "frozen" and cfg.gamma > 0:
        if payload is not None:
            margin_features = payload["margin_features"].to(device)
        else:  # from the initial weights, before any adapter or update
            # every rank encodes every caption (no extra wall time); rank 0's copy makes G bit-identical
            # across ranks even where kernels differ between devices
            margin_features = context.broadcast_(encode_captions(model, data.tokens, device, amp_dtype))
    # on the DualEncoder, before an adapter wrapper hides its method; the towers keep the flag when wrapped
    model.set_grad_checkpointing(cfg.grad_checkpointing)
    model = framework.wrap_model(model).to(device)
    model.train()
    framework.train()
    optimizer = build_optimizer(framework.param_groups(model), cfg)
    logs = {"dynamics": CsvLog(out_dir / "dynamics.csv", DYNAMICS_COLUMNS),
            "epochs": CsvLog(out_dir / "epochs.csv", EPOCH_COLUMNS),
            "epoch_ranks": CsvLog(out_dir / "epoch_ranks.csv", EPOCH_RANK_COLUMNS)}
    parts = Resumable(model, framework, optimizer, build_scheduler(optimizer, cfg, total_steps), logs,
                      margin_features, grad_scaler(cfg, device))
    if payload is None:
        state = TrainState()
        if context.is_main:
            for csv_log in logs.values():
                csv_log.start()
        if context.is_distributed:  # a dropout stream per rank; identical streams would repeat masks
            seed_everything(rank_seed(cfg.seed, context.rank))
    else:
        state = checkpoint.restore(payload, parts)  # last: nothing from here to the loop draws numbers
        log.info("resuming %s at step %d/%d (epoch %d, batch %d)", checkpoint.path, state.step, total_steps,
                 state.epoch + 1, state.batch_in_epoch)
    if isinstance(eval_data, tuple):  # one split, unnamed
        eval_data = [(None, *eval_data)]
    report = None
    if context.is_main and cfg.reporters:  # keeps the random streams just restored (open_report)
        report = open_report(cfg.reporters, out_dir, str(out_dir), cfg.to_dict(), logs["dynamics"].read_text(),
                             logs["epochs"].read_text(), resumed=payload is not None)
    return _Session(cfg, context, device, amp_dtype, data, store, eval_data if cfg.eval_every_epoch else None,
                    out_dir, fingerprint, steps_per_epoch, total_steps, parts, checkpoint, state, started,
                    base_wall_time=state.wall_time_s, progress=progress, report=report)


def _prepare_framework(framework: Framework, cfg: TrainConfig, data: TrainingSet, model, products) -> None:
    """Hand the framework its products and manifest columns (checked) and the tokenised captions."""
    products = {name: Path(path) for name, path in (products or {}).items()}
    missing = [name for name in framework.products if name not in products]
    if missing:
        raise ValueError(f"framework {cfg.framework!r} needs the preprocessing product(s) {missing}; "
                         f"got {sorted(products) or 'none'}")
    columns = [] if data.manifest is None else list(data.manifest.columns)
    absent = [c for c in framework.required_columns() if c not in columns]
    if absent:
        raise ValueError(f"framework {cfg.framework!r} with these settings reads the manifest column(s) {absent}; "
                         f"the training manifest has {columns}")
    data.tokens = model.tokenize(data.captions)  # once: BPE on 248-token dense captions is slow in Python
    # the captions cut at the text tower's positions, for the summary (and a warning here, as in prepare's log)
    data.truncation = truncation(data.captions, data.tokens.shape[1])
    if data.truncation["count"]:
        log.warning(describe_truncation(data.truncation, "training set"))
    framework.prepare(data, products, model.tokenize)


def _run_epochs(session: _Session) -> None:
    """The loop: optimizer steps until ``total_steps``, evaluation and a checkpoint at each epoch end."""
    from hnclip.evaluate import evaluate_model, tokenize_captions

    cfg, context, state, parts = session.cfg, session.context, session.state, session.parts
    # after the weights are final: DDP's constructor broadcasts rank 0's parameters
    runner = wrap_data_parallel(_TrainStep(parts.model, parts.framework, cfg, session.device, session.amp_dtype),
                                context)
    session_samples = 0
    loop_start = time.perf_counter()
    # DataLoader draws a base seed from a generator each time it is iterated; a private one keeps the
    # global RNG (dropout) independent of where a resumed run re-creates its loader
    loader_generator = torch.Generator()
    bar = tqdm(total=session.total_steps, initial=state.step, desc="train", unit="step", dynamic_ncols=True,
               disable=not context.is_main)
    progress = session.shown
    progress.start_loop(state.step, session.total_steps, math.ceil(session.total_steps / session.steps_per_epoch),
                        cfg.effective_batch)
    while state.step < session.total_steps:
        order = epoch_order(len(session.data), cfg.seed, state.epoch)  # the same on every rank
        micro_batches = [order[i * cfg.micro_batch:(i + 1) * cfg.micro_batch]
                         for i in range(state.batch_in_epoch * cfg.accum_steps,
                                        session.steps_per_epoch * cfg.accum_steps)]
        global_rows = iter(micro_batches)
        batches = iter(torch.utils.data.DataLoader(
            MicroBatchImages(session.store, session.data.store_rows, parts.model.image_mean, parts.model.image_std),
            sampler=[context.shard(rows) for rows in micro_batches],
            batch_size=None, num_workers=cfg.num_workers, pin_memory=session.device.type == "cuda",
            generator=loader_generator))
        while state.batch_in_epoch < session.steps_per_epoch and state.step < session.total_steps:
            _optimizer_step(session, runner, batches, global_rows)
            session_samples += cfg.effective_batch
            rate = session_samples / max(1e-9, time.perf_counter() - loop_start)
            bar.update(1)
            bar.set_postfix(loss=f"{state.last_loss:.4f}", samples_s=f"{rate:.1f}")
            progress.record_step(state.step, state.epoch + 1, state.last_loss)
            if state.step % cfg.checkpoint_every == 0 and state.batch_in_epoch < session.steps_per_epoch:
                session.save()
        if state.batch_in_epoch == session.steps_per_epoch:  # epoch complete (not a max_steps stop mid-epoch)
            check_skipped_steps(state, session.steps_per_epoch, parts.scaler)
            state.epoch += 1
            state.batch_in_epoch = 0
            state.skipped_in_epoch = 0
            evaluated = session.eval_data if context.is_main else None  # the other ranks wait in save()
            eval_started = time.perf_counter()
            for i, (name, manifest, images) in enumerate(evaluated or []):
                progress.set_phase(f"evaluating after epoch {state.epoch}" + (f" ({name})" if name else ""))
                if i not in session.eval_tokens:  # BPE on dense captions is slow in Python: once per run
                    session.eval_tokens[i] = tokenize_captions(parts.model, manifest)
                metrics = evaluate_model(parts.model, manifest, images, device=session.device,
                                         framework=parts.framework, return_ranks=True, tokens=session.eval_tokens[i])
                ranks = metrics.pop("ranks")
                epoch_row = {"epoch": state.epoch, "step": state.step, **metrics, "benchmark": name}
                parts.logs["epochs"].append(epoch_row)
                if session.report is not None:
                    session.report.epoch(epoch_row)
                parts.logs["epoch_ranks"].append({"epoch": state.epoch, **{k: " ".join(map(str, v))
                                                                          for k, v in ranks.items()},
                                                  "benchmark": name})
                log.info("epoch %d%s: %s", state.epoch, f" ({name})" if name else "", metrics)
            state.epoch_eval_s += time.perf_counter() - eval_started
            progress.set_phase(f"saving the checkpoint of epoch {state.epoch}")
            session.save()
            progress.set_phase("training")
    bar.close()
    if session.checkpoint.saved_step != state.step:  # a max_steps stop mid-epoch: epoch ends wrote theirs
        session.save()
    check_skipped_steps(state, session.steps_per_epoch, parts.scaler, run_end=True)


class SkippedStepsError(RuntimeError):
    """Every optimizer step of an epoch was skipped by fp16's gradient scaler: the weights did not move."""


def check_skipped_steps(state: TrainState, steps_per_epoch: int, scaler, run_end: bool = False) -> None:
    """Stop an fp16 run whose gradient scaler skips steps because the gradients are non-finite at any scale.

    A skipped step leaves the weights as they were and halves the scale. The first steps of a run may be
    skipped while the scale calibrates (torch starts at 2**16); an epoch of nothing but skipped steps that
    took the scale below 1 means gradients that overflow unscaled, i.e. inf or NaN, and a run that took
    no step at all saved its initial weights as "fine-tuned". Either stops the run here instead of an exit
    code 0 (checked at each epoch end and, with ``run_end``, once more at the end of the run).
    """
    if scaler is None or state.step == 0:
        return
    scale = scaler.get_scale()
    if run_end and state.skipped_steps == state.step:
        what = f"all {state.step} optimizer steps of the run"
    elif not run_end and state.skipped_in_epoch == steps_per_epoch and scale < 1.0:
        what = f"all {steps_per_epoch} optimizer steps of epoch {state.epoch + 1}"
    else:
        return
    raise SkippedStepsError(
        f"precision fp16: the gradient scaler skipped {what} (their gradients overflowed float16 even as the "
        f"scale fell to {scale:g}, i.e. they were inf or NaN), so the weights never changed; train with "
        f"precision: fp32 (or bf16 on a GPU that has it)")


def _optimizer_step(session: _Session, runner: nn.Module, batches, global_rows) -> None:
    """``accum_steps`` micro-batches, then clip, AdamW, schedule, logit-scale clamp and the dynamics row."""
    cfg, context, state, parts = session.cfg, session.context, session.state, session.parts
    step_started = time.perf_counter()
    step_number = state.step + 1
    params = session.params
    scaler = parts.scaler
    # the boosted gradient is the step's own .grad: the probe reads it before clipping (unscaled, under
    # fp16: the probe's own gradients come from the scaled losses and are divided by the same scale)
    probe = (GradientProbe(params, session.embeddings, step_gradient=True,
                           loss_scale=1.0 if scaler is None else scaler.get_scale())
             if probes_step(cfg, state.step) else None)
    try:
        losses, standard_losses, logit_scale = _micro_batches(session, runner, batches, global_rows, probe)
        if scaler is not None:  # .grad is the step's true gradient from here on
            scaler.unscale_(parts.optimizer)
        probe_row = None
        if probe is not None:
            all_reduce_probe(probe, context)
            probe_row = probe.summary()
    finally:
        if probe is not None:
            probe.close()
    if cfg.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
    lr = parts.optimizer.param_groups[0]["lr"]
    if scaler is None:
        parts.optimizer.step()
    else:  # skipped when the scaled gradients overflowed; the scale adapts (halved: the sign of a skip)
        scale_before = scaler.get_scale()
        scaler.step(parts.optimizer)
        scaler.update()
        skipped = scaler.get_scale() < scale_before
        state.skipped_steps += skipped
        state.skipped_in_epoch += skipped
    parts.optimizer.zero_grad(set_to_none=True)
    parts.scheduler.step()
    _clamp_logit_scale(parts.model)

    state.step = step_number
    state.batch_in_epoch += 1
    state.samples_seen += cfg.effective_batch
    state.last_loss = sum(losses) / len(losses)
    row = {"step": state.step, "epoch": state.epoch + 1, "lr": lr, "logit_scale": float(logit_scale),
           "loss": state.last_loss, "infonce": sum(standard_losses) / len(standard_losses),
           **step_saturation(losses, standard_losses),
           # which micro-batches saturated, so their rows can be found again (hnclip.dynamics_log)
           MICRO_BATCH_INFONCE: format_micro_batch_losses(standard_losses)}
    if probe_row is not None:
        row.update(probe_row)
    if context.is_main:
        parts.logs["dynamics"].append(row)
        if session.report is not None:
            session.report.step(row)
    _time_step(session, probe is not None, time.perf_counter() - step_started)


def _time_step(session: _Session, probed: bool, seconds: float) -> None:
    """Count a step (probed or not) and add its seconds to its kind's sum, except a session's first."""
    state = session.state
    state.probed_steps += probed
    session.steps_this_session += 1
    if session.steps_this_session == 1:
        return
    if probed:
        state.probed_step_s += seconds
        state.probed_timed += 1
    else:
        state.plain_step_s += seconds
        state.plain_timed += 1


def step_timing(state) -> dict:
    """Where a run's wall time went, from its :class:`TrainState` counters: ``probe_excess_s``, what the
    probed steps took beyond as many plain steps (their mean excess over the plain steps' mean, times the
    run's probed steps; 0 when either kind was never timed), ``epoch_eval_s``, the evaluations after each
    epoch, and ``train_time_s``, the wall time less both: what the run's training took, comparable between
    a run that probes or evaluates per epoch and one that does not (the paper's time ratios)."""
    excess = 0.0
    if state.probed_timed and state.plain_timed:
        per_step = state.probed_step_s / state.probed_timed - state.plain_step_s / state.plain_timed
        excess = max(0.0, per_step) * state.probed_steps
    return {"probed_steps": state.probed_steps, "probed_step_s": state.probed_step_s,
            "probed_timed": state.probed_timed, "plain_step_s": state.plain_step_s,
            "plain_timed": state.plain_timed, "probe_excess_s": excess, "epoch_eval_s": state.epoch_eval_s,
            "train_time_s": max(0.0, state.wall_time_s - excess - state.epoch_eval_s)}

def _micro_batches(session: _Session, runner: nn.Module, batches, global_rows, probe) -> tuple[list, list, object]:
    """Forward and backward of the step's ``accum_steps`` micro-batches (the probe, if any, taking its
    standard gradient before each backward); returns their losses, standard losses and the logit scale."""
    cfg, context, state, parts = session.cfg, session.context, session.state, session.parts
    step_number = state.step + 1
    micro_per_epoch = session.steps_per_epoch * cfg.accum_steps
    losses, standard_losses = [], []
    for micro_index in range(cfg.accum_steps):
        pixels, positions = next(batches)
        rows = next(global_rows)
        pixels = pixels.to(session.device, non_blocking=True)
        tokens = session.data.tokens[positions].to(session.device, non_blocking=True)
        batch = Batch(pixels, tokens, positions, epoch=state.epoch,
                      epoch_progress=(state.batch_in_epoch * cfg.accum_steps + micro_index) / micro_per_epoch,
                      extras=parts.framework.batch_extras(positions, session.device))
        margin = None if parts.margin_features is None else parts.margin_features[positions.to(session.device)]
        with sync_gradients(runner, micro_index == cfg.accum_steps - 1):
            loss, standard, logit_scale, features = runner(batch, margin, probe is not None)
            # a sync per micro-batch, so a NaN is pinned to its micro-batch; the mean over ranks,
            # so that every rank sees the same value and stops together
            value, standard_value = context.mean([float(loss.detach()), float(standard.detach())])
            if not math.isfinite(value):
                raise FloatingPointError(
                    f"loss is {value} at step {step_number} (epoch {state.epoch + 1}, micro-batch "
                    f"{micro_index + 1} of {cfg.accum_steps}, training-set rows {rows.tolist()}); "
                    f"{session.checkpoint.describe()}")
            if parts.scaler is not None:  # fp16: backward (and the probe's gradients) from the scaled losses
                loss, standard = _scaled(parts.scaler, loss, standard)
            if probe is not None:
                probe.add(standard, loss, 1.0 / cfg.accum_steps, features)
            # divided so that the accumulated .grad is that of the mean micro-batch loss
            (loss / cfg.accum_steps).backward()
        losses.append(value)
        standard_losses.append(standard_value)
    return losses, standard_losses, logit_scale


def _scaled(scaler: torch.amp.GradScaler, loss: torch.Tensor, standard: torch.Tensor):
    """The two losses times the gradient scaler's scale; one tensor when they are one (the probe tells the
    objectives apart by identity)."""
    scaled = scaler.scale(loss)
    return scaled, (scaled if standard is loss else scaler.scale(standard))


def _finish_run(session: _Session, run_info: dict | None) -> dict:
    """Rank 0 exports the model and writes the summary; every rank returns it."""
    from hnclip.models import save_model

    cfg, state, parts, device = session.cfg, session.state, session.parts, session.device
    summary = None
    session.shown.set_phase("saving the model and the summary")
    if session.context.is_main:
        wall_time_s = session.wall_time()
        model_dir = save_model(parts.framework.export_model(parts.model), session.out_dir / "model")
        save_framework(parts.framework, model_dir)
        summary = {
            "config": cfg.to_dict(),
            "config_hash": cfg.config_hash(),
            "framework": cfg.framework,
            "hn_plugin": parts.framework.hn_meaning,
            "recipe": describe_recipe(cfg, parts.optimizer, session.total_steps),
            "seed": cfg.seed,
            "steps": state.step,
            "epochs": state.epoch,
            "steps_per_epoch": session.steps_per_epoch,
            "samples_seen": state.samples_seen,
            "n_train": len(session.data),
            # {count, captions, share, context_length, longest}: the training captions cut at the tower's positions
            "captions_truncated": session.data.truncation,
            "world_size": session.context.world_size,
            "wall_time_s": wall_time_s,
            "timing": step_timing(replace(state, wall_time_s=wall_time_s)),
            "samples_per_s": state.samples_seen / wall_time_s if wall_time_s > 0 else None,
            "peak_memory_mb": _peak_memory_mb(device),
            "final_loss": state.last_loss,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "device_type": device.type,
            # the precision it trained in, "auto" resolved (the report's provenance shows it)
            "precision": {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(session.amp_dtype, "fp32"),
            "torch_version": torch.__version__,
            # which CPU kernels computed it (the config's cpu_kernels pin, hnclip.cpu_kernels)
            "cpu_kernels": cpu_kernels.describe(),
            "checkpoint_sha256": sha256_file(Path(model_dir) / "model.safetensors"),
            "git_commit": git_commit(),
            "data_fingerprint": session.fingerprint,
            # fp16: the gradient scaler's scale at the end (a step whose scaled gradients overflowed halved it)
            **({"grad_scale": parts.scaler.get_scale(), "skipped_steps": state.skipped_steps}
               if parts.scaler is not None else {}),
            **({"run": run_info} if run_info else {}),
        }
        write_json_atomic(session.out_dir / "summary.json", summary, sort_keys=True)
        session.checkpoint.finish()
    # the other ranks wait here until rank 0 has written the model and the summary
    return session.context.broadcast_object(summary)


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
    manifests = eval_manifest if isinstance(eval_manifest, list | tuple) else [eval_manifest] * (eval_manifest is not None)
    stores = eval_store_dir if isinstance(eval_store_dir, list | tuple) else [eval_store_dir] * (eval_store_dir is not None)
    names = eval_benchmark if isinstance(eval_benchmark, list | tuple) else [eval_benchmark] * len(manifests)
    if not len(manifests) == len(stores) == len(names):
        raise ValueError(f"evaluation after each epoch needs one store and one name per manifest, got "
                         f"{len(manifests)} manifests, {len(stores)} stores, {len(names)} names")
    eval_data = None
    if manifests and cfg.eval_every_epoch:
        eval_data = [(name, read_manifest(m), ImageStore(d)) for name, m, d in zip(names, manifests, stores, strict=True)]
    identity = f"{data.fingerprint()}\n{fingerprint_files(init_model_dir)}"
    for name, path in sorted((products or {}).items()):
        if not (Path(path).is_file() or Path(path).is_dir()):
            raise FileNotFoundError(f"preprocessing product {name!r}: {path} does not exist")
        identity += f"\n{name}:{fingerprint_tree(path)}"
    fingerprint = hashlib.sha256(identity.encode()).hexdigest()
    run_info = {"init_model_dir": str(init_model_dir), "train_manifest": str(train_manifest),
                "store_dir": str(store_dir), "subset_path": None if subset_path is None else str(subset_path),
                "eval_manifest": None if not manifests else (str(manifests[0]) if len(manifests) == 1
                                                             else [str(m) for m in manifests]),
                **({"products": {k: str(v) for k, v in products.items()}} if products else {})}
    return _train_held(cfg, load_model(init_model_dir), data, store, out_dir, checkpoint_dir, eval_data,
                       fingerprint, run_info, products, progress)
