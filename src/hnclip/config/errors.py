"""How a config check reports a problem: :func:`fail` raises the :class:`ConfigError` naming the offending key,
:func:`unknown` words a name that is not configured. A module of its own, below every check (the plan's, the
experiments', the released checkpoints', :mod:`hnclip.config_checks`), so each can raise without importing
another."""

from __future__ import annotations

from hnclip.config.validation import ConfigError, did_you_mean

__all__ = ["fail", "unknown"]


def fail(key: str, message: str):
    """Raise the :class:`ConfigError` ``config key KEY: MESSAGE``."""
    raise ConfigError(f"config key {key}: {message}")


def unknown(kind: str, name: str, known) -> str:
    """``unknown method 'hnclp'; did you mean 'hnclip'?`` (or the known names when none is close)."""
    return f"unknown {kind} {name!r}; {did_you_mean(name, known)}"
