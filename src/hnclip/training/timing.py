"""Where a run's wall time goes: each optimizer step's seconds summed by kind (probed or plain, a session's
first step left out), and the split of the wall time into training, the probe's excess and the evaluations
that the summary reports."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hnclip.training.session import Session

__all__ = ["step_timing", "time_step"]


def time_step(session: Session, probed: bool, seconds: float) -> None:
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
