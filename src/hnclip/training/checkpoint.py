"""Resumable checkpoints: ``last.pt`` and the one before it, written atomically, read with ``weights_only=True``.

Everything that influences later steps is in it (weights, optimizer moments, scheduler counters, RNG
states, data position, frozen-margin features), so a run killed at any point and restarted ends with
the same bits as one that was never interrupted. RNG states are stored as tensors and plain lists:
numpy arrays and Python's random tuples would need unpickling of arbitrary objects.

:class:`RunCheckpoint` is the one object that saves and restores a run: what goes in, what comes back,
when an existing file is resumed, refused or superseded, and what stays once the run has finished.

- A checkpoint of the same settings, data and initial model is resumed.
- A *finished* run (its last checkpoint says ``finished``) of other settings or data is superseded: the
  new run trains from scratch and its first checkpoint replaces the file. This is Snakemake's case of a
  changed config: it has already deleted the old run's outputs, and the old weights cannot continue
  under the new settings anyway.
- An *unfinished* run of other settings or data is refused, naming what changed: resuming would mix two
  runs, and silently discarding it could throw away days of GPU time.
- A checkpoint of the same settings written without the gradient probe (``dynamics_probe`` is not in
  the config hash: the probe does not change the weights) while this run probes: its dynamics log
  lacks the probe columns, so a finished one is superseded (trained again, now probing) and an
  unfinished one refused. The other way round (it probed, this run does not) resumes: the log keeps
  the probe columns it has.
- A ``last.pt`` whose unpickling would run code (a pickled class or function) is refused in one line naming
  it, never loaded and never fallen back from; torch's advice to load it with ``weights_only=False`` is not
  passed on.
- A ``last.pt`` that cannot be read (truncated by a full disk, a copy cut short) falls back to
  ``previous.pt``, the checkpoint before it, with a warning; the unreadable file is kept aside as
  ``last.pt.unreadable``. Keeping the previous one costs a second checkpoint's disk while the run trains
  (finishing deletes it); it is a hard link of the old ``last.pt`` taken before the new one is written,
  and ``last.pt`` itself is only ever replaced by a whole file.
- Once finished, ``TrainConfig.keep_checkpoint`` decides what stays: ``full``; ``weights`` (the final
  checkpoint is written without the optimizer moments, two thirds of a ViT-L checkpoint: a rerun with
  the same settings rebuilds the outputs from it without a training step); ``none`` (deleted once the
  run's outputs are written).
"""

from __future__ import annotations

import logging
import math
import os
import pickle
import random
import re
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch

from hnclip.fileio import link_or_copy_atomic
from hnclip.progress import sigterm_deferred

from .distributed import check_world_size

__all__ = ["CHECKPOINT_NAME", "PREVIOUS_NAME", "CheckpointRefusedError", "CheckpointUnreadableError", "Resumable",
           "RunCheckpoint", "TrainState", "capture_rng_state", "check_resumable", "load_checkpoint",
           "restore_rng_state", "save_checkpoint"]

log = logging.getLogger(__name__)

CHECKPOINT_NAME = "last.pt"
PREVIOUS_NAME = "previous.pt"  # the checkpoint before last.pt, resumed when last.pt cannot be read
FORMAT_VERSION = 1


@dataclass
class TrainState:
    """Where the run stands; saved in every checkpoint. ``epoch`` counts completed epochs."""

    step: int = 0  # optimizer steps done
    epoch: int = 0
    batch_in_epoch: int = 0  # effective batches of the current epoch already done
    samples_seen: int = 0
    last_loss: float = math.nan
    wall_time_s: float = 0.0  # summed over all sessions of the run
    # where the wall time went (hnclip.training.timing.step_timing): the cost table compares methods on
    # training time alone, whichever runs probe or evaluate after each epoch (a checkpoint without them: zeros)
    probed_steps: int = 0  # optimizer steps that ran the gradient probe
    probed_step_s: float = 0.0  # seconds of the timed probed steps (each session's first step untimed)
    probed_timed: int = 0
    plain_step_s: float = 0.0  # seconds of the timed steps without the probe
    plain_timed: int = 0
    epoch_eval_s: float = 0.0  # seconds of the evaluations after each epoch
    # fp16: optimizer steps the gradient scaler skipped (non-finite scaled gradients), in the run and in the
    # current epoch, and those of them before its first step taken (its scale calibrating); an epoch or a run
    # of nothing but skipped steps stops it (hnclip.training.fp16_skips)
    skipped_steps: int = 0
    skipped_in_epoch: int = 0
    calibration_skips: int = 0


