"""Checkpoint formats are one table (:mod:`hnclip.checkpoint_formats`): a format registered there, with its
loader, is accepted by the schema and the config checks, converted by ``convert_source`` and held to what it
needs, with no other file edited (CONTRIBUTING.md, "A checkpoint format")."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import yaml
from config_docs_script import REPO, SCHEMA, load_config_docs

from hnclip import checkpoint_formats, released
from hnclip.checkpoint_formats import CheckpointFormat, backbone_origin
from hnclip.config.validation import ConfigError, validate_config
from hnclip.config_checks import check_config


def load_dummy(request):
    """The dummy format's loader: its checkpoint is a JSON file naming a registry architecture and a seed."""
    from hnclip.models import create_model

    record = json.loads(Path(request.checkpoint).read_text())
    return create_model(record["arch"], seed=record["seed"]), Path(request.checkpoint)


def write_dummy_stand_in(checkpoint, base, seed, depth):
    Path(checkpoint).parent.mkdir(parents=True, exist_ok=True)
    Path(checkpoint).write_text(json.dumps({"arch": "micro", "seed": seed}))


@pytest.fixture
def dummy_format(monkeypatch):
    """``dummy`` registered through the one registration, for this test only (the table is restored): a
    248-position checkpoint over a ``base`` (a released model's format, not a backbone's)."""
    monkeypatch.setattr(checkpoint_formats, "_REGISTRY", dict(checkpoint_formats._REGISTRY))
    return checkpoint_formats.register_format(CheckpointFormat(
        "dummy", load_dummy, needs=("checkpoint", "base"), stand_in=write_dummy_stand_in,
        description="`checkpoint`: a JSON file naming a registry architecture and a seed, over `base`"))


@pytest.fixture
def dummy_files(tmp_path):
    checkpoint = tmp_path / "dummy.json"
    checkpoint.write_text(json.dumps({"arch": "micro", "seed": 3}))
    base = tmp_path / "base"
    base.mkdir()
    return checkpoint, base


def micro_config(models: dict) -> dict:
    config = yaml.safe_load((REPO / "tests/e2e/micro.yaml").read_text())
    config["models"] = models
    return config


def test_a_registered_format_reaches_the_schema_and_the_config_checks(dummy_format, dummy_files, tmp_path):
    checkpoint, base = dummy_files
    schema_text = load_config_docs().updated_schema(SCHEMA.read_text())
    schema = yaml.safe_load(schema_text)
    source = schema["properties"]["models"]["additionalProperties"]["properties"]["source"]
    assert source["enum"][-1] == "dummy"
    # its one description, written into the schema (and so config/README.md) from its row
    assert source["description"].endswith("; dummy: `checkpoint`: a JSON file naming a registry architecture and a "
                                          "seed, over `base`.")
    assert "dummy" not in schema["properties"]["backbone"]["properties"]["source"]["enum"]
    schema_path = tmp_path / "config.schema.yaml"
    schema_path.write_text(schema_text)

    entry = {"source": "dummy", "checkpoint": str(checkpoint), "base": str(base)}
    config = micro_config({"mine": entry})
    validate_config(config, schema_path)
    check_config(config)
    assert f"--format dummy --source {checkpoint}" in released.convert_options(config, "mine")
    with pytest.raises(ConfigError):  # the checkout's own schema does not know it: the enum is what lets it in
        validate_config(micro_config({"mine": dict(entry)}), SCHEMA)

    # what it needs is enforced: its base, and no stretch of its 248 positions
    for change, message in [({"base": None}, "config key models.mine.base: required for source dummy"),
                            ({"stretch": True}, "config key models.mine.stretch: source dummy has its 248 positions "
                                                "already")]:
        bad = copy.deepcopy(config)
        bad["models"]["mine"].update(change)
        with pytest.raises(ConfigError, match=message):
            check_config(bad)
    # and a base given to a format that takes none names every format that does, the new one last
    bad = copy.deepcopy(config)
    bad["models"]["mine"] = {"source": "longclip", "checkpoint": str(checkpoint), "base": str(base)}
    with pytest.raises(ConfigError, match=r"models.mine.base: only for sources (.+) \(this one is longclip\)") as info:
        check_config(bad)
    named = re.search(r"only for sources (.+) \(this one", str(info.value)).group(1)
    assert named.endswith(" and dummy") and "goal" in named.split(", ")  # a shipped one that takes a base too



