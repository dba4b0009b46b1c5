"""LinearAttention is a drop-in nn.MultiheadAttention; converting a model changes none of its outputs."""

import copy

import pytest
import torch
from torch import nn

from hnclip.models import (
    LinearAttention,
    convert_attention_to_linear,
    convert_attention_to_native,
    create_model,
)


def _pair(batch_first: bool, seed: int = 0):
    torch.manual_seed(seed)
    mha = nn.MultiheadAttention(16, 4, batch_first=batch_first).eval()
    with torch.no_grad():  # non-zero biases so a swapped bias slice would show
        mha.in_proj_bias.normal_()
        mha.out_proj.bias.normal_()
    holder = nn.Sequential(mha)
    converted = convert_attention_to_linear(copy.deepcopy(holder))[0]
    assert isinstance(converted, LinearAttention)
    return mha, converted


def _causal(length: int) -> torch.Tensor:
    return torch.full((length, length), float("-inf")).triu(1)


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("need_weights", [True, False])
def test_linear_attention_matches_mha_with_float_causal_and_padding_masks(batch_first, need_weights):
    mha, linear = _pair(batch_first)
    x = torch.randn(3, 5, 16) if batch_first else torch.randn(5, 3, 16)
    padding = torch.zeros(3, 5)
    padding[1, 3:] = float("-inf")  # same mask type as attn_mask: MHA deprecates mixing them
    kwargs = {"attn_mask": _causal(5), "key_padding_mask": padding, "need_weights": need_weights}
    expected, expected_weights = mha(x, x, x, **kwargs)
    got, got_weights = linear(x, x, x, **kwargs)
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)
    if need_weights:
        torch.testing.assert_close(got_weights, expected_weights, rtol=0, atol=1e-6)
    else:
        assert got_weights is None


def test_linear_attention_matches_mha_with_bool_and_per_head_masks_in_cross_attention():
    mha, linear = _pair(True, seed=1)
    q, kv = torch.randn(2, 4, 16), torch.randn(2, 6, 16)
    bool_mask = torch.rand(4, 6) > 0.6
    bool_mask[:, 0] = False  # keep every row attendable
    bool_padding = torch.zeros(2, 6, dtype=torch.bool)
    bool_padding[0, 4:] = True
    per_head = torch.randn(2 * 4, 4, 6)
    for mask, padding in ((bool_mask, bool_padding), (per_head, None)):
        kwargs = {"attn_mask": mask, "key_padding_mask": padding, "need_weights": True,
                  "average_attn_weights": False}
        expected = mha(q, kv, kv, **kwargs)
        got = linear(q, kv, kv, **kwargs)
        torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-6)
        torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-6)


def test_linear_attention_handles_unbatched_input_like_mha():
    mha, linear = _pair(True, seed=2)
    x = torch.randn(5, 16)
    expected = mha(x, x, x, attn_mask=_causal(5))
    got = linear(x, x, x, attn_mask=_causal(5))
    torch.testing.assert_close(got[0], expected[0], rtol=0, atol=1e-6)
    torch.testing.assert_close(got[1], expected[1], rtol=0, atol=1e-6)


def test_converted_micro_model_gives_identical_outputs_including_causal_text():
    model = create_model("micro", seed=0).eval()
    images = torch.randn(3, 3, 32, 32)
    tokens = model.tokenize(["a blue ball under a red cube", "two dogs", "word " * 80])
    before = model(images, tokens, with_tokens=True)
    convert_attention_to_linear(model)
    assert not any(isinstance(m, nn.MultiheadAttention) for m in model.modules())
    assert sum(isinstance(m, LinearAttention) for m in model.modules()) == 2
    after = model(images, tokens, with_tokens=True)
    for key in ("image_features", "text_features", "image_tokens", "text_tokens"):
        torch.testing.assert_close(after[key], before[key], rtol=0, atol=1e-6, msg=key)


def test_conversion_round_trip_restores_the_native_state_dict_exactly():
    model = create_model("micro", seed=0)
    original = copy.deepcopy(model.state_dict())
    convert_attention_to_native(convert_attention_to_linear(model))
    restored = model.state_dict()
    assert restored.keys() == original.keys()
    for key, value in original.items():
        assert torch.equal(restored[key], value), key
