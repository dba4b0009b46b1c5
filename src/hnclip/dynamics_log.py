"""The columns of a run's ``dynamics.csv``, shared by its writer and its readers.

The writer (:mod:`hnclip.training.dynamics`, the training loop) needs torch; the readers
(:mod:`hnclip.analysis.premise`, the report) run in the report's environment, which has no torch. So the
names live here, in a module that imports nothing.
"""

__all__ = ["DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPE_NAMES", "EXACT_ZERO_QUANTITIES",
           "SATURATION_LOSS"]

SATURATION_LOSS = 1e-3  # a micro-batch whose standard loss is below this counts as saturated
EXACT_ZERO_DTYPE_NAMES = ("fp32", "bf16")  # the precisions each exact-zero measurement is taken in
EXACT_ZERO_QUANTITIES = ("loss", "positive_logit_grad", "feature_grad", "param_grad")
EXACT_ZERO_COLUMNS = tuple(f"zero_{q}_{d}" for q in EXACT_ZERO_QUANTITIES for d in EXACT_ZERO_DTYPE_NAMES)
DYNAMICS_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce", "saturated_share",
                    "objective_active_share",
                    "grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine", "standard_grad_zero",
                    "saturated_fraction", "grad_norm_standard_fp32", *EXACT_ZERO_COLUMNS)