def test_a_registered_backbone_format_reaches_backbone_source(dummy_format, dummy_files, tmp_path):
    """A format a backbone may be converted from (a 77-position tower here): accepted as backbone.source,
    converted (not installed), held to its checkpoint, and named among the stretchable sources."""
    checkpoint, _ = dummy_files
    checkpoint_formats.register_format(CheckpointFormat("dummy77", load_dummy, stretchable=True, backbone=True,
                                                        description="`checkpoint`: a 77-position JSON file"))
    schema_path = tmp_path / "config.schema.yaml"
    schema_path.write_text(load_config_docs().updated_schema(SCHEMA.read_text()))
    config = micro_config({})
    config["backbone"] = {**config["backbone"], "source": "dummy77", "checkpoint": str(checkpoint), "stretch": True}
    validate_config(config, schema_path)
    check_config(config)
    origin = backbone_origin(config)
    assert not origin.installed and not origin.reads_model and not origin.ecosystem
    config["backbone"]["checkpoint"] = None
    with pytest.raises(ConfigError, match="backbone.checkpoint: required when backbone.source is 'dummy77'"):
        check_config(config)
    config = micro_config({})
    config["backbone"] = {**config["backbone"], "source": "longclip", "checkpoint": str(checkpoint), "stretch": True}
    with pytest.raises(ConfigError, match=r"backbone.stretch: stretches a converted 77-position tower \(sources "
                                          r"openai, .*, dummy77\); source 'longclip' has its"):
        check_config(validate_config(config, schema_path))
    with pytest.raises(ValueError, match="a backbone is converted without a base"):
        checkpoint_formats.register_format(CheckpointFormat("dummy2", load_dummy, needs=("checkpoint", "base"),
                                                            backbone=True, description="over `base`"))


def test_a_registered_format_is_converted_by_its_loader(dummy_format, dummy_files, tmp_path):
    from hnclip.models import create_model, load_model
    from hnclip.models.convert import convert_source

    checkpoint, base = dummy_files
    out = convert_source("dummy", str(checkpoint), tmp_path / "model", base=str(base), key="models.mine")
    reference = create_model("micro", seed=3)
    converted = load_model(out)
    for name, tensor in reference.state_dict().items():
        assert (converted.state_dict()[name] == tensor).all(), name
    record = json.loads((out / "conversion.json").read_text())
    assert (record["format"], record["checkpoint"], record["base"]) == ("dummy", str(checkpoint), str(base))
    with pytest.raises(ValueError, match=r"models.mine.base: required for source dummy \(the CLIPModel its "
                                         r"weights were fine-tuned from"):
        convert_source("dummy", str(checkpoint), tmp_path / "other", key="models.mine")
    with pytest.raises(ValueError, match=r"'nope': not a format to convert; known: ") as info:
        convert_source("nope", str(checkpoint), tmp_path / "other")
    known = str(info.value).split("known: ", 1)[1].split(", ")
    assert known[-1] == "dummy" and "longclip" in known  # every format, the registered one last


def test_a_rehearsal_writes_a_registered_formats_stand_in(dummy_format, tmp_path):
    from hnclip.rehearsal.released import write_released_stand_ins

    checkpoint, base = tmp_path / "rehearsal/dummy.json", tmp_path / "rehearsal/base"
    written = write_released_stand_ins({"mine": {"source": "dummy", "checkpoint": str(checkpoint),
                                                 "base": str(base)}}, tmp_path / "rehearsal", seed=5)
    assert json.loads(checkpoint.read_text()) == {"arch": "micro", "seed": 5}
    assert (base / "config.json").is_file()  # the base it needs, a CLIPModel folder
    assert written == {"mine": f"{base}, {checkpoint}"}


