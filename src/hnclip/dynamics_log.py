"""The columns of a run's ``dynamics.csv``, shared by its writer and its readers.

The writer (:mod:`hnclip.training.dynamics`, the training loop) needs torch; the readers
(:mod:`hnclip.analysis.premise`, the report) run in the report's environment, which has no torch. So the
names live here, in a module that imports nothing but the standard library, as does the rule that says
which runs play a premise role (:func:`settings_role`), shared by the report and the plan.

``infonce_micro`` (every step): the standard InfoNCE of each of the step's micro-batches, in the order
they were trained (accumulation position 0, 1, ...), space-separated, each the shortest text that reads
back to the same double. With the run's seed and :func:`hnclip.training.batches.epoch_order` it says
which training rows each saturated micro-batch held (:mod:`hnclip.analysis.regime`). Logs written before
the column existed lack it (or, for a run resumed across the change, hold it empty for the earlier steps).
"""

import math
from collections.abc import Mapping

__all__ = ["CHEAP_COLUMNS", "DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPE_NAMES",
           "EXACT_ZERO_QUANTITIES", "MICRO_BATCH_INFONCE", "PROBE_COLUMNS", "PROBE_ROLES", "ROLES",
           "SATURATION_LOSS", "format_micro_batch_losses", "is_plain_run", "parse_micro_batch_losses", "settings_role",
           "summary_role"]

SATURATION_LOSS = 1e-3  # a micro-batch whose standard loss is below this counts as saturated
EXACT_ZERO_DTYPE_NAMES = ("fp32", "bf16")  # the precisions each exact-zero measurement is taken in
EXACT_ZERO_QUANTITIES = ("loss", "positive_logit_grad", "feature_grad", "param_grad")
EXACT_ZERO_COLUMNS = tuple(f"zero_{q}_{d}" for q in EXACT_ZERO_QUANTITIES for d in EXACT_ZERO_DTYPE_NAMES)
MICRO_BATCH_INFONCE = "infonce_micro"
# what every step logs: the loop computes these anyway (losses, saturation shares, learning rate, scale)
CHEAP_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce", "saturated_share",
                 "objective_active_share", MICRO_BATCH_INFONCE)
# what only a probed step logs (hnclip.training.dynamics.GradientProbe); empty on every other row, and on
# every row of a run that does not probe (TrainConfig.dynamics_probe false): the file keeps one header
PROBE_COLUMNS = ("grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero",
                 "saturated_fraction", "grad_norm_standard_fp32", *EXACT_ZERO_COLUMNS)
# new columns go at the end: a run resumed from a checkpoint of an older loop keeps its log (CsvLog.start)
DYNAMICS_COLUMNS = (*CHEAP_COLUMNS[:-1], *PROBE_COLUMNS, MICRO_BATCH_INFONCE)


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


# --------------------------------------------------------------------- which runs play a premise role
ROLES = ("plain", "hn", "hnclip")
# the roles whose runs' probe columns hnclip.analysis.premise reads (exact zeros; gradient ratio and
# cosine); the hnclip role is read for its per-epoch retrieval (epochs.csv) only
PROBE_ROLES = ("plain", "hn")


def settings_role(config: Mapping, subset: bool, gamma: float | None) -> str | None:
    """``plain``, ``hn``, ``hnclip`` or None for a run's settings (``TrainConfig.to_dict()``, as its
    ``summary.json`` holds them) and whether it trains on a subset.

    All roles are full-data Long-CLIP-framework fine-tuning with recomputed margins and no short-caption
    term: ``plain`` is gamma 0 without the token term, ``hn`` gamma = ``gamma`` without it, ``hnclip``
    gamma = ``gamma`` with it. ``gamma``: the config's (no default here: the schema holds it); None
    recognises the one role that needs none, ``plain``. The report's premise
    (:mod:`hnclip.analysis.premise`) classifies finished runs with it; :func:`hnclip.plan.probe_readers`
    classifies planned runs with it, so that exactly the runs the premise reads are the ones that probe.
    """
    if subset or config.get("framework") != "longclip":
        return None
    short_weight = (config.get("longclip") or {}).get("short_weight", 0.0)  # Long-CLIP's short-caption term
    if config.get("margin", "recompute") != "recompute" or short_weight:
        return None
    run_gamma, token = float(config.get("gamma", 0.0)), float(config.get("token_weight", 0.0))
    if run_gamma == 0 and token == 0:
        return "plain"
    if gamma is not None and math.isclose(run_gamma, gamma):
        return "hn" if token == 0 else "hnclip"
    return None


def summary_role(summary: Mapping, gamma: float | None) -> str | None:
    """:func:`settings_role` of a run's ``summary.json`` (its settings, and a subset where it names one)."""
    subset = bool(summary.get("run", {}).get("subset_path"))
    return settings_role(summary.get("config", {}), subset, gamma)


def is_plain_run(summary: Mapping) -> bool:
    """Whether a run's ``summary.json`` plays role ``plain`` (the one role that needs no gamma): the regime
    conditions read such runs, and the plan picks them (:func:`hnclip.plan.plain_runs`)."""
    return summary_role(summary, None) == "plain"
