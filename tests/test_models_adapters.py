"""LoRA / DoRA on both towers: hand-counted trainable parameters, training moves them, merging is exact."""

import copy

import pytest
import torch
from torch import nn

from hnclip.losses import contrastive_loss
from hnclip.models import (
    DualEncoder,
    apply_adapters,
    create_model,
    is_adapted,
    merge_adapters,
)

# micro: per tower one block of width 32 with q/k/v/out 32->32 and an MLP 32->128->32
MICRO_LINEARS = [(32, 32)] * 4 + [(32, 128), (128, 32)]  # (in, out) per adapted Linear, per tower
TOWERS = 2


def count_trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _lora_count(r):
    return TOWERS * sum(r * (fan_in + fan_out) for fan_in, fan_out in MICRO_LINEARS)


def _dora_extra():
    return TOWERS * sum(fan_out for _, fan_out in MICRO_LINEARS)


def _batch(model, n=4, seed=0):
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(n, 3, 32, 32, generator=generator)
    tokens = model.tokenize([f"object {i} " * (3 + 4 * i) for i in range(n)])
    return images, tokens


def test_lora_trainable_count_is_r_times_in_plus_out_plus_logit_scale():
    adapted = apply_adapters(create_model("micro", seed=0), "lora", r=4, alpha=8)
    assert _lora_count(4) == 4608  # 2 towers * 4 * (4 * 64 + 160 + 160)
    assert count_trainable_parameters(adapted) == _lora_count(4) + 1
    trainable = [n for n, p in adapted.named_parameters() if p.requires_grad]
    assert all("lora_" in n or n.endswith("logit_scale") for n in trainable), trainable


def test_dora_adds_one_magnitude_per_output_feature():
    adapted = apply_adapters(create_model("micro", seed=0), "dora", r=2, alpha=4)
    assert count_trainable_parameters(adapted) == _lora_count(2) + _dora_extra() + 1


def test_adapted_model_keeps_the_dual_encoder_interface():
    adapted = apply_adapters(create_model("micro", seed=0), "lora", r=4)
    assert is_adapted(adapted)
    assert adapted.spec["name"] == "micro" and adapted.image_size == (32, 32) and adapted.context_length == 77
    assert adapted.embed_dim == 32 and adapted.frozen_positions == 0 and len(adapted.image_mean) == 3
    images, tokens = _batch(adapted)
    out = adapted(images, tokens, with_tokens=True)
    assert out["text_tokens"].shape == (4, 77, 32)
    torch.testing.assert_close(adapted.encode_text(tokens), out["text_features"], rtol=0, atol=1e-6)
    torch.testing.assert_close(adapted.encode_image(images), out["image_features"], rtol=0, atol=1e-6)
    assert adapted.logit_scale.requires_grad


@pytest.mark.parametrize("method", ["lora", "dora"])
def test_training_moves_adapters_and_merge_reproduces_the_adapted_model(method):
    base = create_model("micro", seed=0)
    reference = copy.deepcopy(base).eval()
    adapted = apply_adapters(base, method, r=4, alpha=8)
    images, tokens = _batch(adapted)
    optimizer = torch.optim.AdamW([p for p in adapted.parameters() if p.requires_grad], lr=5e-2)
    for _ in range(3):
        out = adapted(images, tokens)
        loss = contrastive_loss(out["image_features"], out["text_features"], out["logit_scale"], gamma=0.5)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    adapted.eval()
    with torch.no_grad():
        adapted_out = adapted(images, tokens, with_tokens=True)
        base_out = reference(images, tokens, with_tokens=True)
    for key in ("image_features", "text_features"):
        assert (adapted_out[key] - base_out[key]).abs().max() > 1e-3, key

    merged = merge_adapters(adapted)
    assert type(merged) is DualEncoder and not is_adapted(merged)
    assert any(isinstance(m, nn.MultiheadAttention) for m in merged.modules())
    assert all(p.requires_grad for p in merged.parameters())
    assert merged.state_dict().keys() == reference.state_dict().keys()
    with torch.no_grad():
        merged_out = merged(images, tokens, with_tokens=True)
    for key in ("image_features", "text_features", "image_tokens", "text_tokens"):
        torch.testing.assert_close(merged_out[key], adapted_out[key], rtol=0, atol=1e-5, msg=key)


def test_lora_on_out_proj_alone_reaches_the_output():
    # with nn.MultiheadAttention, LoRA on out_proj is silently bypassed; LinearAttention must call it
    model = create_model("micro", seed=0).eval()
    images, tokens = _batch(model)
    before = model(images, tokens)
    adapted = apply_adapters(model, "lora", r=2, target_modules=("out_proj",))
    assert count_trainable_parameters(adapted) == TOWERS * 2 * (32 + 32) + 1
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_()
    after = adapted(images, tokens)
    assert (after["text_features"] - before["text_features"]).abs().max() > 1e-3
    assert (after["image_features"] - before["image_features"]).abs().max() > 1e-3


def test_bad_method_or_unmatched_target_names_the_problem():
    with pytest.raises(ValueError, match="unknown adapter method 'ia3'"):
        apply_adapters(create_model("micro", seed=0), "ia3")
    with pytest.raises(ValueError, match="q_prj"):
        apply_adapters(create_model("micro", seed=0), "lora", target_modules=("q_prj", "k_proj"))
