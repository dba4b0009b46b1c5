"""The step loop: optimizer steps over each epoch's micro-batches until ``total_steps``, a checkpoint every
``checkpoint_every`` steps, and at each epoch's end the fp16 skip check, the evaluation and a checkpoint."""

from __future__ import annotations

import math
import time

import torch
from tqdm import tqdm

from hnclip.training.batches import MicroBatchImages, epoch_order
from hnclip.training.distributed import wrap_data_parallel
from hnclip.training.evaluation import evaluate_epoch
from hnclip.training.fp16_skips import check_skipped_steps
from hnclip.training.objective import TrainStep
from hnclip.training.session import Session
from hnclip.training.step import optimizer_step

__all__ = ["run_epochs"]


def run_epochs(session: Session) -> None:
    """The loop: optimizer steps until ``total_steps``, evaluation and a checkpoint at each epoch end."""
    cfg, context, state, parts = session.cfg, session.context, session.state, session.parts
    # after the weights are final: DDP's constructor broadcasts rank 0's parameters
    runner = wrap_data_parallel(TrainStep(parts.model, parts.framework, cfg, session.device, session.amp_dtype),
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
        micro_batches = epoch_micro_batches(session)
        global_rows = iter(micro_batches)
        batches = iter(torch.utils.data.DataLoader(
            MicroBatchImages(session.store, session.data.store_rows, parts.model.image_mean, parts.model.image_std),
            sampler=[context.shard(rows) for rows in micro_batches],
            batch_size=None, num_workers=cfg.num_workers, pin_memory=session.device.type == "cuda",
            generator=loader_generator))
        while state.batch_in_epoch < session.steps_per_epoch and state.step < session.total_steps:
            optimizer_step(session, runner, batches, global_rows)
            session_samples += cfg.effective_batch
            rate = session_samples / max(1e-9, time.perf_counter() - loop_start)
            bar.update(1)
            bar.set_postfix(loss=f"{state.last_loss:.4f}", samples_s=f"{rate:.1f}")
            progress.record_step(state.step, state.epoch + 1, state.last_loss)
            if state.step % cfg.checkpoint_every == 0 and state.batch_in_epoch < session.steps_per_epoch:
                session.save()
        if state.batch_in_epoch == session.steps_per_epoch:  # epoch complete (not a max_steps stop mid-epoch)
            end_epoch(session)
    bar.close()
    if session.checkpoint.saved_step != state.step:  # a max_steps stop mid-epoch: epoch ends wrote theirs
        session.save()
    check_skipped_steps(state, session.steps_per_epoch, parts.scaler, run_end=True)


def epoch_micro_batches(session: Session) -> list:
    """The global micro-batches (training-set rows) of the current epoch still to run, from where it stands."""
    cfg, state = session.cfg, session.state
    order = epoch_order(len(session.data), cfg.seed, state.epoch)  # the same on every rank
    return [order[i * cfg.micro_batch:(i + 1) * cfg.micro_batch]
            for i in range(state.batch_in_epoch * cfg.accum_steps, session.steps_per_epoch * cfg.accum_steps)]


def end_epoch(session: Session) -> None:
    """An epoch complete: the fp16 skip check, the counters moved on, the evaluation, and its checkpoint."""
    state = session.state
    check_skipped_steps(state, session.steps_per_epoch, session.parts.scaler)
    state.epoch += 1
    state.batch_in_epoch = 0
    state.skipped_in_epoch = 0
    evaluate_epoch(session)
    session.shown.set_phase(f"saving the checkpoint of epoch {state.epoch}")
    session.save()
    session.shown.set_phase("training")
