"""Validate a workflow config against ``workflow/schemas/config.schema.yaml`` with errors a person can act on.

Snakemake's own ``validate`` reports a failure as jsonschema's message followed by the whole schema (over a
thousand lines for this one); here each error is one line: the key path, what is wrong, and for a typo'd
key or value the closest valid name (difflib). Defaults are then filled by Snakemake's validator, so the
rules and ``hnclip plan`` see exactly the config Snakemake would build.

``--config`` values nested in a mapping reach the workflow as text (Snakemake parses them with YAML's
BaseLoader: ``--config train={epochs: 5}`` gives ``{"epochs": "5"}``). :func:`coerce_cli_values` converts
such text to the number, boolean or null the schema asks for (in a free-form mapping such as
``resources.train``, to whatever scalar YAML would read), and touches nothing that came from a file.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from hnclip import paths

__all__ = ["ConfigError", "check_benchmark_roots", "coerce_cli_values", "did_you_mean", "format_key",
           "load_config_file", "load_schema", "validate_config"]

MAX_ERRORS = 10  # one mistake usually causes one error; a wrong file can cause dozens of the same kind
_INT = re.compile(r"[+-]?\d+")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


class ConfigError(ValueError):
    """A config that fails the schema or a cross-reference check; the message names the key."""


def load_schema(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"config schema {path} does not exist")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_config_file(path) -> dict:
    """One config file as a mapping; a YAML syntax error names the file, line and column (Snakemake's own
    loader says only "Config file is not valid JSON or YAML", without either)."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        with open(path, encoding="utf-8") as handle:
            data = yaml.safe_load(handle)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        what = " ".join(str(p) for p in (getattr(error, "context", None), getattr(error, "problem", None)) if p)
        raise ConfigError(f"config file {path}{where}: not valid YAML: {what or error}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path}: expected a mapping of keys at the top level, got "
                          f"{type(data).__name__}")
    return data


