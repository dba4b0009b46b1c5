"""config/README.md documents every key of the schema; the schema's framework parts are written from the
framework registry and the settings dataclasses (workflow/scripts/config_docs.py), and stay so."""

import dataclasses
import re
from dataclasses import dataclass
from typing import ClassVar

import pytest
import yaml
from config_docs_script import REPO, SCHEMA, load_config_docs

from hnclip import plan
from hnclip.config.train import TrainConfig
from hnclip.config.validation import validate_config
from hnclip.config_checks import check_config
from hnclip.frameworks import registry
from hnclip.frameworks.settings import FrameworkSettings
from hnclip.settings_fields import help_field


def schema_keys():
    schema = yaml.safe_load(SCHEMA.read_text())
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


def test_schema_framework_parts_and_readme_are_as_generated():
    """Fails when the schema's framework enum or a train.<section> disagrees with the registry or a settings
    dataclass (a default, a range, a help text), or README's table with the schema."""
    stale = [path.name for path, text in load_config_docs().generated().items() if path.read_text() != text]
    assert not stale, f"{stale} are stale: run workflow/scripts/config_docs.py"


def test_an_edited_schema_default_range_or_enum_is_written_back_from_the_dataclasses():
    docs = load_config_docs()
    text = SCHEMA.read_text()
    for old, new in [("r: {type: integer, minimum: 1, default: 16", "r: {type: integer, minimum: 1, default: 8"),
                     ("top_k: {type: integer, minimum: 1,", "top_k: {type: integer, minimum: 0,"),
                     ("enum: [longclip, lora, dora,", "enum: [longclip, lora,"),
                     ("enum: [synthetic, synthetic_shift, docci,", "enum: [synthetic, docci,"),
                     ("propertyNames: {enum: [train, val, test]}", "propertyNames: {enum: [train, test]}"),
                     ("items: {type: string, enum: [train, val, test]}", "items: {type: string, enum: []}"),
                     ("enum: [longclip, open_clip, transformers]}", "enum: [open_clip, transformers]}"),
                     ("enum: [longclip, openai, open_clip, transformers, goal,", "enum: [longclip, goal,")]:
        assert old in text
        assert docs.updated_schema(text.replace(old, new)) == text


def test_schema_name_lists_are_the_registries():
    """The adapter, split and format enums are the code's registries, wherever the schema repeats them."""
    from hnclip.checkpoint_formats import format_names
    from hnclip.data import ADAPTERS, SPLITS
    from hnclip.model_files import EXPORT_FORMATS

    schema = yaml.safe_load(SCHEMA.read_text())
    bench = schema["properties"]["benchmarks"]["additionalProperties"]["properties"]
    assert bench["adapter"]["enum"] == list(ADAPTERS)
    assert bench["splits"]["items"]["enum"] == list(SPLITS)
    assert bench["table"]["properties"]["files"]["propertyNames"]["enum"] == list(SPLITS)
    assert bench["webdataset"]["properties"]["shards"]["propertyNames"]["enum"] == list(SPLITS)
    assert schema["properties"]["export"]["properties"]["formats"]["items"]["enum"] == list(EXPORT_FORMATS)
    source = schema["properties"]["models"]["additionalProperties"]["properties"]["source"]
    assert source["enum"] == list(format_names())


def test_a_tagged_line_without_an_enum_is_refused():
    docs = load_config_docs()
    text = SCHEMA.read_text() + "\nextra: {type: string}  # generated (adapter enum)\n"
    with pytest.raises(ValueError, match=r"generated \(adapter enum\)"):
        docs.updated_schema(text)


def test_schema_sections_carry_each_fields_bounds():
    train = yaml.safe_load(SCHEMA.read_text())["definitions"]["train_settings"]["properties"]
    assert train["finelip"]["properties"]["hinge"]["enum"] == ["sum", "max"]
    assert train["finelip"]["properties"]["score_weight"] | {"description": ""} == {
        "type": "number", "minimum": 0, "maximum": 1, "default": 0.2, "description": ""}
    assert train["structxlip"]["properties"]["chunk_tau"]["exclusiveMinimum"] == 0
    assert "lora, dora" in train["lora"]["description"]


@dataclass(frozen=True)
class DummySettings(FrameworkSettings):
    """A framework registered by a test only."""

    section: ClassVar[str] = "dummy"

    strength: float = help_field(0.25, "weight of the dummy term", minimum=0)
    mode: str = help_field("soft", "soft | hard: how the dummy term bites", choices=("soft", "hard"))