def test_the_table_says_what_the_publishers_formats_need():
    """The reference is each format's documented layout (hnclip.models.convert's docstring, the publishers'
    releases): GOAL and StructXLIP ship a state dict over a base CLIPModel; Long-CLIP, GOAL, StructXLIP and
    FineLIP have 248 positions; OpenAI, open_clip and transformers CLIP have 77, which Long-CLIP's stretch
    extends; open_clip names an architecture."""
    from hnclip.checkpoint_formats import checkpoint_format, format_names

    needs = {"longclip": ("checkpoint",), "openai": ("checkpoint",), "open_clip": ("model",),
             "transformers": ("checkpoint",), "goal": ("checkpoint", "base"),
             "structxlip": ("checkpoint", "base"), "finelip": ("checkpoint",)}
    assert {name: checkpoint_format(name).needs for name in format_names()} == needs
    assert [n for n in format_names() if checkpoint_format(n).stretchable] == ["openai", "open_clip", "transformers"]
    assert list(checkpoint_formats.backbone_source_names()) == ["released", "pretrain", "longclip", "openai",
                                                                "open_clip", "transformers"]
    # every format is described once, in its row, and the schema's source texts show that description
    schema = yaml.safe_load(SCHEMA.read_text())
    models = schema["properties"]["models"]["additionalProperties"]["properties"]["source"]["description"]
    backbone = schema["properties"]["backbone"]["properties"]["source"]["description"]
    for name in format_names():
        description = checkpoint_format(name).description
        assert len(description) > 20 and f"{name}: {description}" in models, name
        assert (f"{name}: {description}" in backbone) == checkpoint_format(name).backbone, name
    assert "goal" in checkpoint_format("goal").description.lower() and "`base`" in checkpoint_format("goal").description


@pytest.mark.parametrize(("change", "message"), [
    ({"name": "released"}, "'released' is already registered"),  # a backbone origin's name
    ({"name": "longclip"}, "'longclip' is already registered"),
    ({"needs": ("weights",)}, "needs is a non-empty subset of checkpoint, model, base"),
    ({"checkpoint_kind": "zip"}, "checkpoint_kind is one of file, folder, open_clip"),
    ({"loader": "module.function"}, "loader is a callable or a 'module:function' name"),
    ({"description": " "}, "a description"),
])
def test_a_row_is_checked_when_registered(dummy_format, change, message):
    """The checks every row passes, the built-in ones included (they are registered the same way)."""
    row = dict(name="dummy3", loader=load_dummy, description="`checkpoint`: a JSON file") | change
    with pytest.raises(ValueError, match=re.escape(message)):
        checkpoint_formats.register_format(CheckpointFormat(**row))


def test_the_built_in_rows_come_through_the_registration(monkeypatch):
    """Every shipped row passes register_format's checks: registered afresh into an empty table, they all are."""
    rows = [checkpoint_formats.checkpoint_format(n) for n in checkpoint_formats.format_names()]
    monkeypatch.setattr(checkpoint_formats, "_REGISTRY", {})
    for row in rows:
        checkpoint_formats.register_format(row)
    assert checkpoint_formats.format_names() == ("longclip", "openai", "open_clip", "transformers", "goal",
                                                 "structxlip", "finelip")
    source = (REPO / "src/hnclip/checkpoint_formats.py").read_text()
    # no row goes in another way: the table is assigned to in register_format only
    assert re.findall(r"_REGISTRY\[[^\]]+\] *=", source) == ["_REGISTRY[fmt.name] ="]


def test_the_schema_enums_are_the_table():
    """The committed schema's ``models.<name>.source`` and ``backbone.source`` enums are the table's names."""
    schema = yaml.safe_load(SCHEMA.read_text())
    models = schema["properties"]["models"]["additionalProperties"]["properties"]["source"]["enum"]
    assert models == list(checkpoint_formats.format_names())
    assert schema["properties"]["backbone"]["properties"]["source"]["enum"] == list(
        checkpoint_formats.backbone_source_names())


def test_contributings_checklist_names_tests_that_exist():
    """Each step of CONTRIBUTING.md's "A checkpoint format" names a test that exists (a renamed one fails)."""
    text = (REPO / "CONTRIBUTING.md").read_text()
    section = text.split("## A checkpoint format", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(tests/[\w/]+\.py)::(\w+)`", section)
    assert len(named) >= 5
    for path, name in named:
        assert re.search(rf"^def {name}\(", (REPO / path).read_text(), re.M), f"{path}::{name}"