def format_key(path: Iterable) -> str:
    """``experiments.main.methods[0]`` from jsonschema's path parts (mapping keys and list indices)."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _resolve(schema: Mapping, root: Mapping) -> Mapping:
    """Follow a local ``$ref`` (``#/definitions/...``); the schema uses no other kind."""
    while isinstance(schema, Mapping) and "$ref" in schema:
        node = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def _types(schema: Mapping) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else list(kind)


_ANY_SCALAR = ["null", "integer", "number", "boolean", "string"]  # an untyped value: as YAML would read it


def _coerce_text(value: str, schema: Mapping):
    """Text from the command line as the scalar the schema allows, tried in YAML's order (null, integer,
    number, boolean); unchanged when none applies (then a string, or an error validation names)."""
    types = _types(schema) or _ANY_SCALAR
    text = value.strip()
    if "null" in types and text in ("null", "~"):
        return None
    if ("integer" in types or "number" in types) and _INT.fullmatch(text):
        return int(text)
    if "number" in types and _NUMBER.fullmatch(text):
        return float(text)
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true"
    return value


def _child(schema: Mapping, key) -> Mapping | None:
    """The schema of ``key`` in a mapping: its property, the additionalProperties schema, an empty schema
    in a free-form mapping, or None where unknown keys are errors (validation names them)."""
    extra = schema.get("additionalProperties", True)
    if key in schema.get("properties", {}):
        return schema["properties"][key]
    if isinstance(extra, Mapping):
        return extra
    return {} if extra else None


def _coerce_all(value, schema: Mapping, root: Mapping):
    schema = _resolve(schema, root)
    if isinstance(value, dict):
        for key, item in value.items():
            sub = _child(schema, key)
            if sub is not None:
                value[key] = _coerce_all(item, sub, root)
        return value
    if isinstance(value, list):
        items = schema.get("items")
        return [_coerce_all(v, items, root) for v in value] if isinstance(items, Mapping) else value
    if isinstance(value, str):
        return _coerce_text(value, schema)
    return value


def coerce_cli_values(config: dict, overrides: Mapping, schema: Mapping) -> dict:
    """Convert, in place, the text ``--config`` left in ``config`` (only at the keys ``overrides`` sets)."""

    def walk(target: dict, given: Mapping, node: Mapping) -> None:
        node = _resolve(node, schema)
        for key, value in given.items():
            sub = _child(node, key)
            if sub is None or key not in target:
                continue  # an unknown key: validation names it
            if isinstance(value, Mapping) and isinstance(target[key], dict):
                walk(target[key], value, sub)  # the config file may hold other keys of this mapping
            else:
                target[key] = _coerce_all(target[key], sub, schema)

    walk(config, overrides or {}, schema)
    return config


def _short(value, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def did_you_mean(word, choices: Iterable) -> str:
    """``did you mean 'train'?`` naming the closest of ``choices`` (difflib), else ``known: a, b, c``."""
    choices = [str(c) for c in choices]
    close = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else f"known: {', '.join(choices)}"


def _did_you_mean(word: str, choices: Iterable) -> str:
    choices = [str(c) for c in choices]
    return f"; {did_you_mean(word, choices)}" if choices else ""


def _messages(error) -> list[str]:
    """One line per problem of a jsonschema ValidationError: key path, what is wrong, a suggestion."""
    path = list(error.absolute_path)
    key = format_key(path)
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "additionalProperties" and isinstance(value, Mapping):
        known = list(error.schema.get("properties", {}))
        extra = [k for k in value if k not in known]
        return [f"config key {format_key([*path, k])}: unknown key{_did_you_mean(k, known)}" for k in extra]
    if kind == "required":
        missing = [k for k in expected if isinstance(value, Mapping) and k not in value]
        return [f"config key {format_key([*path, k])}: required, but missing" for k in missing]
    if kind == "enum":
        return [f"config key {key}: {_short(value)} is not allowed{_did_you_mean(value, expected)}"]
    if kind == "type":
        wanted = " or ".join(expected) if isinstance(expected, list) else expected
        return [f"config key {key}: {_short(value)} is not of type {wanted}"]
    if kind == "minItems":
        what = "must not be empty" if expected == 1 else f"needs at least {expected} items"
        return [f"config key {key}: {what} (got {_short(value)})"]
    if kind == "minProperties":
        return [f"config key {key}: needs at least {expected} entr{'y' if expected == 1 else 'ies'}"]
    bounds = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">", "exclusiveMaximum": "<"}
    if kind in bounds:
        return [f"config key {key}: {_short(value)} is out of range (must be {bounds[kind]} {expected})"]
    return [f"config key {key}: {error.message if len(error.message) < 200 else error.message[:197] + '...'}"]


def validate_config(config: dict, schema_path, overrides: Mapping | None = None) -> dict:
    """Coerce ``--config`` text, validate, fill the schema's defaults (in place); return ``config``.

    Raises :class:`ConfigError` listing every problem, one line each, at most ``MAX_ERRORS``.
    """
    from jsonschema import Draft202012Validator
    from snakemake.utils import validate as snakemake_validate

    schema = load_schema(schema_path)
    if overrides:
        coerce_cli_values(config, overrides, schema)
    validator = Draft202012Validator(copy.deepcopy(schema))
    errors = sorted(validator.iter_errors(config), key=lambda e: [str(p) for p in e.absolute_path])
    lines = list(dict.fromkeys(line for e in errors for line in _messages(e)))
    if lines:
        more = f"\n(and {len(lines) - MAX_ERRORS} more)" if len(lines) > MAX_ERRORS else ""
        raise ConfigError("\n".join(lines[:MAX_ERRORS]) + more)
    snakemake_validate(config, str(Path(schema_path).resolve()), set_default=True)
    check_benchmark_roots(config, Path(schema_path).resolve().parents[2])
    return config


def check_benchmark_roots(config: Mapping, repository) -> None:
    """Refuse a benchmark root that is ``/``, the home folder, the repository or a folder above either.

    ``hnclip fetch`` renders and unpacks into a root; pointed at one of these it would write a benchmark
    over a user's files (or a checkout). Symlinks are followed, so a link to ``/`` is ``/``. The writers
    check again (:mod:`hnclip.data.roots`); this names the key before any job starts.
    """
    from hnclip.data.roots import unsafe_root_reason

    lines = []
    for name, bench in (config.get("benchmarks") or {}).items():
        root = bench.get("root") if isinstance(bench, Mapping) else None
        reason = unsafe_root_reason(root, repository) if isinstance(root, str) and root else None
        if reason:
            lines.append(f"config key benchmarks.{name}.root: {root!r} cannot be a benchmark root: {reason}; "
                         f"point it at a folder of its own (e.g. {paths.RESOURCES}/{name})")
    if lines:
        raise ConfigError("\n".join(lines))
