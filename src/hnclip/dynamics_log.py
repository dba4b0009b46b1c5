"""The columns of a run's ``dynamics.csv``, shared by its writer and its readers.

The writer (:mod:`hnclip.training.dynamics`, the training loop) needs torch; the readers
(:mod:`hnclip.analysis.premise`, the report) run in the report's environment, which has no torch. So the
names live here, in a module that imports nothing but the standard library, as does the rule that says
which runs play a premise role (:func:`settings_role`), shared by the report and the plan.
"""

import math
from collections.abc import Mapping

__all__ = ["CHEAP_COLUMNS", "DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPE_NAMES",
           "EXACT_ZERO_QUANTITIES", "PAPER_GAMMA", "PROBE_COLUMNS", "PROBE_ROLES", "ROLES", "SATURATION_LOSS",
           "settings_role"]

SATURATION_LOSS = 1e-3  # a micro-batch whose standard loss is below this counts as saturated
EXACT_ZERO_DTYPE_NAMES = ("fp32", "bf16")  # the precisions each exact-zero measurement is taken in
EXACT_ZERO_QUANTITIES = ("loss", "positive_logit_grad", "feature_grad", "param_grad")
EXACT_ZERO_COLUMNS = tuple(f"zero_{q}_{d}" for q in EXACT_ZERO_QUANTITIES for d in EXACT_ZERO_DTYPE_NAMES)
# what every step logs: the loop computes these anyway (losses, saturation shares, learning rate, scale)
CHEAP_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce", "saturated_share",
                 "objective_active_share")
# what only a probed step logs (hnclip.training.dynamics.GradientProbe); empty on every other row, and on
# every row of a run that does not probe (TrainConfig.dynamics_probe false): the file keeps one header
PROBE_COLUMNS = ("grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero",
                 "saturated_fraction", "grad_norm_standard_fp32", *EXACT_ZERO_COLUMNS)
DYNAMICS_COLUMNS = (*CHEAP_COLUMNS, *PROBE_COLUMNS)

# --------------------------------------------------------------------- which runs play a premise role
ROLES = ("plain", "hn", "hnclip")
PAPER_GAMMA = 0.5
# the roles whose runs' probe columns hnclip.analysis.premise reads (exact zeros; gradient ratio and
# cosine); the hnclip role is read for its per-epoch retrieval (epochs.csv) only
PROBE_ROLES = ("plain", "hn")


def settings_role(config: Mapping, subset: bool, gamma: float = PAPER_GAMMA) -> str | None:
    """``plain``, ``hn``, ``hnclip`` or None for a run's settings (``TrainConfig.to_dict()``, as its
    ``summary.json`` holds them) and whether it trains on a subset.

    All roles are full-data Long-CLIP-framework fine-tuning with recomputed margins and no short-caption
    term: ``plain`` is gamma 0 without the token term, ``hn`` gamma = ``gamma`` without it, ``hnclip``
    gamma = ``gamma`` with it. The report's premise (:mod:`hnclip.analysis.premise`) classifies finished
    runs with it; :func:`hnclip.plan.probe_readers` classifies planned runs with it, so that exactly the
    runs the premise reads are the ones that probe.
    """
    if subset or config.get("framework") != "longclip":
        return None
    short_weight = (config.get("longclip") or {}).get("short_weight", 0.0)  # Long-CLIP's short-caption term
    if config.get("margin", "recompute") != "recompute" or short_weight:
        return None
    run_gamma, token = float(config.get("gamma", 0.0)), float(config.get("token_weight", 0.0))
    if run_gamma == 0 and token == 0:
        return "plain"
    if math.isclose(run_gamma, gamma):
        return "hn" if token == 0 else "hnclip"
    return None
