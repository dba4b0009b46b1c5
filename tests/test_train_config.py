"""TrainConfig and the frameworks' settings: typed parsing, validation naming the key, a stable hash that
covers what changes training, and defaults declared once (the workflow schema agrees with them)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from hnclip.config.train import (
    NOT_HASHED,
    RUN_SELECTIONS,
    WORKFLOW_KEYS,
    TrainConfig,
    override_items,
)
from hnclip.frameworks.registry import framework_entry, framework_names, settings_sections
from hnclip.frameworks.settings import FineLIPSettings, LoRASettings, StructXLIPSettings

REPO = Path(__file__).resolve().parents[1]
# The optimisation settings a method may set for itself (the workflow config's ``methods.<m>.train``):
# each baseline's published recipe, inside the shared budget (epochs, micro-batch, accumulation).
RECIPE_KEYS = ("lr", "module_lr", "weight_decay", "warmup_steps", "schedule", "min_lr_ratio", "label_smoothing",
               "grad_clip", "beta1", "beta2", "eps")


def schema() -> dict:
    return yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())


def test_overrides_are_parsed_into_field_types():
    cfg = TrainConfig.from_overrides({"gamma": "0.5", "epochs": "3", "eval_every_epoch": "false",
                                      "framework": "lora", "lr": "1e-5", "max_steps": "1e3", "lora.alpha": "16",
                                      "lora.dropout": "0.1"})
    assert cfg.gamma == 0.5 and isinstance(cfg.gamma, float)
    assert cfg.epochs == 3 and isinstance(cfg.epochs, int)
    assert cfg.eval_every_epoch is False
    assert cfg.framework == "lora" and cfg.lr == 1e-5 and cfg.max_steps == 1000
    assert cfg.framework_settings == LoRASettings(alpha=16, dropout=0.1)


def test_typed_values_pass_through_and_ints_become_floats():
    cfg = TrainConfig.from_overrides({"gamma": 1, "eval_every_epoch": True, "micro_batch": 4,
                                      "framework": "finelip", "finelip": {"margin": 1, "ramp": False}})
    assert cfg.gamma == 1.0 and isinstance(cfg.gamma, float) and cfg.micro_batch == 4
    assert cfg.framework_settings.margin == 1.0 and isinstance(cfg.framework_settings.margin, float)
    assert cfg.framework_settings.ramp is False


def test_to_dict_round_trips_through_overrides_and_the_dataclass():
    cfg = TrainConfig.from_overrides({"framework": "structxlip", "structxlip.top_k": "2", "seed": "3"})
    assert cfg.to_dict()["structxlip"]["top_k"] == 2 and "framework_settings" not in cfg.to_dict()
    assert TrainConfig.from_overrides(cfg.to_dict()) == cfg
    assert TrainConfig(**dataclasses.asdict(cfg)) == cfg  # what the subprocess tests hand over


def test_unknown_keys_are_named():
    with pytest.raises(ValueError, match=r"unknown TrainConfig key\(s\) \['gamme', 'zzz'\]"):
        TrainConfig.from_overrides({"gamme": "0.5", "zzz": "1", "gamma": "0.1"})
    with pytest.raises(ValueError, match=r"unknown TrainConfig.finelip key\(s\) \['margn'\]"):
        TrainConfig.from_overrides({"framework": "finelip", "finelip.margn": "0.1"})


def test_a_setting_of_another_framework_is_refused():
    with pytest.raises(ValueError, match="'finelip.margin' is a setting of the 'finelip' section, but framework "
                                         "'lora' reads section 'lora'"):
        TrainConfig.from_overrides({"framework": "lora", "finelip.margin": "0.1"})
    assert TrainConfig.from_overrides({"framework": "dora", "lora.r": "4"}).framework_settings.r == 4
    with pytest.raises(ValueError, match="takes LoRASettings, got FineLIPSettings"):
        TrainConfig(framework="lora", framework_settings=FineLIPSettings())


@pytest.mark.parametrize("key, value, fragment", [
    ("epochs", "2.5", "TrainConfig.epochs: cannot read '2.5' as int"),
    ("gamma", "abc", "TrainConfig.gamma: cannot read 'abc' as float"),
    ("eval_every_epoch", "maybe", "TrainConfig.eval_every_epoch: cannot read 'maybe' as a boolean"),
    ("longclip.pca_components", "x", "TrainConfig.longclip.pca_components: cannot read 'x' as int"),
])
def test_unparseable_values_name_field_and_value(key, value, fragment):
    with pytest.raises(ValueError, match=fragment):
        TrainConfig.from_overrides({key: value})


@pytest.mark.parametrize("kwargs, fragment", [
    ({"framework": "adapterX"}, f"TrainConfig.framework='adapterX' is not one of {', '.join(framework_names())}"),
    ({"gamma": -0.1}, "TrainConfig.gamma=-0.1 must be >= 0"),
    ({"token_weight": -1.0}, "TrainConfig.token_weight=-1.0 must be >= 0"),
    ({"margin": "fixed"}, "TrainConfig.margin='fixed' is not one of recompute, frozen"),
    ({"micro_batch": 1}, "TrainConfig.micro_batch=1 must be >= 2"),
    ({"accum_steps": 0}, "TrainConfig.accum_steps=0 must be >= 1"),
    ({"warmup_steps": -1}, "TrainConfig.warmup_steps=-1 must be >= 0"),
    ({"min_lr_ratio": 1.5}, "TrainConfig.min_lr_ratio=1.5 must be in"),
    ({"label_smoothing": 1.0}, "TrainConfig.label_smoothing=1.0 must be in [0, 1)"),
    ({"schedule": "step"}, "TrainConfig.schedule='step' is not one of cosine, constant"),
    ({"keep_checkpoint": "some"}, "TrainConfig.keep_checkpoint='some' is not one of full, weights, none"),
    ({"precision": "fp8"}, "TrainConfig.precision='fp8' is not one of auto, fp32, bf16, fp16"),
    ({"report_to": "mlflow"}, "TrainConfig.report_to='mlflow' names 'mlflow', not one of tensorboard, wandb"),
    ({"progress_every": -1}, "TrainConfig.progress_every=-1.0 must be >= 0"),
    ({"beta2": 1.0}, "TrainConfig.beta2=1.0 must be in"),
    ({"precision": "bf16", "device": "cpu"}, "bf16"),
    ({"framework": "finelip", "framework_settings": {"hinge": "mean"}},
     "TrainConfig.finelip.hinge='mean' is not one of sum, max"),
    ({"framework": "finelip", "framework_settings": {"hn": "both"}}, "TrainConfig.finelip.hn='both' is not one of"),
    ({"framework": "lora", "framework_settings": {"dropout": 1.0}}, "TrainConfig.lora.dropout=1.0 must be in [0, 1)"),
    ({"framework": "goal", "framework_settings": {"patch_weight": -1}}, "TrainConfig.goal.patch_weight=-1.0 must be"),
    ({"framework": "structxlip", "framework_settings": {"top_k": 0}}, "TrainConfig.structxlip.top_k=0 must be >= 1"),
])
def test_invalid_values_name_the_field(kwargs, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        TrainConfig(**kwargs)


def test_documented_defaults():
    cfg = TrainConfig()
    assert (cfg.micro_batch, cfg.accum_steps, cfg.epochs, cfg.lr, cfg.weight_decay) == (16, 8, 10, 1e-5, 0.1)
    assert cfg.token_weight == 0.0 and cfg.gamma == 0.0 and cfg.margin == "recompute" and cfg.label_smoothing == 0
    assert cfg.effective_batch == 128 and cfg.keep_checkpoint == "weights"
    assert all(f.metadata.get("help") for f in dataclasses.fields(TrainConfig))
    assert all(text for text in TrainConfig.help().values()) and "finelip.margin" in TrainConfig.help()


def test_config_hash_is_sha256_of_the_sorted_dict_without_keep_checkpoint_grad_checkpointing_and_probing():
    cfg = TrainConfig(gamma=0.5, seed=3)
    shown = ("report_to", "progress_every")  # what a run shows while it trains, not what it computes
    hashed = {k: v for k, v in cfg.to_dict().items()
              if k not in ("keep_checkpoint", "grad_checkpointing", "dynamics_probe", *shown)}
    expected = hashlib.sha256(json.dumps(hashed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert NOT_HASHED == ("keep_checkpoint", "grad_checkpointing", "dynamics_probe", *shown)
    assert cfg.config_hash() == expected
    assert TrainConfig.from_overrides({"gamma": "0.50", "seed": "3"}).config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=3, keep_checkpoint="none").config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=3, grad_checkpointing=True).config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=3, dynamics_probe=False).config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=3, report_to="tensorboard", progress_every=0).config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=4).config_hash() != expected


def test_config_hash_covers_the_framework_settings_and_only_its_own():
    base = TrainConfig(framework="finelip")
    assert TrainConfig(framework="finelip", framework_settings={"margin": 0.3}).config_hash() != base.config_hash()
    assert TrainConfig(framework="finelip", framework_settings={"hn": "hinge"}).config_hash() != base.config_hash()
    assert set(base.to_dict()) & set(settings_sections()) == {"finelip"}  # no other framework's settings


def test_override_items_flatten_the_run_framework_section_only():
    settings = {"framework": "finelip", "lr": 1e-6, "eval_every_epoch": False, "finelip": {"margin": 0.2},
                "lora": {"r": 8}, "goal": {}, "max_steps": None}
    items = override_items(settings)
    assert items == ["framework=finelip", "lr=1e-06", "eval_every_epoch=false", "finelip.margin=0.2"]
    cfg = TrainConfig.from_overrides(dict(item.split("=", 1) for item in items))
    assert cfg.framework_settings.margin == 0.2 and cfg.lr == 1e-6


def test_probe_runs_becomes_dynamics_probe_only_where_it_changes_the_run():
    settings = {"framework": "longclip", "dynamics_every": 4, "probe_runs": "read"}
    assert override_items(settings) == ["framework=longclip", "dynamics_every=4", "dynamics_probe=false"]
    assert override_items(settings, read=True) == ["framework=longclip", "dynamics_every=4"]
    assert override_items({**settings, "probe_runs": "all"}) == ["framework=longclip", "dynamics_every=4"]
    # a run that never probes keeps its command line (a pretraining stage with dynamics_every 0)
    assert override_items({**settings, "dynamics_every": 0}) == ["framework=longclip", "dynamics_every=0"]
    with pytest.raises(ValueError, match="train.probe_runs='some' is not one of read, all"):
        override_items({**settings, "probe_runs": "some"})
    assert TrainConfig.from_overrides({"dynamics_probe": "false"}).dynamics_probe is False

# ------------------------------------------------------------------------ one default, declared once
def _schema_defaults(node: dict) -> dict:
    return {k: v.get("default") for k, v in node["properties"].items() if "properties" not in v}


def test_schema_train_defaults_equal_the_dataclasses():
    train = schema()["definitions"]["train_settings"]
    core = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    for key, default in _schema_defaults(train).items():
        if key in WORKFLOW_KEYS:  # turned into TrainConfig fields by override_items
            continue
        assert key in core, f"schema train.{key} is not a TrainConfig field"
        assert default == core[key] and type(default) is type(core[key]), f"train.{key}: {default!r} vs {core[key]!r}"
    # every field the workflow sets per run or leaves alone is documented (the rest come from elsewhere)
    per_run = {"framework", "gamma", "token_weight", "margin", "seed", "caption_column", "framework_settings",
               "dynamics_probe"}
    assert set(core) - set(_schema_defaults(train)) == per_run
    for key in WORKFLOW_KEYS:  # the schema offers the selections override_items accepts
        assert train["properties"][key]["enum"] == list(RUN_SELECTIONS), key
    sections = {k for k, v in train["properties"].items() if "properties" in v}
    assert sections == set(settings_sections()) == {framework_entry(n).section for n in framework_names()}
    for section in sections:
        fields = {f.name: f.default for f in dataclasses.fields(settings_sections()[section])}
        schema_defaults = _schema_defaults(train["properties"][section])
        assert schema_defaults.keys() == fields.keys(), section
        for key, default in fields.items():
            assert schema_defaults[key] == default and type(schema_defaults[key]) is type(default), f"{section}.{key}"


def test_method_recipes_offer_the_optimisation_keys_with_the_train_section_types():
    definitions = schema()["definitions"]
    recipe, train = definitions["recipe"]["properties"], definitions["train_settings"]["properties"]
    assert tuple(recipe) == RECIPE_KEYS
    for key, node in recipe.items():
        assert node["default"] is None  # null: the shared train value
        assert set(node["type"]) == {train[key]["type"], "null"}, key
    methods = schema()["properties"]["methods"]["additionalProperties"]["properties"]
    assert methods["train"] == {"$ref": "#/definitions/recipe"}
    assert set(methods["framework"]["enum"]) == set(framework_names())


def test_structxlip_settings_keep_the_released_annealing_epochs():
    settings = StructXLIPSettings()
    assert (settings.anneal_warm_epochs, settings.anneal_decay_start, settings.anneal_decay_end) == (1, 1, 8)
    assert settings.categories == ("colour", "material", "texture")
