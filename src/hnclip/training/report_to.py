"""Where a run's logged scalars also go while it trains: TensorBoard and Weights & Biases (``train.report_to``).

The CSV logs (``dynamics.csv`` every optimizer step, ``epochs.csv`` every epoch; :mod:`hnclip.training.logs`)
stay the record; a reporter receives each row as the loop appends it, so it shows the same numbers
(open_clip's ``--report-to tensorboard,wandb``):

- every step: the columns of ``dynamics.csv`` that hold a number (:data:`STEP_TAGS`: losses, learning
  rate, logit scale, saturated and active shares under ``train/``; the gradient probe's columns, on
  probed steps, under ``probe/``), at the row's ``step``;
- every epoch evaluated: each Recall@K of ``epochs.csv`` under ``eval/`` (``eval/<benchmark>/`` where the
  row names the test split it scores), at the epoch's last step.

``tensorboard``: event files in ``<out>/tensorboard/`` (``tensorboard --logdir results/runs`` shows every
run). A session writes the folder afresh from the CSV logs as they stand when it starts (a resumed run's
logs are those of its checkpoint), then appends live rows: the event files always hold exactly the CSV
logs' rows, none twice after a resume, and a run rebuilt from its finished checkpoint gets them back.

``wandb``: one W&B run per training run (project from ``WANDB_PROJECT``, default ``hnclip``; the run
named after the output folder; its id kept in ``<out>/wandb/hnclip-run-id`` so a resumed session
continues it; files under ``<out>/wandb/``). W&B reads its credentials (``WANDB_API_KEY``) and mode
(``WANDB_MODE=offline``: nothing leaves the machine; ``wandb sync`` uploads later) from the environment;
nothing here reads or logs them. Rows a resumed session recomputes carry steps W&B already has, which it
ignores (they are the same numbers: resume is bit-identical).

Costs: the values are Python numbers the loop has already computed (no device sync); each reporter
queues them to a background writer (TensorBoard's event-file thread, W&B's service process). With
``report_to`` empty nothing here is imported or called. Creating a reporter keeps the global random
streams as they were (a resumed run must continue bit for bit).
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import random
import secrets
import shutil
from pathlib import Path

import numpy as np
import torch

from hnclip.dynamics_log import CHEAP_COLUMNS, DYNAMICS_COLUMNS, MICRO_BATCH_INFONCE

__all__ = ["EVAL_PREFIX", "RunReport", "STEP_TAGS", "TENSORBOARD_DIR", "WANDB_DIR", "epoch_tags", "open_report"]

TENSORBOARD_DIR = "tensorboard"
WANDB_DIR = "wandb"
WANDB_ID_FILE = "hnclip-run-id"
EVAL_PREFIX = "eval/"
# dynamics.csv column -> tag; step and epoch are the axis, infonce_micro is a list of numbers
STEP_TAGS = {column: ("train/" if column in CHEAP_COLUMNS else "probe/") + column
             for column in DYNAMICS_COLUMNS if column not in ("step", "epoch", MICRO_BATCH_INFONCE)}


def epoch_tags(row) -> dict[str, str]:
    """An epochs.csv row's column -> tag: every column but the axis (epoch, step) and the name of the test
    split it scores (``benchmark``, when the row has one: it joins the tag)."""
    benchmark = row.get("benchmark") or ""
    prefix = f"{EVAL_PREFIX}{benchmark}/" if benchmark else EVAL_PREFIX
    return {column: prefix + column for column in row if column not in ("epoch", "step", "benchmark")}


def _number(value) -> float | None:
    """A cell as a float: a float as the loop produced it, or a CSV cell read back; None for an empty one."""
    if value is None or value == "":
        return None
    return float(value)


@contextlib.contextmanager
def _random_streams_kept():
    """Python's, numpy's and torch's global random streams as they were, whatever runs inside."""
    python, numpy_state, torch_state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    try:
        yield
    finally:
        random.setstate(python)
        np.random.set_state(numpy_state)
        torch.set_rng_state(torch_state)


class _TensorBoard:
    def __init__(self, out_dir: Path, flush_secs: int):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:  # torch's writer needs the tensorboard package
            raise RuntimeError("TrainConfig.report_to (train.report_to) names tensorboard, but the tensorboard "
                               "package cannot be imported (it is pinned in pyproject.toml's train extra and "
                               f"envs/train.yaml): {err}") from err
        folder = out_dir / TENSORBOARD_DIR
        shutil.rmtree(folder, ignore_errors=True)  # written afresh from the CSV logs (the module docstring)
        self.writer = SummaryWriter(log_dir=str(folder), flush_secs=flush_secs)

    def scalars(self, values: dict[str, float], step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)

    def close(self) -> None:
        self.writer.close()


