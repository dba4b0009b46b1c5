"""The workflow config as Snakemake builds it, outside Snakemake: for ``hnclip plan``, ``hnclip tune``, the
benchmarks' scripts and the tests.

Reading and validating the file(s) is the config package's job (:func:`hnclip.config.loading.read_config`);
the cross-checks between sections (:func:`hnclip.config_checks.check_config`) read the frameworks, the released
models and the plan, which build on that package. Joining the two here keeps the config package below them.
"""

from __future__ import annotations

from hnclip.config.loading import read_config
from hnclip.config_checks import check_config

__all__ = ["load_config"]


def load_config(configfiles) -> dict:
    """The config exactly as the workflow sees it: the file(s) alone (a --configfile replaces the embedded
    default; several layer in order, later keys winning and mappings merging, as Snakemake layers them),
    validated with defaults filled in, then cross-checked by :func:`hnclip.config_checks.check_config`."""
    config = read_config(configfiles)
    check_config(config)
    return config
