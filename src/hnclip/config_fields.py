"""Typed settings dataclasses: fields with help text, values read from ``key=value`` text or parsed YAML.

Shared by :class:`hnclip.train_config.TrainConfig` and the frameworks' settings
(:mod:`hnclip.frameworks.settings`), so that ``gamma=0.5`` on the command line, ``gamma: 0.5`` in YAML and
``TrainConfig(gamma=0.5)`` give the same value and a bad one fails naming the key. Torch-free.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import field

__all__ = ["coerce_numbers", "field_types", "help_field", "parse_value"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_TYPES: dict[type, dict[str, type]] = {}


def help_field(default, text: str):
    """A dataclass field with a default and the help text that ``hnclip train --help`` shows."""
    return field(default=default, metadata={"help": text})


def field_types(cls) -> dict[str, type]:
    """Field name -> its type (annotations are strings under ``from __future__ import annotations``)."""
    if cls not in _TYPES:
        hints = typing.get_type_hints(cls)
        resolved = {}
        for f in dataclasses.fields(cls):
            hint = hints[f.name]
            if isinstance(hint, types.UnionType):  # `int | None`: the non-None member
                hint = next(a for a in hint.__args__ if a is not type(None))
            resolved[f.name] = hint
        _TYPES[cls] = resolved
    return _TYPES[cls]


def coerce_numbers(obj) -> None:
    """Turn ints given for float fields into floats (``gamma: 1`` in YAML), in place (frozen or not)."""
    for name, kind in field_types(type(obj)).items():
        value = getattr(obj, name)
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            object.__setattr__(obj, name, float(value))


def parse_value(where: str, kind: type, value: object):
    """``value`` (text from the command line, or an already typed YAML value) as ``kind``.

    ``where`` names the key in errors (``TrainConfig.gamma``). Ints refuse "2.5" rather than truncate it.
    """
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValueError(f"{where}: cannot read {value!r} as a boolean (true/false/1/0/yes/no)")
    if kind in (int, float):
        if isinstance(value, bool):
            raise ValueError(f"{where}: expected a number, got the boolean {value!r}")
        if isinstance(value, kind) or (kind is float and isinstance(value, int)):
            return kind(value)
        try:
            text = str(value).strip()
            if kind is int:
                try:
                    return int(text)
                except ValueError:
                    number = float(text)  # accepts "1e3"
                    if not number.is_integer():
                        raise
                    return int(number)
            return float(text)
        except ValueError:
            raise ValueError(f"{where}: cannot read {value!r} as {kind.__name__}") from None
    if kind is str:
        return str(value)
    raise TypeError(f"{where}: no parser for fields of type {kind!r}")
