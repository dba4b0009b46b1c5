"""The workflow config as Snakemake builds it, outside Snakemake: for ``hnclip plan``, the benchmarks' scripts
and the tests.

The config file(s) alone (a ``--configfile`` replaces the embedded default; several layer in order, later
keys winning and mappings merging, with Snakemake's own merge), validated against the schema with its
defaults filled in (:mod:`hnclip.config.validation`), then cross-checked by :func:`hnclip.config_checks.check_config`;
and a profile's resources as Snakemake layers them over a rule's own.
"""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["job_resources", "load_config", "profile_train_resources"]


def _schema_path() -> Path:
    candidates = [Path.cwd() / "workflow/schemas/config.schema.yaml",
                  Path(__file__).resolve().parents[3] / "workflow/schemas/config.schema.yaml"]
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError("hnclip plan: workflow/schemas/config.schema.yaml not found in "
                            + " or ".join(str(p.parent.parent.parent) for p in candidates))


def load_config(configfiles) -> dict:
    """The config exactly as the workflow sees it: the file(s) alone (a --configfile replaces the embedded
    default; several layer in order, later keys winning and mappings merging, as Snakemake layers them),
    validated with defaults filled in, then cross-checked by :func:`hnclip.config_checks.check_config`."""
    from snakemake.utils import update_config  # Snakemake's own merge of several --configfile

    from hnclip.config.validation import load_config_file, validate_config
    from hnclip.config_checks import check_config

    paths = [Path(configfiles)] if isinstance(configfiles, str | Path) else [Path(p) for p in configfiles]
    config: dict = {}
    for configfile in paths:
        if not configfile.is_file():
            raise FileNotFoundError(f"hnclip plan: config file {configfile} does not exist")
        update_config(config, load_config_file(configfile))  # a syntax error names file, line and column
    validate_config(config, _schema_path())
    check_config(config)
    return config


def _profile_data(profile) -> dict:
    profile = Path(profile)
    path = next((p for p in (profile / "config.yaml", profile / "profile.yaml", profile) if p.is_file()), None)
    if path is None:
        raise FileNotFoundError(f"hnclip plan: no config.yaml in profile {profile}")
    return yaml.safe_load(path.read_text()) or {}


def profile_train_resources(profile) -> dict:
    """Resources the profile gives train jobs: its set-resources.train over its default-resources."""
    data = _profile_data(profile)
    return {**(data.get("default-resources") or {}), **((data.get("set-resources") or {}).get("train") or {})}


def job_resources(config: dict, kind: str, profile=None) -> dict:
    """What a ``train``/``evaluate`` job asks for: the profile's default-resources, under the config's
    ``resources.<kind>`` (the rules' own), under the profile's set-resources (which override a rule's)."""
    data = _profile_data(profile) if profile else {}
    return {**(data.get("default-resources") or {}), **(config.get("resources", {}).get(kind) or {}),
            **((data.get("set-resources") or {}).get(kind) or {})}
