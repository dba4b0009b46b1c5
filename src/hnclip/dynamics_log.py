"""The columns of a run's ``dynamics.csv``, shared by its writer and its readers.

The writer (:mod:`hnclip.training.dynamics`, the training loop) needs torch; the readers
(:mod:`hnclip.analysis.premise`, the report) run in the report's environment, which has no torch. So the
names live here, in a module that imports nothing.

``infonce_micro`` (every step): the standard InfoNCE of each of the step's micro-batches, in the order
they were trained (accumulation position 0, 1, ...), space-separated, each the shortest text that reads
back to the same double. With the run's seed and :func:`hnclip.training.batches.epoch_order` it says
which training rows each saturated micro-batch held (:mod:`hnclip.analysis.regime`). Logs written before
the column existed lack it (or, for a run resumed across the change, hold it empty for the earlier steps).
"""

import math

__all__ = ["DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPE_NAMES", "EXACT_ZERO_QUANTITIES",
           "MICRO_BATCH_INFONCE", "SATURATION_LOSS", "format_micro_batch_losses", "parse_micro_batch_losses"]

SATURATION_LOSS = 1e-3  # a micro-batch whose standard loss is below this counts as saturated
EXACT_ZERO_DTYPE_NAMES = ("fp32", "bf16")  # the precisions each exact-zero measurement is taken in
EXACT_ZERO_QUANTITIES = ("loss", "positive_logit_grad", "feature_grad", "param_grad")
EXACT_ZERO_COLUMNS = tuple(f"zero_{q}_{d}" for q in EXACT_ZERO_QUANTITIES for d in EXACT_ZERO_DTYPE_NAMES)
MICRO_BATCH_INFONCE = "infonce_micro"
# new columns go at the end: a run resumed from a checkpoint of an older loop keeps its log (CsvLog.start)
DYNAMICS_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce", "saturated_share",
                    "objective_active_share",
                    "grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero",
                    "saturated_fraction", "grad_norm_standard_fp32", *EXACT_ZERO_COLUMNS, MICRO_BATCH_INFONCE)


def format_micro_batch_losses(losses) -> str:
    """The ``infonce_micro`` cell of one step: each micro-batch's standard InfoNCE, space-separated."""
    return " ".join(repr(float(v)) for v in losses)


def parse_micro_batch_losses(cell) -> list[float] | None:
    """The losses of an ``infonce_micro`` cell; None for an empty cell (a step logged before the column)."""
    if cell is None or (isinstance(cell, float) and math.isnan(cell)):
        return None
    text = str(cell).strip()
    if not text:
        return None
    return [float(v) for v in text.split()]
