"""CONTRIBUTING.md's checklists hold, step by step: every file they point at exists; each step names a test
that fails when the step is skipped (this module checks the naming, and holds the tests no other module has);
a benchmark adapter written and registered as the checklist says is loaded, counted, fetched and reaches the
generated schema enum and config/README.md's key table (tests/test_config_docs.py shows the same for a
framework)."""

import importlib
import pkgutil
import re
import sys
from pathlib import Path

import pytest
import yaml
from test_config_docs import SCHEMA, load_config_docs

from hnclip import data
from hnclip.config.validation import ConfigError, validate_config
from hnclip.data import download
from hnclip.data.fetch import fetch_benchmark
from hnclip.frameworks.registry import framework_names

REPO = Path(__file__).resolve().parents[1]


def test_every_file_the_checklists_name_exists():
    text = (REPO / "CONTRIBUTING.md").read_text()
    for heading in ("## A fine-tuning framework", "## A benchmark adapter", "## A claim", "## A checkpoint format",
                    "## An experiment"):
        assert heading in text
    named = set(re.findall(r"`((?:src|tests|workflow|report|config)/[^`<>*]+?\.(?:py|yaml|md|j2|smk|json))`", text))
    assert len(named) > 20
    assert not sorted(p for p in named if not (REPO / p).is_file())


# Step 1 of "A benchmark adapter": a module with load(root, split) returning the manifest, its protocol count
# checked with the shared helpers. This one reads `<split>.tsv` (image file, caption) beside `images/`.
DUMMY_ADAPTER = '''"""A benchmark adapter written by tests/test_contributing.py, for that test only."""
from pathlib import Path

from hnclip.data.adapter_utils import PROTOCOL, check_count, make_manifest, require_image, resolve_expected

EXPECTED_COUNTS = {"test": 2}


def load(root: Path, split: str, *, expected_count=PROTOCOL):
    expected = resolve_expected(expected_count, EXPECTED_COUNTS, "dummy_adapter", split)
    table = root / f"{split}.tsv"
    rows = [line.split("\\t") for line in table.read_text().splitlines()]
    manifest = make_manifest([(name, require_image(root / "images" / name, str(table)), caption)
                              for name, caption in rows], "dummy_adapter", table)
    check_count("dummy_adapter", split, len(manifest), expected, root)
    return manifest
'''


@pytest.fixture
def dummy_adapter(monkeypatch, tmp_path):
    """``dummy_adapter`` written (step 1, a module under tmp_path) and registered in ``hnclip.data.ADAPTERS``
    (step 2) the way a new adapter is, for this test only (sys.path, the registry and the module restored)."""
    modules = tmp_path / "adapter_modules"
    modules.mkdir()
    (modules / "hnclip_dummy_adapter.py").write_text(DUMMY_ADAPTER)
    monkeypatch.syspath_prepend(str(modules))
    monkeypatch.setitem(data.ADAPTERS, "dummy_adapter", "hnclip_dummy_adapter")
    monkeypatch.delitem(sys.modules, "hnclip_dummy_adapter", raising=False)
    yield "dummy_adapter"
    sys.modules.pop("hnclip_dummy_adapter", None)


def dummy_files(root: Path, captions: list[str]) -> Path:
    """The dummy publisher's layout: test.tsv naming images/<n>.png, one caption each."""
    (root / "images").mkdir(parents=True)
    for i in range(len(captions)):
        (root / "images" / f"{i}.png").write_bytes(b"not decoded by this adapter")
    (root / "test.tsv").write_text("".join(f"{i}.png\t{c}\n" for i, c in enumerate(captions)))
    return root


def test_a_registered_adapter_is_loaded_and_held_to_its_protocol_count(dummy_adapter, tmp_path):
    """Steps 1-2: load_benchmark finds the module through its registration and checks its manifest."""
    root = dummy_files(tmp_path / "bench", ["a red tram", "a grey sky"])
    manifest = data.load_benchmark(dummy_adapter, root, "test")
    assert list(manifest["image_id"]) == ["0.png", "1.png"] and list(manifest["caption"]) == ["a red tram",
                                                                                              "a grey sky"]
    assert manifest["image_path"].tolist() == [str((root / "images" / n).resolve()) for n in ("0.png", "1.png")]
    assert data.protocol_counts(dummy_adapter) == {"test": 2}
    more = dummy_files(tmp_path / "more", ["one", "two", "three"])
    with pytest.raises(ValueError, match=r"dummy_adapter \(test\) under .*: found 3 records, the protocol lists 2"):
        data.load_benchmark(dummy_adapter, more, "test")
    with pytest.raises(ValueError, match="unknown benchmark 'dummy_adapter2'"):
        data.load_benchmark("dummy_adapter2", root, "test")


