"""DualEncoder: registry, forward outputs, tokenizer, stretched model and its frozen positional rows."""

import math

import pytest
import torch
import torch.nn.functional as F

from hnclip.losses import contrastive_loss
from hnclip.models import (
    create_model,
    get_model_config,
    list_models,
    stretch_model,
    stretch_positional_embedding,
)

SOT, EOT = 49406, 49407


def test_registry_lists_the_three_configs_and_unknown_name_lists_them():
    assert {"micro", "tiny", "ViT-L-14-longclip"} <= set(list_models())
    with pytest.raises(ValueError, match="unknown model 'nope'.*micro.*tiny"):
        create_model("nope")


def test_get_model_config_is_a_deep_copy():
    config = get_model_config("micro")
    config["vision_cfg"]["width"] = 999
    assert get_model_config("micro")["vision_cfg"]["width"] == 32


def test_micro_model_has_the_documented_dimensions():
    model = create_model("micro", seed=0)
    assert model.embed_dim == 32 and model.image_size == (32, 32) and model.context_length == 77
    assert model.clip.visual.conv1.kernel_size == (8, 8)
    assert model.clip.visual.transformer.resblocks[0].attn.num_heads == 2
    assert model.clip.transformer.resblocks[0].attn.num_heads == 2
    assert len(model.clip.transformer.resblocks) == 1 and model.clip.token_embedding.num_embeddings == 49408
    assert model.image_mean == pytest.approx((0.48145466, 0.4578275, 0.40821073))
    assert model.logit_scale.item() == pytest.approx(math.log(100))
    assert model.spec == {"name": "micro", "config": get_model_config("micro"), "context_length": 77,
                          "frozen_positions": 0}


def test_seed_reproduces_init_without_touching_global_rng():
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = create_model("micro", seed=7)
    assert torch.equal(torch.rand(1), expected_next)
    b = create_model("micro", seed=7)
    c = create_model("micro", seed=8)
    assert torch.equal(a.clip.visual.proj, b.clip.visual.proj)
    assert not torch.equal(a.clip.visual.proj, c.clip.visual.proj)


def test_vit_l_longclip_parameter_count_matches_hand_count():
    def block(width):  # in_proj 3W^2+3W, out_proj W^2+W, two LNs 4W, MLP 8W^2+5W
        return 12 * width * width + 13 * width

    vision = 3 * 14 * 14 * 1024 + 1024 + 257 * 1024 + 2 * 1024 + 24 * block(1024) + 2 * 1024 + 1024 * 768
    text = 49408 * 768 + 248 * 768 + 12 * block(768) + 2 * 768 + 768 * 768
    with torch.device("meta"):  # shapes only: no 1.7 GB allocation on a test machine
        model = create_model("ViT-L-14-longclip", frozen_positions=20)
    assert model.context_length == 248 and model.image_size == (224, 224) and model.embed_dim == 768
    trainable = sum(p.numel() for p in model.parameters())
    assert trainable == vision + text + 1 - 20 * 768  # frozen rows are a buffer, not a parameter
    assert model.positional_embedding_frozen.shape == (20, 768)


def _images(n=3, size=32, seed=0):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("log_scale, expected", [(math.log(50.0), 50.0), (math.log(400.0), 100.0)])
def test_scale_is_exp_of_the_log_scale_clamped_at_100_and_forward_returns_it(log_scale, expected):
    model = create_model("micro", seed=0)
    with torch.no_grad():
        model.logit_scale.fill_(log_scale)
    assert model.scale().detach().item() == pytest.approx(expected, rel=1e-6)
    out = model(torch.zeros(1, 3, 32, 32), None)
    assert out["logit_scale"].detach().item() == pytest.approx(expected, rel=1e-6)


def test_forward_token_outputs_shapes_normalisation_and_mask():
    model = create_model("micro", seed=0).eval()
    tokens = torch.zeros(3, 77, dtype=torch.long)
    tokens[0, :4] = torch.tensor([SOT, 0, 5, EOT])  # id 0 is the real token "!" here, not padding
    tokens[1, :2] = torch.tensor([SOT, EOT])
    tokens[2, :] = torch.randint(1, 40000, (77,))
    tokens[2, 0], tokens[2, 76] = SOT, EOT
    out = model(_images(), tokens, with_tokens=True)
    assert out["image_features"].shape == (3, 32) and out["text_features"].shape == (3, 32)
    assert out["image_tokens"].shape == (3, 16, 32)  # (32 / 8)^2 patches, CLS excluded
    assert out["text_tokens"].shape == (3, 77, 32)
    for key in ("image_features", "text_features", "image_tokens", "text_tokens"):
        torch.testing.assert_close(out[key].norm(dim=-1), torch.ones(out[key].shape[:-1]))
    expected_mask = torch.zeros(3, 77, dtype=torch.bool)
    expected_mask[0, :4] = True
    expected_mask[1, :2] = True
    expected_mask[2, :] = True
    assert out["text_mask"].dtype == torch.bool and torch.equal(out["text_mask"], expected_mask)
    assert out["logit_scale"].item() == pytest.approx(100.0)


