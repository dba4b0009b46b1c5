"""Typed settings dataclasses: fields with help text, values read from ``key=value`` text or parsed YAML.

Shared by :class:`hnclip.config.train.TrainConfig` and the frameworks' settings
(:mod:`hnclip.frameworks.settings`), so that ``gamma=0.5`` on the command line, ``gamma: 0.5`` in YAML and
``TrainConfig(gamma=0.5)`` give the same value and a bad one fails naming the key. Torch-free. A module of its
own below both packages: TrainConfig composes the frameworks' settings, so the config package sits above the
frameworks and neither imports the other back.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import field

__all__ = ["check_bounds", "coerce_numbers", "field_bounds", "field_types", "help_field", "parse_value"]

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}
_TYPES: dict[type, dict[str, type]] = {}


def help_field(default, text: str, *, minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None,
               choices: tuple[str, ...] | None = None):
    """A dataclass field with a default, the help text that ``hnclip train --help`` shows and its range.

    The range (JSON-schema bounds, or the allowed ``choices``) is checked by :func:`check_bounds` and
    written into the workflow schema by ``workflow/scripts/config_docs.py``, so both read it from here.
    """
    bounds = {"minimum": minimum, "maximum": maximum, "exclusiveMinimum": exclusive_minimum,
              "exclusiveMaximum": exclusive_maximum, "enum": list(choices) if choices is not None else None}
    bounds = {k: v for k, v in bounds.items() if v is not None}
    return field(default=default, metadata={"help": text, "bounds": bounds})


def field_bounds(f: dataclasses.Field) -> dict:
    """The field's JSON-schema bounds (``minimum``, ``exclusiveMaximum``, ``enum``, ...) from :func:`help_field`."""
    return dict(f.metadata.get("bounds", {}))


def bounds_violation(value, bounds: dict) -> str | None:
    """Why ``value`` is outside ``bounds`` ("must be >= 0", "is not one of a, b"), or None."""
    if "enum" in bounds:
        return None if value in bounds["enum"] else f"is not one of {', '.join(map(str, bounds['enum']))}"
    low = bounds.get("minimum", bounds.get("exclusiveMinimum"))
    high = bounds.get("maximum", bounds.get("exclusiveMaximum"))
    low_open, high_open = "exclusiveMinimum" in bounds, "exclusiveMaximum" in bounds
    ok = (low is None or (value > low if low_open else value >= low)) and \
         (high is None or (value < high if high_open else value <= high))
    if ok:
        return None
    if low is not None and high is not None:
        return f"must be in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"must be {'>' if low_open else '>='} {low}"
    return f"must be {'<' if high_open else '<='} {high}"


def check_bounds(obj, where: str) -> None:
    """Raise ValueError naming ``<where>.<field>=value`` for the first field outside its declared range."""
    for f in dataclasses.fields(obj):
        bounds = field_bounds(f)
        why = bounds and bounds_violation(getattr(obj, f.name), bounds)
        if why:
            raise ValueError(f"{where}.{f.name}={getattr(obj, f.name)!r} {why}")


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
