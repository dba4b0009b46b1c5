"""TrainConfig: typed parsing of key=value overrides, validation naming the field, a stable hash."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from hnclip.train_config import TrainConfig


def test_overrides_are_parsed_into_field_types():
    cfg = TrainConfig.from_overrides({"gamma": "0.5", "epochs": "3", "eval_every_epoch": "false",
                                      "framework": "lora", "lr": "1e-5", "max_steps": "1e3", "lora_alpha": "16"})
    assert cfg.gamma == 0.5 and isinstance(cfg.gamma, float)
    assert cfg.epochs == 3 and isinstance(cfg.epochs, int)
    assert cfg.eval_every_epoch is False
    assert cfg.framework == "lora" and cfg.lr == 1e-5 and cfg.max_steps == 1000 and cfg.lora_alpha == 16


def test_typed_values_pass_through_and_ints_become_floats():
    cfg = TrainConfig.from_overrides({"gamma": 1, "eval_every_epoch": True, "micro_batch": 4})
    assert cfg.gamma == 1.0 and isinstance(cfg.gamma, float) and cfg.micro_batch == 4


def test_unknown_keys_are_named():
    with pytest.raises(ValueError, match=r"unknown TrainConfig key\(s\) \['gamme', 'zzz'\]"):
        TrainConfig.from_overrides({"gamme": "0.5", "zzz": "1", "gamma": "0.1"})


@pytest.mark.parametrize("key, value, fragment", [
    ("epochs", "2.5", "cannot read '2.5' as int"),
    ("gamma", "abc", "cannot read 'abc' as float"),
    ("eval_every_epoch", "maybe", "cannot read 'maybe' as a boolean"),
])
def test_unparseable_values_name_field_and_value(key, value, fragment):
    with pytest.raises(ValueError, match=f"TrainConfig.{key}: {fragment}"):
        TrainConfig.from_overrides({key: value})


@pytest.mark.parametrize("kwargs, fragment", [
    ({"framework": "adapterX"}, "TrainConfig.framework='adapterX' is not one of longclip, lora, dora"),
    ({"gamma": -0.1}, "TrainConfig.gamma=-0.1 must be >= 0"),
    ({"token_weight": -1.0}, "TrainConfig.token_weight=-1.0 must be >= 0"),
    ({"margin": "fixed"}, "TrainConfig.margin='fixed' is not one of recompute, frozen"),
    ({"micro_batch": 1}, "TrainConfig.micro_batch=1 must be >= 2"),
    ({"accum_steps": 0}, "TrainConfig.accum_steps=0 must be >= 1"),
    ({"warmup_steps": -1}, "TrainConfig.warmup_steps=-1 must be >= 0"),
    ({"min_lr_ratio": 1.5}, "TrainConfig.min_lr_ratio=1.5 must be in"),
    ({"precision": "fp16"}, "TrainConfig.precision='fp16' is not one of"),
    ({"beta2": 1.0}, "TrainConfig.beta2=1.0 must be in"),
    ({"precision": "bf16", "device": "cpu"}, "bf16"),
])
def test_invalid_values_name_the_field(kwargs, fragment):
    with pytest.raises(ValueError, match=fragment.replace("(", r"\(").replace("[", r"\[")):
        TrainConfig(**kwargs)


def test_documented_defaults():
    cfg = TrainConfig()
    assert (cfg.micro_batch, cfg.accum_steps, cfg.lr, cfg.adapter_lr, cfg.weight_decay) == (16, 8, 1e-5, 1e-4, 0.1)
    assert cfg.token_weight == 0.0 and cfg.gamma == 0.0 and cfg.margin == "recompute"
    assert cfg.effective_batch == 128
    assert all(f.metadata.get("help") for f in dataclasses.fields(TrainConfig))


def test_config_hash_is_sha256_of_the_sorted_dict():
    cfg = TrainConfig(gamma=0.5, seed=3)
    expected = hashlib.sha256(json.dumps(cfg.to_dict(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert cfg.config_hash() == expected
    assert TrainConfig.from_overrides({"gamma": "0.50", "seed": "3"}).config_hash() == expected
    assert TrainConfig(gamma=0.5, seed=4).config_hash() != expected


def test_goal_and_structxlip_fields_default_to_their_frameworks_settings():
    import dataclasses

    from hnclip.frameworks.goal import GoalSettings
    from hnclip.frameworks.structxlip import StructXLIPSettings

    cfg = TrainConfig()
    for prefix, settings in (("goal_", GoalSettings), ("structxlip_", StructXLIPSettings)):
        for f in dataclasses.fields(settings):
            assert getattr(cfg, prefix + f.name) == f.default, prefix + f.name
    assert GoalSettings.from_config(TrainConfig.from_overrides({"goal_segment_weight": "0.25"})).segment_weight == 0.25