def test_global_features_equal_open_clip_and_the_token_path():
    model = create_model("micro", seed=0).eval()
    images = _images()
    tokens = model.tokenize(["a red cube left of a blue ball", "two cats", "x " * 90])
    plain = model(images, tokens)
    with_tokens = model(images, tokens, with_tokens=True)
    torch.testing.assert_close(plain["image_features"], model.clip.encode_image(images, normalize=True),
                               rtol=0, atol=1e-6)
    # text global feature = projected EOT token, and the CLS-free patch tokens are a separate output
    torch.testing.assert_close(with_tokens["text_features"], plain["text_features"], rtol=0, atol=1e-6)
    torch.testing.assert_close(with_tokens["image_features"], plain["image_features"], rtol=0, atol=1e-6)
    eot = tokens.argmax(-1)
    torch.testing.assert_close(with_tokens["text_tokens"][torch.arange(3), eot], plain["text_features"],
                               rtol=0, atol=1e-6)
    torch.testing.assert_close(model.encode_text(tokens), plain["text_features"], rtol=0, atol=0)
    torch.testing.assert_close(model.encode_image(images), plain["image_features"], rtol=0, atol=0)


def test_text_path_and_tokens_match_float64_reference_of_clip_encode_text():
    model = create_model("micro", seed=3).double().eval()
    tokens = model.tokenize(["a small scene with many objects", "hi"])
    c = model.clip
    block = c.transformer.resblocks[0]
    x = c.token_embedding.weight[tokens] + model.positional_embedding()
    causal = torch.full((77, 77), float("-inf"), dtype=torch.float64).triu(1)
    h = F.layer_norm(x, (32,), block.ln_1.weight, block.ln_1.bias)
    q, k, v = (h @ block.attn.in_proj_weight.T + block.attn.in_proj_bias).split(32, dim=-1)
    heads = [((q[..., s] @ k[..., s].transpose(1, 2)) / 4.0 + causal).softmax(-1) @ v[..., s]
             for s in (slice(0, 16), slice(16, 32))]
    x = x + torch.cat(heads, -1) @ block.attn.out_proj.weight.T + block.attn.out_proj.bias
    h = F.layer_norm(x, (32,), block.ln_2.weight, block.ln_2.bias)
    x = x + F.gelu(h @ block.mlp.c_fc.weight.T + block.mlp.c_fc.bias) @ block.mlp.c_proj.weight.T \
        + block.mlp.c_proj.bias
    x = F.layer_norm(x, (32,), c.ln_final.weight, c.ln_final.bias)
    reference = F.normalize(x[torch.arange(2), tokens.argmax(-1)] @ c.text_projection, dim=-1)
    torch.testing.assert_close(model.encode_text(tokens), reference, rtol=0, atol=1e-10)
    # token outputs: every real position matches the full-length reference; columns past the batch's
    # longest caption are skipped (causal attention cannot carry them back) and come out as zeros
    out = model(None, tokens, with_tokens=True)
    reference_tokens = F.normalize(x @ c.text_projection, dim=-1)
    mask = out["text_mask"]
    torch.testing.assert_close(out["text_tokens"][mask], reference_tokens[mask], rtol=0, atol=1e-10)
    longest = int(tokens.argmax(-1).max()) + 1
    assert longest < 20 and (out["text_tokens"][:, longest:] == 0).all()


def test_tokenize_truncates_long_captions_keeping_eot_last():
    model = create_model("micro", seed=0)
    tokens = model.tokenize(["word " * 200, "short"])
    assert tokens.shape == (2, 77) and tokens.dtype == torch.long
    assert tokens[0, 0] == SOT and tokens[0, 76] == EOT and (tokens[0] == EOT).sum() == 1
    assert tokens[1, 0] == SOT and tokens[1, 2] == EOT and (tokens[1, 3:] == 0).all()


def test_wrong_token_length_names_the_expected_shape():
    model = create_model("micro", seed=0)
    with pytest.raises(ValueError, match=r"\[B, 77\]"):
        model.encode_text(torch.zeros(2, 248, dtype=torch.long))


def test_stretch_model_copies_weights_and_stretches_the_table():
    base = create_model("micro", seed=0)
    stretched = stretch_model(base)
    assert stretched.context_length == 248 and stretched.frozen_positions == 20
    assert stretched.spec["context_length"] == 248 and stretched.spec["frozen_positions"] == 20
    expected_table = stretch_positional_embedding(base.positional_embedding().detach())
    torch.testing.assert_close(stretched.positional_embedding(), expected_table, rtol=0, atol=0)
    base_state, new_state = base.state_dict(), stretched.state_dict()
    for key, value in base_state.items():
        if not key.startswith("positional_embedding"):
            assert torch.equal(new_state[key], value), key


def test_stretched_model_leaves_short_captions_unchanged():
    # causal attention: a caption ending before position 20 only sees the copied rows
    base = create_model("micro", seed=0).eval()
    stretched = stretch_model(base).eval()
    captions = ["a cat", "a red cube on a green table"]
    torch.testing.assert_close(stretched.encode_text(stretched.tokenize(captions)),
                               base.encode_text(base.tokenize(captions)), rtol=0, atol=1e-6)


def test_frozen_rows_survive_adamw_with_weight_decay_and_the_rest_moves():
    model = stretch_model(create_model("micro", seed=0))
    before = model.positional_embedding().detach().clone()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2,
                                  weight_decay=0.1)
    captions = ["word " * 60 + str(i) for i in range(4)]  # long enough to use positions past 20
    out = model(_images(4), model.tokenize(captions))
    contrastive_loss(out["image_features"], out["text_features"], out["logit_scale"], gamma=0.5).backward()
    optimizer.step()
    after = model.positional_embedding().detach()
    assert torch.equal(after[:20], before[:20])
    assert ((after[20:] - before[20:]).abs().amax(dim=1) > 0).all()
    assert "positional_embedding_frozen" in model.state_dict()
    assert all(p is not model.positional_embedding_frozen for p in model.parameters())


def test_frozen_positions_out_of_range_is_rejected():
    with pytest.raises(ValueError, match="frozen_positions"):
        create_model("micro", frozen_positions=78)