def capture_rng_state() -> dict:
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"kind": np_kind, "keys": torch.from_numpy(np_keys.astype(np.int64)), "pos": int(np_pos),
                  "has_gauss": int(np_has_gauss), "cached_gaussian": float(np_gauss)},
        "python": {"version": py_version, "state": list(py_state), "gauss": py_gauss},
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np_state = state["numpy"]
    np.random.set_state((np_state["kind"], np_state["keys"].numpy().astype(np.uint32), np_state["pos"],
                         np_state["has_gauss"], np_state["cached_gaussian"]))
    py = state["python"]
    random.setstate((py["version"], tuple(py["state"]), py["gauss"]))
    if "cuda" in state and torch.cuda.is_available():
        if len(state["cuda"]) != torch.cuda.device_count():
            raise RuntimeError(f"checkpoint holds RNG states of {len(state['cuda'])} CUDA devices but "
                               f"{torch.cuda.device_count()} are visible; resume with the same devices")
        torch.cuda.set_rng_state_all(state["cuda"])


class CheckpointUnreadableError(RuntimeError):
    """A checkpoint file torch cannot load (truncated, not a checkpoint); the message names it."""


def _keep_previous(path: Path, previous: Path) -> None:
    """Make ``previous`` the current ``path`` (a hard link, atomically renamed into place; a copy where
    links are impossible), so replacing ``path`` next never leaves a moment without a whole file."""
    link_or_copy_atomic(path, previous)


