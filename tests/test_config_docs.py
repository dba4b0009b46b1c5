"""config/README.md documents every key of the schema."""

from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def schema_keys():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    defs = schema["definitions"]

    def walk(node, path):
        if "$ref" in node:
            node = defs[node["$ref"].split("/")[-1]]
        if path:
            yield path
        for k, v in node.get("properties", {}).items():
            yield from walk(v, f"{path}.{k}" if path else k)
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}.<name>")
        items = node.get("items")
        if isinstance(items, dict) and items.get("properties"):
            yield from walk(items, f"{path}[]")

    return list(walk(schema, ""))


def test_every_schema_key_is_documented():
    doc = (REPO / "config/README.md").read_text()
    missing = [k for k in schema_keys() if f"`{k}`" not in doc]
    assert not missing, f"undocumented config keys: {missing}"
    assert len(schema_keys()) > 60