class _WandB:
    def __init__(self, out_dir: Path, run_name: str, config: dict, resumed: bool):
        try:
            import wandb
        except ImportError as err:
            raise RuntimeError("TrainConfig.report_to (train.report_to) names wandb, but the wandb package "
                               f"cannot be imported (pip install it: pyproject.toml's wandb extra): {err}") from err
        folder = out_dir / WANDB_DIR
        folder.mkdir(parents=True, exist_ok=True)
        id_file = folder / WANDB_ID_FILE
        if resumed and id_file.is_file():
            run_id = id_file.read_text().strip()
        else:  # a run trained from its first step is a new W&B run (secrets: no global random stream)
            run_id = secrets.token_hex(8)
            id_file.write_text(run_id + "\n")
        # console="off": W&B leaves stdout (the progress lines) and stderr (the job's log) alone
        try:
            self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "hnclip", name=run_name, id=run_id,
                                  resume="allow", dir=str(out_dir), config=config,
                                  settings=wandb.Settings(console="off", quiet=True))
        except Exception as err:  # no credentials, no network: say which setting asked for it
            raise RuntimeError(f"TrainConfig.report_to (train.report_to) names wandb, but wandb.init failed "
                               f"({type(err).__name__}: {err}); give W&B its credentials in the environment "
                               "(WANDB_API_KEY), or set WANDB_MODE=offline and `wandb sync` later") from err

    def scalars(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def close(self) -> None:
        self.run.finish()


class RunReport:
    """The reporters of one training session (rank 0): rows in, scalars out, closed at the end."""

    def __init__(self, writers: list):
        self.writers = writers

    def step(self, row: dict) -> None:
        """One dynamics.csv row as the loop appends it."""
        values = {}
        for column, tag in STEP_TAGS.items():
            value = _number(row.get(column))
            if value is not None:
                values[tag] = value
        for writer in self.writers:
            writer.scalars(values, int(row["step"]))

    def epoch(self, row: dict) -> None:
        """One epochs.csv row as the loop appends it."""
        values = {tag: value for column, tag in epoch_tags(row).items()
                  if (value := _number(row.get(column))) is not None}
        for writer in self.writers:
            writer.scalars(values, int(row["step"]))

    def replay(self, dynamics_text: str, epochs_text: str) -> None:
        """The rows already in the CSV logs (a resumed session's), in step order."""
        rows = [(int(r["step"]), 0, r) for r in csv.DictReader(io.StringIO(dynamics_text))]
        rows += [(int(r["step"]), 1, r) for r in csv.DictReader(io.StringIO(epochs_text))]
        for _, kind, row in sorted(rows, key=lambda item: item[:2]):
            (self.epoch if kind else self.step)(row)

    def close(self) -> None:
        for writer in self.writers:
            writer.close()


def open_report(names, out_dir, run_name: str, config: dict, dynamics_text: str, epochs_text: str,
                resumed: bool, flush_secs: float = 10.0) -> RunReport | None:
    """The reporters ``names`` (TrainConfig.reporters) of a session writing ``out_dir``; None for none.

    TensorBoard starts from the CSV logs' text (``dynamics_text``, ``epochs_text``) and writes its queue to
    disk every ``flush_secs`` (what a live ``tensorboard`` sees); W&B continues the run's W&B run when
    ``resumed``. The global random streams are left as they were.
    """
    if not names:
        return None
    out_dir = Path(out_dir)
    writers = []
    with _random_streams_kept():
        try:
            for name in names:
                if name == "tensorboard":
                    writers.append(_TensorBoard(out_dir, max(1, math.ceil(flush_secs))))
                elif name == "wandb":
                    writers.append(_WandB(out_dir, run_name, config, resumed))
                else:
                    raise ValueError(f"TrainConfig.report_to: unknown reporter {name!r}")
            # W&B is not replayed: its run holds the earlier sessions' rows already
            board = [w for w in writers if isinstance(w, _TensorBoard)]
            RunReport(board).replay(dynamics_text, epochs_text)
        except BaseException:
            for writer in writers:
                writer.close()
            raise
    return RunReport(writers)
