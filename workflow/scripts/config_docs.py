"""Write the generated parts of the workflow schema and the key table of config/README.md.

One source per fact: the framework registration rows (hnclip.frameworks.registry) and each framework's
settings dataclass (hnclip.frameworks.settings: every default, range and help text) are the source of the
schema's ``framework`` enum and its ``train.<section>`` sections, and the checkpoint format rows
(hnclip.checkpoint_formats: each format's name and description) of ``backbone.source`` and
``models.<name>.source``, and each experiment's ``experiments.<name>`` block (its registration row in
hnclip.experiments: its keys and description), written between the schema's ``# begin generated (...)`` / ``# end generated (...)``
markers. The other name lists the schema repeats
come from their registries (:func:`enums`): on each line ending in ``# generated (<name> enum)`` the
line's one ``enum: [...]`` is rewritten from it (benchmark adapters, split names, export formats). The schema is the source of config/README.md's key table, which lists each enum's names and is
written between that page's ``<!-- keys:begin -->`` and ``<!-- keys:end -->`` lines (each alone on its line,
once). The rest of config/README.md is hand-written and kept as it is: its introduction and reference notes
on keys a table row cannot hold. It is reference only; guides live in docs/ (tests/test_config_docs.py).

    .venv/bin/python workflow/scripts/config_docs.py          # rewrites the generated parts
    .venv/bin/python workflow/scripts/config_docs.py --check  # exit 1 naming the files that are stale
tests/test_config_docs.py fails while either file is stale or a schema key is missing from the README.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))  # this checkout's hnclip, not an installed one

from hnclip.checkpoint_formats import backbone_origins, checkpoint_format, format_names  # noqa: E402
from hnclip.data import ADAPTERS, SPLITS  # noqa: E402
from hnclip.experiments import experiment_names, schema_block  # noqa: E402
from hnclip.frameworks.registry import framework_names, frameworks_of_section, settings_sections  # noqa: E402
from hnclip.model_files import EXPORT_FORMATS  # noqa: E402
from hnclip.settings_fields import field_bounds, field_types  # noqa: E402

SCHEMA = REPO / "workflow/schemas/config.schema.yaml"
README = REPO / "config/README.md"
BEGIN, END = "<!-- keys:begin -->", "<!-- keys:end -->"
JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
FRAMEWORK_DESCRIPTION = "Fine-tuning framework (src/hnclip/frameworks)."
_PLAIN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def enums() -> dict[str, list[str]]:
    """``# generated (<name> enum)`` line tag -> the registry it is written from (read at call time, so a
    name registered later, e.g. by a test, is included)."""
    return {"adapter": list(ADAPTERS),  # hnclip.data.ADAPTERS: a benchmark's `adapter`
            "split": list(SPLITS),  # hnclip.data.SPLITS: `splits`, and the split keys of your own captions
            "export format": list(EXPORT_FORMATS)}  # hnclip.model_files.EXPORT_FORMATS: export.formats


# ------------------------------------------------------------------------------------- schema nodes
def sentence(text: str) -> str:
    """Help text as a schema description: one line, capitalised, ending with a full stop."""
    text = " ".join(text.replace("``", "`").split())
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def framework_enum_node() -> dict:
    return {"type": "string", "enum": list(framework_names()), "description": FRAMEWORK_DESCRIPTION}


def backbone_source_node() -> dict:
    """``backbone.source``: released, pretrain, then each format a backbone is converted from, each with the
    description of its row (hnclip.checkpoint_formats, the one home of a format's words)."""
    origins = backbone_origins()
    kept = [name for name, origin in origins.items() if origin.ecosystem]
    text = "; ".join(f"{name}: {origin.description}" for name, origin in origins.items())
    text += (f". {' and '.join(kept)} models keep their own image normalisation and interpolation, and must use "
             "CLIP's BPE tokenizer (checked); hnclip.models.convert.")
    return {"type": "string", "enum": list(origins), "default": "pretrain", "description": text}


def model_source_node() -> dict:
    """``models.<name>.source``: every checkpoint format, with its row's description."""
    text = "; ".join(f"{name}: {checkpoint_format(name).description}" for name in format_names())
    return {"type": "string", "enum": list(format_names()),
            "description": f"The checkpoint's format (src/hnclip/checkpoint_formats.py): {text}."}


def section_node(settings_cls: type) -> dict:
    """``train.<section>``: one property per dataclass field, with its type, bounds, default and help."""
    names = frameworks_of_section(settings_cls.section)
    doc = (settings_cls.__doc__ or "").strip().split("\n\n")[0]
    where = f"{settings_cls.__module__}.{settings_cls.__qualname__}"
    description = f"{sentence(doc)} Framework{'s' if len(names) > 1 else ''} {', '.join(names)}: {where}."
    types_ = field_types(settings_cls)
    properties = {}
    for f in dataclasses.fields(settings_cls):
        if types_[f.name] not in JSON_TYPES:
            raise TypeError(f"{where}.{f.name}: no schema type for {types_[f.name]!r}")
        properties[f.name] = {"type": JSON_TYPES[types_[f.name]], **field_bounds(f), "default": f.default,
                              "description": sentence(f.metadata.get("help", ""))}
    return {"type": "object", "additionalProperties": False, "default": {}, "description": description,
            "properties": properties}


# ---------------------------------------------------------------------------------------- YAML text
def flow(value) -> str:
    """``value`` in YAML flow style that PyYAML reads back to the same value (floats keep a dot)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, float):
        text = repr(value)
        if "e" in text and "." not in text.split("e")[0]:  # PyYAML reads 1e-05 as a string
            mantissa, exponent = text.split("e")
            text = f"{mantissa}.0e{exponent}"
        return text
    if isinstance(value, int):
        return str(value)
    text = str(value)
    return text if _PLAIN.match(text) and text.lower() not in _YAML_WORDS else json.dumps(text)


def node_lines(key: str, node: dict) -> list[str]:
    """A leaf as one flow line; an object with properties as a block of one flow line per property."""
    if "properties" not in node:
        return [f"{key}: {flow(node)}"]
    lines = [f"{key}:"] + [f"  {k}: {flow(v)}" for k, v in node.items() if k != "properties"]
    return lines + ["  properties:"] + [f"    {k}: {flow(v)}" for k, v in node["properties"].items()]


def replace_block(text: str, name: str, lines: list[str]) -> str:
    """``lines`` between the ``# begin generated (name)`` and ``# end generated (name)`` markers, indented
    as the begin marker is."""
    begin = re.search(rf"^( *)# begin generated \({re.escape(name)}\).*\n", text, re.M)
    end = re.search(rf"^ *# end generated \({re.escape(name)}\).*$", text, re.M)
    if not begin or not end or end.start() < begin.end():
        raise ValueError(f"{SCHEMA.name}: no '# begin generated ({name})' ... '# end generated ({name})' markers")
    indent = begin.group(1)
    body = "".join(f"{indent}{line}\n" for line in lines)
    return text[:begin.end()] + body + text[end.start():]


def replace_enums(text: str, name: str, values: list[str]) -> str:
    """The ``enum: [...]`` on every line tagged ``# generated (name enum)`` written as ``values``."""
    tag = re.compile(rf"^(.*?\benum: )\[[^\]]*\](.*# generated \({re.escape(name)} enum\)) *$", re.M)
    tagged = re.compile(rf"# generated \({re.escape(name)} enum\)")
    if len(tag.findall(text)) != len(tagged.findall(text)) or not tagged.search(text):
        raise ValueError(f"{SCHEMA.name}: every line tagged '# generated ({name} enum)' must hold one "
                         "'enum: [...]' (and one line at least must be tagged)")
    return tag.sub(lambda m: f"{m.group(1)}{flow(values)}{m.group(2)}", text)


def updated_schema(text: str) -> str:
    """The schema text with its framework enum and framework sections written from the registry, and every
    tagged enum from its registry (:func:`enums`)."""
    for name, values in enums().items():
        text = replace_enums(text, name, values)
    text = replace_block(text, "framework enum", node_lines("framework", framework_enum_node()))
    text = replace_block(text, "backbone source", node_lines("source", backbone_source_node()))
    text = replace_block(text, "model source", node_lines("source", model_source_node()))
    blocks = [line for name in experiment_names() for line in node_lines(name, schema_block(name))]
    text = replace_block(text, "experiments", blocks)
    sections = [line for section, cls in settings_sections().items() for line in node_lines(section, section_node(cls))]
    return replace_block(text, "framework sections", sections)


# ------------------------------------------------------------------------------------ README table
def rows(schema: dict) -> list[str]:
    defs = schema.get("definitions", {})
    out = []

    def walk(node, path, required):
        if "$ref" in node:
            node = defs[node["$ref"].split("/")[-1]]
        if path:
            kind = node.get("type", "")
            kind = "/".join(kind) if isinstance(kind, list) else kind
            # no default: the key must be given where its parent requires it, else it may be left out
            default = json.dumps(node["default"]) if "default" in node else ("required" if required else "optional")
            text = " ".join(node.get("description", "").split())
            enum = node.get("enum") or (node.get("items") if isinstance(node.get("items"), dict) else {}).get("enum")
            if enum:  # the names a registry (or the schema) allows, so a registered one shows here too
                text = f"{text} One of: {', '.join('null' if v is None else str(v) for v in enum)}.".strip()
            text = text.replace("|", "\\|")
            out.append(f"| `{path}` | {kind} | {default} | {text} |")
        for key, child in node.get("properties", {}).items():
            walk(child, f"{path}.{key}" if path else key, key in node.get("required", []))
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], f"{path}.<name>", True)
        items = node.get("items")
        if isinstance(items, dict) and items.get("properties"):
            walk(items, f"{path}[]", True)

    walk(schema, "", True)
    return out


def updated_readme(text: str, schema: dict) -> str:
    """``text`` with the key table between its marker lines written from ``schema``; the hand-written rest
    unchanged (a marker named in prose, not alone on its line, is not a marker)."""
    parts = re.split(rf"^({re.escape(BEGIN)}|{re.escape(END)})$", text, flags=re.M)
    if parts[1::2] != [BEGIN, END]:
        raise ValueError(f"{README.name}: needs one '{BEGIN}' line and one '{END}' line after it")
    head, tail = parts[0], parts[4]
    table = "| key | type | default | meaning |\n| --- | --- | --- | --- |\n" + "\n".join(rows(schema))
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def generated() -> dict[Path, str]:
    """Each generated file's text as it should be."""
    schema_text = updated_schema(SCHEMA.read_text())
    return {SCHEMA: schema_text, README: updated_readme(README.read_text(), yaml.safe_load(schema_text))}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is stale")
    args = parser.parse_args(argv)
    texts = generated()
    stale = [path for path, text in texts.items() if path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(REPO)} is stale: run workflow/scripts/config_docs.py", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(texts[path])
    return 0


if __name__ == "__main__":
    sys.exit(main())