def save_checkpoint(path, payload: dict) -> None:
    """Write ``payload`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A crash mid-write leaves the previous checkpoint intact (and at worst a stray ``.tmp`` file);
    fsync before the rename so the new file is complete on disk when its name appears. A SIGTERM during
    the write is raised after it (:func:`hnclip.progress.sigterm_deferred`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with sigterm_deferred():  # a SIGTERM mid-write is raised once the file is whole and in place
        handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=path.name + ".", suffix=".tmp", delete=False)
        try:
            with handle:
                torch.save(dict(payload, format_version=FORMAT_VERSION), handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(handle.name, path)
        except BaseException:
            Path(handle.name).unlink(missing_ok=True)
            raise


class CheckpointRefusedError(RuntimeError):
    """A checkpoint whose unpickling would run code (a pickled class or function): refused, never fallen back
    from (it is no damaged copy of ours, but a file hnclip did not write, or one altered since)."""


def _load_error(path: Path, err: Exception) -> RuntimeError:
    """One line for torch's refusal of ``path`` (its own message runs over several lines and advises
    ``weights_only=False``, i.e. running the file's code: it is never passed on)."""
    text = str(err)
    # a pickled object names module.qualname; garbage starting with pickle's GLOBAL byte ('c') names no such thing
    needed = re.search(r"GLOBAL ([A-Za-z_]\w*(?:\.\w+)+)(?:\s|$)", text)
    if isinstance(err, pickle.UnpicklingError) and needed:
        return CheckpointRefusedError(
            f"checkpoint {path} refused: loading it would execute code (it asks for the Python object "
            f"{needed.group(1)}, and hnclip's checkpoints hold tensors and plain values only), so hnclip did not "
            f"write it or it was altered since; delete it to train from scratch: rm {path}")
    detail = re.search(r"WeightsUnpickler error:\s*(.+)", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    reason = detail.group(1).strip() if detail else (lines[0] if lines else type(err).__name__)
    return CheckpointUnreadableError(f"cannot read checkpoint {path} ({type(err).__name__}: {reason}); delete it "
                                     f"(rm {path}) to start over")


def load_checkpoint(path) -> dict:
    """``path`` read with ``weights_only=True``; :class:`CheckpointRefusedError` for a file that needs code,
    :class:`CheckpointUnreadableError` for one torch cannot read (truncated, not a checkpoint)."""
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise _load_error(path, err) from None
    if checkpoint.get("format_version") != FORMAT_VERSION:
        raise RuntimeError(f"checkpoint {path} has format_version {checkpoint.get('format_version')!r}, "
                           f"expected {FORMAT_VERSION}; delete it (rm {path}) to start over")
    return checkpoint


def check_resumable(path, checkpoint: dict, config: dict, config_hash: str, data_fingerprint: str) -> None:
    """Refuse to resume a checkpoint written under other settings, data or initial model."""
    if checkpoint.get("config_hash") != config_hash:
        old = checkpoint.get("config", {})
        changed = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
        details = ", ".join(f"{k}: {old.get(k)!r} -> {config.get(k)!r}" for k in changed)
        raise RuntimeError(
            f"checkpoint {path} belongs to a run with config_hash {checkpoint.get('config_hash')}, not "
            f"{config_hash} (changed: {details or 'unknown'}). Resuming would mix two runs; restore the old "
            f"settings, or delete the checkpoint to train from scratch: rm {path}")
    if checkpoint.get("data_fingerprint") != data_fingerprint:
        raise RuntimeError(
            f"checkpoint {path} was written for other training data or another initial model "
            f"(fingerprint {checkpoint.get('data_fingerprint')} vs {data_fingerprint}); delete it to train "
            f"from scratch: rm {path}")


def _probes(config: dict) -> bool:
    """Whether a run of these settings (``TrainConfig.to_dict()``) runs the gradient probe; a checkpoint
    from before ``dynamics_probe`` existed probed whenever ``dynamics_every`` was set."""
    return bool(config.get("dynamics_probe", True)) and int(config.get("dynamics_every", 0) or 0) > 0


def _changes(old: dict, new: dict) -> str:
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return ", ".join(f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in changed) or "unknown"


@dataclass
class Resumable:
    """What a checkpoint saves and restores: the live objects of a training session.

    ``logs`` maps a name (``dynamics``, ``epochs``) to its :class:`~hnclip.training.logs.CsvLog`;
    ``scaler`` is fp16's gradient scaler (its scale and growth counter change what later steps do).
    """

    model: torch.nn.Module
    framework: torch.nn.Module
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    logs: dict
    margin_features: torch.Tensor | None = None
    scaler: torch.amp.GradScaler | None = None


class RunCheckpoint:
    """A run's ``checkpoint_dir/last.pt``: read (and judged), saved, restored and finished as one object.

    Args:
        directory: the run's checkpoint folder (it outlives Snakemake's deletion of the outputs).
        config, config_hash: the run's settings (``TrainConfig.to_dict()``, ``config_hash()``).
        data_fingerprint: identifies the training data, initial model and products.
        context: the :class:`~hnclip.training.distributed.DistributedContext`; rank 0 writes, every rank
            reads and takes part in the collectives of :meth:`save`.
        keep: ``TrainConfig.keep_checkpoint``.
    """

    def __init__(self, directory, config: dict, config_hash: str, data_fingerprint: str, context,
                 keep: str = "weights"):
        self.directory = Path(directory)
        self.path = self.directory / CHECKPOINT_NAME
        self.previous = self.directory / PREVIOUS_NAME
        self.config, self.config_hash, self.data_fingerprint = config, config_hash, data_fingerprint
        self.context, self.keep = context, keep
        self.saved_step: int | None = None  # the step of the file on disk, as this session knows it
        self.unreadable: Path | None = None  # where an unreadable last.pt goes at the next save
        if context.is_main:
            for name in (CHECKPOINT_NAME, PREVIOUS_NAME):  # a kill during a write
                for stale in self.directory.glob(name + ".*.tmp"):
                    stale.unlink(missing_ok=True)

    def describe(self) -> str:
        """How a failure report names what survives (the checkpoint, or that none was written)."""
        if self.path.is_file():
            return f"the last good checkpoint {self.path} is kept"
        return f"no checkpoint was written yet in {self.directory}"

    def read(self) -> dict | None:
        """The checkpoint to resume from, or None to train from scratch (no file, or a superseded one).

        Raises for an unfinished run of other settings, data or number of processes.
        """
        payload = self._load()
        if payload is None:
            return None
        same_run = (payload.get("config_hash") == self.config_hash
                    and payload.get("data_fingerprint") == self.data_fingerprint)
        if payload.get("finished") and not same_run:
            if self.context.is_main:
                log.warning("checkpoint %s holds a finished run of other settings or data (%s); training from "
                            "scratch, the first checkpoint of this run replaces it", self.path,
                            _changes(payload.get("config", {}), self.config))
            return None
        check_resumable(self.path, payload, self.config, self.config_hash, self.data_fingerprint)
        if _probes(self.config) and not _probes(payload.get("config", {})):
            # same settings, but its dynamics log has empty probe columns this run must fill
            if payload.get("finished"):
                if self.context.is_main:
                    log.warning("checkpoint %s holds this run finished without the gradient probe, which it "
                                "now runs (dynamics_probe true); training from scratch for the probe columns, "
                                "the first checkpoint of this run replaces it", self.path)
                return None
            raise RuntimeError(
                f"checkpoint {self.path} belongs to this run trained without the gradient probe "
                f"(dynamics_probe false) up to step {payload['state']['step']}, and the run now probes: resuming "
                f"would leave the probe columns of dynamics.csv empty up to there. Delete the checkpoint to train "
                f"from scratch with the probe (rm {self.path}), or go on without it (--set dynamics_probe=false)")
        check_world_size(self.path, payload, self.context.world_size)
        self.saved_step = int(payload["state"]["step"])
        return payload

    def _load(self) -> dict | None:
        """``last.pt``, or ``previous.pt`` when ``last.pt`` cannot be read; None without ``last.pt``.

        Nothing is renamed here, so every rank reads the same files; the unreadable ``last.pt`` is moved
        aside by the next save instead of becoming the previous one. Without ``last.pt`` (deleted by hand
        to start over, as error messages suggest) a leftover ``previous.pt`` is deleted, not resumed.
        """
        if not self.path.is_file():
            if self.context.is_main:
                self.previous.unlink(missing_ok=True)
            return None
        try:
            return load_checkpoint(self.path)
        except CheckpointUnreadableError as err:
            if not self.previous.is_file():
                raise
            payload = load_checkpoint(self.previous)
            self.unreadable = self.path.with_name(self.path.name + ".unreadable")
            if self.context.is_main:
                log.warning("%s; resuming from the checkpoint before it, %s (step %d); the unreadable file will be "
                            "kept as %s", err, self.previous, payload["state"]["step"], self.unreadable)
            return payload

    def restore(self, payload: dict, parts: Resumable) -> TrainState:
        """Load ``payload`` into ``parts`` and the RNGs; returns the run's state.

        Call it last before the loop: it restores the RNG streams, and nothing may draw numbers after.
        A finished checkpoint may lack the optimizer moments (``keep_checkpoint: weights``); no step
        needs them.
        """
        parts.model.load_state_dict(payload["model"])
        parts.framework.load_state_dict(payload["framework"])
        if "optimizer" in payload:
            parts.optimizer.load_state_dict(payload["optimizer"])
        elif not payload.get("finished"):
            raise RuntimeError(f"checkpoint {self.path} of an unfinished run has no optimizer state; delete it to "
                               f"train from scratch: rm {self.path}")
        parts.scheduler.load_state_dict(payload["scheduler"])
        if parts.scaler is not None:  # precision is hashed: a checkpoint of an fp16 run always has it
            if "scaler" not in payload:
                raise RuntimeError(f"checkpoint {self.path} of an fp16 run has no gradient scaler state; delete "
                                   f"it to train from scratch: rm {self.path}")
            parts.scaler.load_state_dict(payload["scaler"])
        if self.context.is_main:
            for name, csv_log in parts.logs.items():
                csv_log.start(payload["logs"].get(name))  # a log added later starts empty
        rng = payload["rng_by_rank"][self.context.rank] if self.context.is_distributed else payload["rng"]
        restore_rng_state(rng)
        return TrainState(**payload["state"])

    def save(self, state: TrainState, parts: Resumable, finished: bool, accum_steps: int) -> None:
        """Write the checkpoint of ``state`` (every rank calls this: it gathers each rank's RNG stream).

        A finished run's checkpoint leaves out the optimizer moments unless ``keep`` is ``full``.
        """
        rng_states = self.context.all_gather_object(capture_rng_state())
        if self.context.is_main:
            payload = {
                "config": self.config, "config_hash": self.config_hash, "data_fingerprint": self.data_fingerprint,
                "state": asdict(state), "world_size": self.context.world_size, "finished": finished,
                "data_position": {"epoch": state.epoch, "micro_batch": state.batch_in_epoch * accum_steps,
                                  "samples_seen": state.samples_seen},
                "model": parts.model.state_dict(), "framework": parts.framework.state_dict(),
                "scheduler": parts.scheduler.state_dict(),
                "rng": rng_states[0], **({"rng_by_rank": rng_states} if self.context.is_distributed else {}),
                "margin_features": None if parts.margin_features is None else parts.margin_features.cpu(),
                **({"scaler": parts.scaler.state_dict()} if parts.scaler is not None else {}),
                "logs": {name: csv_log.read_text() for name, csv_log in parts.logs.items()},
            }
            if not finished or self.keep == "full":
                payload["optimizer"] = parts.optimizer.state_dict()
            if self.unreadable is not None:  # resumed from previous.pt: it stays the previous one
                os.replace(self.path, self.unreadable)
                self.unreadable = None
            elif self.path.is_file():  # kept first: until the new last.pt is whole, both names hold the old one
                _keep_previous(self.path, self.previous)
            save_checkpoint(self.path, payload)
        self.saved_step = state.step
        self.context.barrier()  # the other ranks wait for the file

    def finish(self) -> None:
        """Apply ``keep: none`` once the run's outputs are written (rank 0); the previous checkpoint, a
        fallback for resuming, goes in every case (a finished run resumes nothing)."""
        if self.context.is_main:
            self.previous.unlink(missing_ok=True)
            if self.keep == "none":
                self.path.unlink(missing_ok=True)
