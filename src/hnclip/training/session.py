"""A training session: everything up to the first step (the framework with its products and columns, the
frozen-margin features, the optimizer and schedule, the logs, a checkpoint resumed) and the state the loop
carries from step to step."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from hnclip.config.train import TrainConfig
from hnclip.frameworks import build_framework
from hnclip.frameworks.base import Framework
from hnclip.models.tokenizer import describe_truncation, truncation
from hnclip.progress import Progress
from hnclip.training import runtime
from hnclip.training.batches import TrainingSet
from hnclip.training.checkpoint import Resumable, RunCheckpoint, TrainState
from hnclip.training.distributed import DistributedContext, rank_seed
from hnclip.training.dynamics import DYNAMICS_COLUMNS, sparse_embeddings
from hnclip.training.logs import EPOCH_COLUMNS, EPOCH_RANK_COLUMNS, CsvLog
from hnclip.training.objective import encode_captions
from hnclip.training.report_to import RunReport, open_report
from hnclip.training.schedule import build_optimizer, build_scheduler

__all__ = ["Session", "start_session"]

log = logging.getLogger("hnclip.train")  # the trainer's log lines keep the name they always had


@dataclass
class Session:
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


def start_session(context: DistributedContext, device: torch.device, amp_dtype, cfg: TrainConfig, model,
                  data: TrainingSet, store, out_dir, checkpoint_dir, eval_data, data_fingerprint,
                  products, progress: Progress | None = None) -> Session:
    """Everything up to the first step: the framework, its data, the optimizer, and a checkpoint resumed.

    The order of what draws random numbers is fixed (new modules, adapters, then the RNG streams of a
    resumed run), so that a resumed run continues bit for bit.
    """
    from hnclip.evaluate import check_store_matches_model

    started = time.perf_counter()
    out_dir = Path(out_dir)
    if context.is_main:
        out_dir.mkdir(parents=True, exist_ok=True)
    runtime.configure_determinism(device)
    runtime.seed_everything(cfg.seed)  # the same on every rank: new modules start identical

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
    prepare_framework(framework, cfg, data, model, products)
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
                      margin_features, runtime.grad_scaler(cfg, device))
    if payload is None:
        state = TrainState()
        if context.is_main:
            for csv_log in logs.values():
                csv_log.start()
        if context.is_distributed:  # a dropout stream per rank; identical streams would repeat masks
            runtime.seed_everything(rank_seed(cfg.seed, context.rank))
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
    return Session(cfg, context, device, amp_dtype, data, store, eval_data if cfg.eval_every_epoch else None,
                    out_dir, fingerprint, steps_per_epoch, total_steps, parts, checkpoint, state, started,
                    base_wall_time=state.wall_time_s, progress=progress, report=report)


def prepare_framework(framework: Framework, cfg: TrainConfig, data: TrainingSet, model, products) -> None:
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