@pytest.fixture
def dummy_framework(monkeypatch):
    """``dummy`` registered through the one registration, for this test only (the registry is restored)."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    return registry.register_framework(name="dummy", module="tests.no_such_module", settings_cls=DummySettings,
                                       hn_legend="the dummy's global term becomes the HN objective")


def test_a_registered_framework_reaches_the_schema_the_docs_and_the_plan(dummy_framework, tmp_path):
    docs = load_config_docs()
    schema_text = docs.updated_schema(SCHEMA.read_text())
    schema = yaml.safe_load(schema_text)
    section = schema["definitions"]["train_settings"]["properties"]["dummy"]
    assert section["default"] == {} and section["additionalProperties"] is False
    assert section["properties"] == {
        "strength": {"type": "number", "minimum": 0, "default": 0.25, "description": "Weight of the dummy term."},
        "mode": {"type": "string", "enum": ["soft", "hard"], "default": "soft",
                 "description": "Soft | hard: how the dummy term bites."}}
    methods = schema["properties"]["methods"]["additionalProperties"]["properties"]
    assert methods["framework"]["enum"][-1] == "dummy"
    readme = docs.updated_readme((REPO / "config/README.md").read_text(), schema)
    assert "| `train.dummy.strength` | number | 0.25 | Weight of the dummy term. |" in readme

    # the generated schema validates a config training the dummy; the plan passes its section on
    (tmp_path / "workflow/schemas").mkdir(parents=True)
    (tmp_path / "workflow/schemas/config.schema.yaml").write_text(schema_text)
    config = yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text())
    config["methods"]["dummy_hn"] = {"framework": "dummy", "hn": True}
    config["train"]["dummy"] = {"mode": "hard"}
    config["experiments"] = {"main": {"benchmarks": ["synthetic"], "methods": ["longclip", "dummy_hn"]}}
    validate_config(config, tmp_path / "workflow/schemas/config.schema.yaml")
    check_config(config)
    run = next(r for r in plan.all_runs(config) if r.method == "dummy_hn")
    items = plan.train_overrides(config, run)
    assert {"framework=dummy", "dummy.strength=0.25", "dummy.mode=hard"} <= set(items)
    assert not any(i.startswith(("lora.", "finelip.")) for i in items)  # other sections stay out
    cfg = TrainConfig.from_overrides(dict(i.split("=", 1) for i in items))
    assert cfg.framework_settings == DummySettings(strength=0.25, mode="hard") and cfg.section == "dummy"
    assert dataclasses.asdict(cfg.framework_settings) == cfg.to_dict()["dummy"]
    with pytest.raises(ValueError, match=r"TrainConfig.dummy.mode='medium' is not one of soft, hard"):
        DummySettings(mode="medium")


def test_registering_a_name_twice_or_an_unknown_name_says_what_is_known(dummy_framework):
    with pytest.raises(ValueError, match="already registered"):
        registry.register_framework(name="dummy", module="x", settings_cls=DummySettings, hn_legend="x")
    known = ", ".join(registry.framework_names())
    assert known.endswith(", dummy")
    with pytest.raises(ValueError, match=f"known frameworks: {known}"):
        registry.framework_entry("dummy2")
    with pytest.raises(ValueError, match="is not one of longclip, .*, dummy"):
        TrainConfig(framework="dummy2")


def test_config_readme_is_generated_reference_with_its_guides_in_docs():
    """config/README.md holds the generated key table (its markers alone on their lines, once each) and
    reference notes; a guide (with its worked examples in code blocks) lives in docs/."""
    text = (REPO / "config/README.md").read_text()
    docs = load_config_docs()
    assert [line for line in text.splitlines() if line in (docs.BEGIN, docs.END)] == [docs.BEGIN, docs.END]
    assert "```" not in text, "config/README.md holds a code block: a guide's example belongs in docs/"
    with pytest.raises(ValueError, match="needs one"):
        docs.updated_readme(text.replace(f"\n{docs.END}\n", "\n"), yaml.safe_load(SCHEMA.read_text()))


# a pointer to a section of a Markdown page: `FILE.md ("Section", "Other")`, `FILE.md, "Section"`,
# `[text](FILE.md) ("Section")` or `(FILE.md, Section)`; sentences folded onto one line first
QUOTED = re.compile(r'(?P<file>[\w./-]*\.md)`?(?:\]\([^)\s]*\))?`?\)?,? \(?(?P<sections>"[^"]+"(?:,? (?:and )?"[^"]+")*)')
BARE = re.compile(r'\((?P<file>[\w./-]+\.md), (?P<sections>[A-Z][^)"]*)\)')
POINTING = ["README.md", "CONTRIBUTING.md", "docs/*.md", "config/*.yaml", "config/README.md", "benchmarks/README.md",
            "src/**/*.py", "workflow/**/*.smk", "workflow/**/*.py", "workflow/schemas/*.yaml", ".ci/run"]


def section_pointers():
    for path in sorted({p for pattern in POINTING for p in REPO.glob(pattern)}):
        text = re.sub(r"[ \t]*\n[ \t]*(#[ \t]*)?", " ", path.read_text())
        for m in [*QUOTED.finditer(text), *BARE.finditer(text)]:
            names = re.findall(r'"([^"]+)"', m.group("sections")) or [m.group("sections")]
            yield path, m.group("file"), names


def test_every_section_a_pointer_names_is_a_heading_of_its_page():
    """Moving a section (config/README.md's guides went to docs/own-data.md) fails here until every pointer
    to it follows: a heading (or a paragraph's bold lead) of the named page starts with the section's name."""
    pointers = list(section_pointers())
    assert len(pointers) > 10
    broken = []
    for path, target, names in pointers:
        page = next((p for p in (path.parent / target, REPO / target) if p.is_file()), None)
        text = page.read_text() if page else ""
        leads = [re.sub(r"`", "", heading or bold) for heading, bold in re.findall(r"^#+ (.+)$|^\*\*([^*]+)\*\*", text, re.M)]
        broken += [f"{path.relative_to(REPO)}: {target} \"{name}\"" for name in names
                   if not any(lead.startswith(name) for lead in leads)]
    assert not broken, "pointers to no such section:\n" + "\n".join(broken)
