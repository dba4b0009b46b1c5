"""Parts of the training loop in :mod:`hnclip.train`, one job per module.

- :mod:`.runtime` device, autocast dtype, fp16's gradient scaler, seeds, repeatable kernels, peak memory.
- :mod:`.inputs` the training set read from a manifest and store, the evaluated splits, the resume fingerprint.
- :mod:`.objective` one micro-batch's objective beside plain InfoNCE, the DDP-wrapped step module, the
  frozen-margin caption features, the logit-scale clamp.
- :mod:`.session` everything up to the first step (framework, optimizer, logs, a checkpoint resumed).
- :mod:`.step` one optimizer step (micro-batches, fp16 scaling, probe, clip, AdamW, schedule).
- :mod:`.fp16_skips` the steps fp16's scaler skipped: calibration vs overflow, the stop, the end-of-run line.
- :mod:`.timing` where the wall time goes (plain vs probed steps, evaluations).
- :mod:`.evaluation` the evaluation after each epoch and the columns of its logs.
- :mod:`.loop` the step loop over epochs; :mod:`.finish` the exported model and ``summary.json``.
- :mod:`.batches` the training set in memory, per-epoch order, micro-batch image reading.
- :mod:`.schedule` AdamW over a framework's parameter groups and the warmup + cosine schedule.
- :mod:`.dynamics` standard vs boosted gradient probe (the dynamics.csv columns).
- :mod:`.checkpoint` atomic, ``weights_only``-readable resume checkpoints with RNG states.
- :mod:`.logs` append-only CSV logs that are cut back to the checkpoint on resume.
- :mod:`.distributed` torchrun/DDP: process group, per-rank shares of the global micro-batch, gradient
  synchronisation (the global term over gathered features is :class:`hnclip.losses.HNClipLoss`).
"""

from .batches import MicroBatchImages, TrainingSet, epoch_order
from .checkpoint import (
    CHECKPOINT_NAME,
    capture_rng_state,
    load_checkpoint,
    restore_rng_state,
    save_checkpoint,
)
from .distributed import DistributedContext
from .dynamics import DYNAMICS_COLUMNS, GradientProbe
from .logs import CsvLog
from .schedule import (
    build_optimizer,
    build_scheduler,
    describe_recipe,
    lr_multiplier,
)

__all__ = [
    "CHECKPOINT_NAME",
    "DYNAMICS_COLUMNS",
    "CsvLog",
    "DistributedContext",
    "GradientProbe",
    "MicroBatchImages",
    "TrainingSet",
    "build_optimizer",
    "build_scheduler",
    "capture_rng_state",
    "describe_recipe",
    "epoch_order",
    "load_checkpoint",
    "lr_multiplier",
    "restore_rng_state",
    "save_checkpoint",
]
