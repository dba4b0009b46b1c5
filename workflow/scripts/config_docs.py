"""Regenerate the key table of config/README.md from the schema (the schema is the one source of truth).

    .venv/bin/python workflow/scripts/config_docs.py    # rewrites the table between the markers
tests/test_config_docs.py fails when a schema key is missing from the README.
"""

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- keys:begin -->", "<!-- keys:end -->"


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
            text = " ".join(node.get("description", "").split()).replace("|", "\\|")
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


def main() -> None:
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    readme = REPO / "config/README.md"
    text = readme.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    table = "| key | type | default | meaning |\n| --- | --- | --- | --- |\n" + "\n".join(rows(schema))
    readme.write_text(f"{head}{BEGIN}\n{table}\n{END}{tail}")


if __name__ == "__main__":
    main()
