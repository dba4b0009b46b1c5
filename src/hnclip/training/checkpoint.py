"""Resumable checkpoints: one ``last.pt`` written atomically, readable with ``weights_only=True``.

Everything that influences later steps is in it (weights, optimizer moments, scheduler counters, RNG
states, data position, frozen-margin features), so a run killed at any point and restarted ends with
the same bits as one that was never interrupted. RNG states are stored as tensors and plain lists:
numpy arrays and Python's random tuples would need unpickling of arbitrary objects.
"""

from __future__ import annotations

import os
import random
import tempfile
from pathlib import Path

import numpy as np
import torch

__all__ = ["CHECKPOINT_NAME", "capture_rng_state", "check_resumable", "load_checkpoint", "restore_rng_state",
           "save_checkpoint"]

CHECKPOINT_NAME = "last.pt"
FORMAT_VERSION = 1


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


def save_checkpoint(path, payload: dict) -> None:
    """Write ``payload`` to ``path`` via a temporary file in the same folder and ``os.replace``.

    A crash mid-write leaves the previous checkpoint intact (and at worst a stray ``.tmp`` file);
    fsync before the rename so the new file is complete on disk when its name appears.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
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


def load_checkpoint(path) -> dict:
    path = Path(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        raise RuntimeError(f"cannot read checkpoint {path} ({err}); delete it (rm {path}) to start over") from err
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