def test_a_registered_adapter_is_fetched_once_its_source_is_listed(dummy_adapter, tmp_path, monkeypatch):
    """Step 3: without its sources.json entry the fetch step refuses it, naming the known sources; with one
    (here a file placed by hand) the fetch step checks the file into the root's checksum lock."""
    root = dummy_files(tmp_path / "bench", ["a red tram", "a grey sky"])
    settings = {"adapter": dummy_adapter, "root": str(root), "expected_counts": {}}
    with pytest.raises(ValueError, match="unknown source 'dummy_adapter'; known: "):
        fetch_benchmark("mine", dummy_adapter, root, settings)
    entry = {"licence": "test only", "homepage": "https://example.org", "root_entries": ["images"],
             "files": [{"manual": "place test.tsv by hand", "path": "test.tsv"}]}
    listed = {**download.load_sources(), dummy_adapter: entry}
    monkeypatch.setattr(download, "load_sources", lambda: listed)
    record = fetch_benchmark("mine", dummy_adapter, root, settings)
    assert record["adapter"] == dummy_adapter and record["origin"]["kind"] == "downloaded"
    assert f"{dummy_adapter}/test.tsv" in (root / download.LOCK_FILE).read_text()


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


# ------------------------------------------------------------------------ each step has a test behind it
def test_each_checklist_step_names_a_test_that_exists():
    """Every ``tests/test_x.py::test_name`` the checklists cite is a test function of that file."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    cited = re.findall(r"`(tests/test_\w+\.py)::(test_\w+)`", text)
    assert len(cited) >= 12
    missing = [f"{path}::{name}" for path, name in cited if f"\ndef {name}(" not in (REPO / path).read_text()]
    assert not missing, missing
    for heading in ("## A fine-tuning framework", "## A benchmark adapter", "## A claim"):
        section = text.split(heading, 1)[1].split("\n## ", 1)[0]
        steps = [step for step in re.split(r"\n(?=\d+\. )", section.strip()) if re.match(r"\d+\. ", step)]
        assert steps and all("::test_" in step for step in steps), (heading, [s[:40] for s in steps])


def frameworks_without_a_main_method() -> list[str]:
    """Registered frameworks that config/config.yaml's or config/paper.yaml's main experiment does not train."""
    missing = []
    for name in ("config.yaml", "paper.yaml"):
        config = yaml.safe_load((REPO / "config" / name).read_text())
        trained = {config["methods"][m]["framework"] for m in config["experiments"]["main"]["methods"]}
        missing += [f"{name}: {f}" for f in framework_names() if f not in trained]
    return missing


def unnamed_in(names, pattern: str) -> list[str]:
    """``names`` that no tests/``pattern`` file writes as a string literal."""
    texts = [p.read_text() for p in (REPO / "tests").glob(pattern)]
    return [name for name in names if not any(f'"{name}"' in text for text in texts)]


def claims_modules_outside_sections() -> set[str]:
    """Modules of hnclip.analysis.claims that register a claim but are not in ``SECTIONS`` (every module of
    the package imported first: one left out of the package's imports registers nothing otherwise)."""
    from hnclip.analysis import claims
    from hnclip.analysis.claims.base import REGISTRY

    for module in pkgutil.iter_modules(claims.__path__):
        importlib.import_module(f"hnclip.analysis.claims.{module.name}")
    return {entry.judge.__module__.rsplit(".", 1)[-1] for entry in REGISTRY.values()} - set(claims.SECTIONS)


def test_every_registered_framework_has_a_method_in_the_default_and_the_paper_config():
    """Framework step 4: ``methods.<m>.framework`` names it in config/config.yaml and config/paper.yaml, and
    the main experiment trains that method."""
    assert frameworks_without_a_main_method() == []


def test_every_registered_framework_has_its_own_tests():
    """Framework step 5: each framework is named (built, parametrised) in a tests/test_frameworks_*.py."""
    assert unnamed_in(framework_names(), "test_frameworks_*.py") == []


def test_every_registered_adapter_has_its_own_tests():
    """Adapter step 5: each adapter is named in a tests/test_data_*.py (records in the publisher's layout)."""
    assert unnamed_in(data.ADAPTERS, "test_data_*.py") == []


def test_every_claims_module_that_registers_a_claim_is_a_section():
    """Claim step 1: a section module left out of ``SECTIONS`` registers nothing in the report."""
    assert claims_modules_outside_sections() == set()


def test_every_registered_claim_has_a_verdict_test():
    """Claim step 3: each claim id is judged in tests/test_analysis_claims*.py."""
    from hnclip.analysis.claims.base import REGISTRY

    assert unnamed_in(REGISTRY, "test_analysis_claims*.py") == []


def test_the_step_checks_catch_a_skipped_step(dummy_adapter, monkeypatch):
    """A framework, an adapter or a claims section registered with its later steps skipped is reported."""
    from test_config_docs import DummySettings

    from hnclip.analysis import claims
    from hnclip.frameworks import registry

    assert unnamed_in(data.ADAPTERS, "test_data_*.py") == [dummy_adapter]
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    registry.register_framework(name="dummy", module="tests.no_such_module", settings_cls=DummySettings,
                                hn_legend="unused")
    assert frameworks_without_a_main_method() == ["config.yaml: dummy", "paper.yaml: dummy"]
    assert unnamed_in(framework_names(), "test_frameworks_*.py") == ["dummy"]
    monkeypatch.setattr(claims, "SECTIONS", tuple(s for s in claims.SECTIONS if s != "cost"))
    assert claims_modules_outside_sections() == {"cost"}
    assert unnamed_in(["a_claim_no_test_names"], "test_analysis_claims*.py") == ["a_claim_no_test_names"]
