"""Spec files: an experiment's cells as the tables, figures and report read them (``results/specs/``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hnclip.plan.grid import experiment_spec

__all__ = ["spec_digest", "spec_text", "write_spec", "write_spec_file"]


def spec_text(spec: dict) -> str:
    """A spec as its file holds it (sorted keys, so equal specs are equal files)."""
    return json.dumps(spec, indent=1, sort_keys=True) + "\n"


def spec_digest(config: dict, name: str) -> str:
    """SHA-256 of the spec file :func:`write_spec` would write: changes exactly when the file would."""
    return hashlib.sha256(spec_text(experiment_spec(config, name)).encode()).hexdigest()


def write_spec(config: dict, name: str, path, log=None) -> Path:
    """Write experiment ``name``'s spec (``results/specs/{name}.json``): the file the tables, figures and
    report of that experiment read, so no spec travels on a command line (the paper grid's are 6-18 KB each,
    ~60 KB together, half of Linux's 128 KB limit on one argument).
    """
    return write_spec_file(experiment_spec(config, name), path, log=log)


def write_spec_file(spec: dict, path, log=None) -> Path:
    """Write one spec (an experiment's, or the protocol table's) atomically; ``log`` gets one line: the
    file, its cells, the runs they name and the file's SHA-256."""
    from hnclip.fileio import write_text_atomic

    text = spec_text(spec)
    path = write_text_atomic(path, text)
    if log is not None:
        cells = json.loads(text)["cells"]
        runs = {c["run_dir"] for c in cells if c.get("run_dir")}  # the zero-shot row names no run
        write_text_atomic(log, f"{path}: {len(cells)} cells, {len(runs)} runs, sha256 "
                               f"{hashlib.sha256(text.encode()).hexdigest()}\n")
    return path
