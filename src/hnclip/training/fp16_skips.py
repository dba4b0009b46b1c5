"""fp16's skipped optimizer steps: counted, told apart (the scaler calibrating vs gradients that overflow at
any scale), stopped on when nothing trained, and reported at the end of the run.

``torch.amp.GradScaler`` starts at a scale of 2**16 and halves it at every step whose scaled gradients overflow
float16, skipping that step (the weights stay as they were). So the first steps of a run are often skipped
while the scale calibrates: 3 or 4 steps for a small model whose gradients reach ~10. That is torch's design,
not a fault, but on a short run it is most of the run, and the summary's ``skipped_steps`` alone did not say
so. A skipped step does not advance the learning-rate schedule either (:func:`record_scaler_step`): as in
transformers' Trainer (accelerate skips the scheduler when the scaler skipped the optimizer) and as torch's
"lr_scheduler.step() before optimizer.step()" warning asks, the first step taken gets the schedule's first
rate. open_clip_train steps its schedule by the loop's counter instead; a run with no skipped step (every
fp32 and bf16 run) is the same either way.
"""

from __future__ import annotations

import logging
import math

from hnclip.training.checkpoint import TrainState

__all__ = ["SkippedStepsError", "check_skipped_steps", "describe_skipped_steps", "record_scaler_step",
           "report_skipped_steps"]

log = logging.getLogger(__name__)


class SkippedStepsError(RuntimeError):
    """fp16's gradient scaler skipped every optimizer step of an epoch or of the run: the weights did not move."""


def record_scaler_step(state: TrainState, skipped: bool) -> None:
    """Count one optimizer step the scaler skipped (``skipped``) or took; a skip before any step was taken
    is the scale's calibration (``calibration_skips``)."""
    if not skipped:
        return
    if state.skipped_steps == state.step:  # every step before this one was skipped too: still calibrating
        state.calibration_skips += 1
    state.skipped_steps += 1
    state.skipped_in_epoch += 1


def _initial_scale(scaler) -> float | None:
    initial = getattr(scaler, "_init_scale", None)  # GradScaler's constructor argument (2**16 by default)
    return None if initial is None else float(initial)


def _power(value: float) -> str:
    exponent = math.log2(value) if value > 0 else float("nan")
    return f"2**{int(exponent)}" if exponent == int(exponent) else f"{value:g}"


def check_skipped_steps(state: TrainState, steps_per_epoch: int, scaler, run_end: bool = False) -> None:
    """Stop an fp16 run in which nothing trained.

    An epoch of nothing but skipped steps that took the scale below 1 means gradients that overflow float16
    unscaled, i.e. inf or NaN: the run stops, advising fp32. A run whose every step was skipped (checked with
    ``run_end``) saved its initial weights as "fine-tuned", so it stops too; when the scale is still 1 or more
    the scaler was only calibrating (nothing says the gradients are not finite) and the message says so and
    asks for more steps, not for another precision.
    """
    if scaler is None or state.step == 0:
        return
    scale = scaler.get_scale()
    if run_end and state.skipped_steps == state.step and scale >= 1.0:
        initial = _initial_scale(scaler)
        start = f" from its initial {_power(initial)}" if initial else ""
        raise SkippedStepsError(
            f"precision fp16: the gradient scaler skipped all {state.step} optimizer steps of the run while still "
            f"calibrating its scale, halved{start} to {_power(scale)} (GradScaler starts high and halves the scale "
            f"at each step until the scaled gradients fit float16; that is no sign of inf or NaN gradients), so the "
            f"weights never changed; give the run more optimizer steps than that (train.max_steps or epochs)")
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


def describe_skipped_steps(state: TrainState, scaler) -> str | None:
    """One line on the steps the scaler skipped in a run that trained (None when it skipped none): how many,
    what a skipped step means, and which were the calibration and which overflowed later."""
    if scaler is None or not state.skipped_steps:
        return None
    later = state.skipped_steps - state.calibration_skips
    parts = []
    if state.calibration_skips:
        initial = _initial_scale(scaler)
        start = f" from {_power(initial)}" if initial else ""
        parts.append(f"the first {state.calibration_skips} while the scaler calibrated its scale (halved{start} at "
                     "each overflow, as GradScaler does at the start of a run)")
    if later:
        parts.append(f"{later} later, whose scaled gradients overflowed float16 (very large, inf or NaN gradients; "
                     f"many of them: try precision fp32 or bf16)")
    return (f"precision fp16: the gradient scaler skipped {state.skipped_steps} of {state.step} optimizer steps "
            f"(the weights and the learning-rate schedule stood still on each): {'; '.join(parts)}; the scale "
            f"is now {_power(scaler.get_scale())}")


def report_skipped_steps(state: TrainState, scaler, name: str) -> None:
    """The line of :func:`describe_skipped_steps` in the log (a warning) and on the console (stdout, which
    Snakemake shows), headed by ``name`` (``hnclip train <out>``)."""
    text = describe_skipped_steps(state, scaler)
    if text is None:
        return
    log.warning(text)
    print(f"{name}: {text}", flush=True)
