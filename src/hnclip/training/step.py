"""One optimizer step: ``accum_steps`` micro-batches forward and backward (a non-finite loss stops the run,
named by its step and rows), fp16's gradient scaling, the gradient probe on its steps, then clip, AdamW,
schedule (not on a step fp16's scaler skipped: :mod:`hnclip.training.fp16_skips`), the logit-scale clamp and
the step's dynamics row."""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING

import torch
from torch import nn

from hnclip.config.train import TrainConfig
from hnclip.dynamics_log import MICRO_BATCH_INFONCE, format_micro_batch_losses
from hnclip.frameworks.base import Batch
from hnclip.training.distributed import all_reduce_probe, sync_gradients
from hnclip.training.dynamics import GradientProbe, step_saturation
from hnclip.training.fp16_skips import record_scaler_step
from hnclip.training.objective import clamp_logit_scale
from hnclip.training.timing import time_step

if TYPE_CHECKING:
    from hnclip.training.session import Session

__all__ = ["optimizer_step", "probes_step"]


def probes_step(cfg: TrainConfig, step: int) -> bool:
    """Whether the optimizer step after ``step`` done runs the gradient probe: steps 1, 1 + k, 1 + 2k, ...
    with k = ``dynamics_every``, in a run with ``dynamics_probe`` on."""
    return bool(cfg.dynamics_probe and cfg.dynamics_every and step % cfg.dynamics_every == 0)


def optimizer_step(session: Session, runner: nn.Module, batches, global_rows) -> None:
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
        losses, standard_losses, logit_scale = micro_batches(session, runner, batches, global_rows, probe)
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
    skipped = False
    if scaler is None:
        parts.optimizer.step()
    else:  # skipped when the scaled gradients overflowed; the scale adapts (halved: the sign of a skip)
        scale_before = scaler.get_scale()
        scaler.step(parts.optimizer)
        scaler.update()
        skipped = scaler.get_scale() < scale_before
        record_scaler_step(state, skipped)
    parts.optimizer.zero_grad(set_to_none=True)
    if not skipped:  # the schedule follows the steps taken (hnclip.training.fp16_skips)
        parts.scheduler.step()
    clamp_logit_scale(parts.model)

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
    time_step(session, probe is not None, time.perf_counter() - step_started)


def micro_batches(session: Session, runner: nn.Module, batches, global_rows, probe) -> tuple[list, list, object]:
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
                loss, standard = scale_losses(parts.scaler, loss, standard)
            if probe is not None:
                probe.add(standard, loss, 1.0 / cfg.accum_steps, features)
            # divided so that the accumulated .grad is that of the mean micro-batch loss
            (loss / cfg.accum_steps).backward()
        losses.append(value)
        standard_losses.append(standard_value)
    return losses, standard_losses, logit_scale


def scale_losses(scaler: torch.amp.GradScaler, loss: torch.Tensor, standard: torch.Tensor):
    """The two losses times the gradient scaler's scale; one tensor when they are one (the probe tells the
    objectives apart by identity)."""
    scaled = scaler.scale(loss)
    return scaled, (scaled if standard is loss else scaler.scale(standard))

