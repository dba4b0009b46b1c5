"""save_model / load_model: exact round trips, adapters merged on a copy, safetensors + JSON only."""

import json

import pytest
import torch

from hnclip.models import (
    DualEncoder,
    apply_adapters,
    create_model,
    is_adapted,
    load_model,
    merge_adapters,
    save_model,
    stretch_model,
)


def count_trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key].dtype == sb[key].dtype and torch.equal(sa[key], sb[key]), key


def test_round_trip_of_a_stretched_model_is_exact(tmp_path):
    model = stretch_model(create_model("micro", seed=0))
    with torch.no_grad():
        model.logit_scale.fill_(3.3)
    save_model(model, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["model.json", "model.safetensors"]
    spec = json.loads((tmp_path / "run" / "model.json").read_text())["spec"]
    assert spec["context_length"] == 248 and spec["frozen_positions"] == 20 and spec["name"] == "micro"
    loaded = load_model(tmp_path / "run")
    assert type(loaded) is DualEncoder and loaded.spec == model.spec
    _assert_same_state(model, loaded)
    tokens = model.tokenize(["word " * 40, "a cat"])
    images = torch.randn(2, 3, 32, 32)
    expected = model.eval()(images, tokens)
    got = loaded.eval()(images, tokens)
    assert torch.equal(got["text_features"], expected["text_features"])
    assert torch.equal(got["image_features"], expected["image_features"])
    assert loaded.positional_embedding_frozen.shape == (20, 32)
    assert count_trainable_parameters(loaded) == count_trainable_parameters(model)


def test_saving_an_adapted_model_merges_a_copy_and_leaves_training_state_alone(tmp_path):
    adapted = apply_adapters(create_model("micro", seed=0), "lora", r=4)
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.1)
    trainable_before = count_trainable_parameters(adapted)
    save_model(adapted, tmp_path / "adapted")
    assert is_adapted(adapted) and count_trainable_parameters(adapted) == trainable_before
    loaded = load_model(tmp_path / "adapted").eval()
    adapted.eval()
    images = torch.randn(2, 3, 32, 32)
    tokens = adapted.tokenize(["a red cube", "two blue balls near a tree"])
    with torch.no_grad():
        expected = adapted(images, tokens)
        got = loaded(images, tokens)
    for key in ("image_features", "text_features"):
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=1e-5)
    _assert_same_state(loaded, merge_adapters(adapted))


def test_spec_of_a_checkpoint_without_registry_name_rebuilds_from_its_config(tmp_path):
    config = create_model("micro").spec["config"]
    config["text_cfg"]["layers"] = 2  # not in the registry: the spec must carry the full config
    model = DualEncoder(config, context_length=40, frozen_positions=5)
    save_model(model, tmp_path / "custom")
    loaded = load_model(tmp_path / "custom")
    assert len(loaded.clip.transformer.resblocks) == 2 and loaded.context_length == 40
    _assert_same_state(model, loaded)


def test_load_model_names_missing_files(tmp_path):
    save_model(create_model("micro", seed=0), tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_model(tmp_path / "m")
