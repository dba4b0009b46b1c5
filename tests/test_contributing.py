"""CONTRIBUTING.md's checklists hold: every file they point at exists, and a benchmark adapter added
through its registration (``hnclip.data.ADAPTERS``) reaches the generated schema enum and config/README.md's
key table (as tests/test_config_docs.py shows for a framework)."""

import re
from pathlib import Path

import pytest
import yaml
from test_config_docs import SCHEMA, load_config_docs

from hnclip import data
from hnclip.config.validation import ConfigError, validate_config

REPO = Path(__file__).resolve().parents[1]


def test_every_file_the_checklists_name_exists():
    text = (REPO / "CONTRIBUTING.md").read_text()
    for heading in ("## A fine-tuning framework", "## A benchmark adapter", "## A claim", "## An experiment"):
        assert heading in text
    named = set(re.findall(r"`((?:src|tests|workflow|report|config)/[^`<>*]+?\.(?:py|yaml|md|j2|smk|json))`", text))
    assert len(named) > 20
    assert not sorted(p for p in named if not (REPO / p).is_file())


@pytest.fixture
def dummy_adapter(monkeypatch):
    """``dummy_adapter`` registered the way a new adapter is, for this test only (the registry is restored)."""
    monkeypatch.setitem(data.ADAPTERS, "dummy_adapter", ".no_such_module")
    return "dummy_adapter"


def test_a_registered_adapter_reaches_the_schema_enum_and_the_key_docs(dummy_adapter, tmp_path):
    docs = load_config_docs()
    committed = SCHEMA.read_text()
    schema_text = docs.updated_schema(committed)
    assert schema_text != committed  # the registration is what changed the schema
    schema = yaml.safe_load(schema_text)
    bench = schema["properties"]["benchmarks"]["additionalProperties"]["properties"]
    assert bench["adapter"]["enum"][-1] == dummy_adapter
    assert bench["adapter"]["enum"] == list(data.ADAPTERS)
    readme = docs.updated_readme((REPO / "config/README.md").read_text(), schema)
    row = next(line for line in readme.splitlines() if line.startswith("| `benchmarks.<name>.adapter` |"))
    assert row.endswith(f", webdataset, {dummy_adapter}. |")

    # a config naming it validates against the generated schema, not against the committed one
    config = yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text())
    config["benchmarks"]["mine"] = {"adapter": dummy_adapter, "root": str(tmp_path / "mine"), "splits": ["test"]}
    (tmp_path / "workflow/schemas").mkdir(parents=True)
    (tmp_path / "workflow/schemas/config.schema.yaml").write_text(schema_text)
    validate_config(yaml.safe_load(yaml.safe_dump(config)), tmp_path / "workflow/schemas/config.schema.yaml")
    with pytest.raises(ConfigError, match="adapter"):
        validate_config(config, SCHEMA)
