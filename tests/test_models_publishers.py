"""The baselines' released weights read as their own evaluation code reads them, offline.

The references are transcriptions, in this file, of the publishers' own code (not of ours):

- StructXLIP ``structxlip/utils/func.py`` ``longclip_pos_embeddings`` (GOAL's ``retrieval_goal.py`` calls the same
  function of its ``utils/func.py``) and ``structxlip/retrieval.py`` ``extract_state_dict`` +
  ``model.load_state_dict(state, strict=False)``, run on transformers' own ``CLIPModel``;
- FineLIP ``model/cross_net.py`` ``TokenAggregation`` and ``CrossSparseAggrNet_v2.forward_dual_aggr``,
  ``model/xttn.py`` ``mask_xattn_one_text``, and ``train/test.py`` ``get_metrics``' fused score
  ``0.8 * cosine + 0.2 * fine-grained`` with its caption lengths (non-zero token ids).

Stand-in files come from :mod:`hnclip.rehearsal.released` (the publishers' formats, random weights).
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from hnclip.models import load_model
from hnclip.models.convert import convert_source
from hnclip.rehearsal.released import finelip_state_dict, write_clip_model_folder, write_overlay_checkpoint

ATOL = 1e-5
SMALL_VISION = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2,
                "image_size": 32, "patch_size": 8}
SMALL_TEXT = {"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2, "num_attention_heads": 2}
CAPTIONS = ["A red cube to the left of a small blue sphere.",
            " ".join(f"object {i} is a dotted purple cone beside a large orange torus" for i in range(14)),
            "two striped cylinders, one green and one yellow, on a grey floor."]


# ------------------------------------------------------------------------------ transcriptions (publishers')
def longclip_pos_embeddings(model, new_max_token: int, keep_len: int = 20):
    """StructXLIP structxlip/utils/func.py, as published."""
    text_model = model.text_model
    pos_embeddings_pre = text_model.embeddings.position_embedding.weight
    length, dim = pos_embeddings_pre.shape
    max_len = 8 * length - 7 * keep_len
    if new_max_token > max_len:
        raise ValueError("new_max_token too large")
    pos_new = torch.zeros([new_max_token, dim], dtype=pos_embeddings_pre.dtype, device=pos_embeddings_pre.device)
    upto = min(keep_len, new_max_token)
    if upto > 0:
        pos_new[:upto] = pos_embeddings_pre[:upto]
    write_ptr = keep_len
    steps = max(0, length - 1 - keep_len)
    for i in range(steps):
        a = pos_embeddings_pre[keep_len + i]
        b = pos_embeddings_pre[keep_len + i + 1]
        slots = [a, (3 * a + 1 * b) / 4, (2 * a + 2 * b) / 4, (1 * a + 3 * b) / 4]
        for s in slots:
            if write_ptr < new_max_token:
                pos_new[write_ptr] = s
                write_ptr += 1
    delta_extrap = pos_embeddings_pre[-1] - pos_embeddings_pre[-2]
    tail = [pos_embeddings_pre[-1] + 0 * delta_extrap / 4, pos_embeddings_pre[-1] + 1 * delta_extrap / 4,
            pos_embeddings_pre[-1] + 2 * delta_extrap / 4, pos_embeddings_pre[-1] + 3 * delta_extrap / 4]
    for s in tail:
        if write_ptr < new_max_token:
            pos_new[write_ptr] = s
            write_ptr += 1
    text_model.embeddings.position_embedding.weight = nn.Parameter(pos_new)
    new_position_ids = torch.arange(0, new_max_token, device=pos_new.device).unsqueeze(0)
    if hasattr(text_model.embeddings, "position_ids"):
        text_model.embeddings.position_ids = new_position_ids
    else:
        text_model.embeddings.register_buffer("position_ids", new_position_ids)


def extract_state_dict(ckpt_data: dict) -> dict:
    """StructXLIP structxlip/retrieval.py, as published."""
    if "model_state_dict" in ckpt_data:
        return ckpt_data["model_state_dict"]
    if any(k.startswith("clip_model.") for k in ckpt_data.keys()):
        state = {}
        for k, v in ckpt_data.items():
            if k.startswith("clip_model."):
                state[k[len("clip_model."):]] = v
            else:
                state[k] = v
        return state
    return ckpt_data


def publisher_model(base_folder, ckpt_path):
    """retrieval_goal.py / structxlip retrieval.py: base model, stretch, load_state_dict(strict=False) (float32)."""
    import transformers

    model = transformers.AutoModel.from_pretrained(str(base_folder))
    longclip_pos_embeddings(model, 248)
    model.load_state_dict(extract_state_dict(torch.load(ckpt_path, map_location="cpu")), strict=False)
    return model.eval()


# ------------------------------------------------------------------------------------------ GOAL, StructXLIP
@pytest.fixture(scope="module")
def base_folder(tmp_path_factory):
    return write_clip_model_folder(tmp_path_factory.mktemp("base") / "clip", seed=3, vision=SMALL_VISION,
                                   text=SMALL_TEXT, projection_dim=32)


def _features(theirs, ours, tokens, pixels):
    with torch.no_grad():
        out = theirs(pixel_values=pixels, input_ids=tokens)
        return (float((out.image_embeds - ours.encode_image(pixels)).abs().max()),
                float((out.text_embeds - ours.encode_text(tokens)).abs().max()))


@pytest.mark.parametrize("publisher, wrap", [("goal", None), ("structxlip", None),
                                             ("structxlip", "model_state_dict"), ("structxlip", "clip_model.")])
def test_overlay_checkpoints_encode_as_the_publishers_evaluation_does(base_folder, tmp_path, publisher, wrap):
    ckpt = write_overlay_checkpoint(tmp_path / "released.pth", base_folder, seed=7)
    if wrap:  # the two other layouts StructXLIP's extract_state_dict reads
        state = torch.load(ckpt)
        state = {"model_state_dict": state} if wrap == "model_state_dict" else {f"clip_model.{k}": v for k, v in state.items()}
        torch.save(state, ckpt)
    theirs = publisher_model(base_folder, ckpt)
    ours = load_model(convert_source(publisher, str(ckpt), tmp_path / "model", base=str(base_folder)))
    assert (ours.context_length, ours.frozen_positions) == (248, 20)
    tokens = ours.tokenize(CAPTIONS)
    assert max(_features(theirs, ours, tokens, torch.randn(2, 3, 32, 32))) <= ATOL


def test_a_partial_checkpoint_keeps_the_base_models_tensors(base_folder, tmp_path, caplog):
    state = torch.load(write_overlay_checkpoint(tmp_path / "full.pth", base_folder, seed=8))
    partial = {k: v for k, v in state.items() if not k.startswith("vision_model.")}  # a text-only fine-tune
    partial["extra.head.weight"] = torch.zeros(3)
    torch.save(partial, tmp_path / "partial.pth")
    theirs = publisher_model(base_folder, tmp_path / "partial.pth")
    with caplog.at_level("WARNING"):
        ours = load_model(convert_source("goal", str(tmp_path / "partial.pth"), tmp_path / "model",
                                         base=str(base_folder)))
    assert max(_features(theirs, ours, ours.tokenize(CAPTIONS), torch.randn(2, 3, 32, 32))) <= ATOL
    assert "extra.head.weight" in caplog.text and "vision_model.embeddings.class_embedding" in caplog.text


def test_a_checkpoint_of_another_base_is_refused(base_folder, tmp_path):
    other = write_clip_model_folder(tmp_path / "other", seed=1, vision={**SMALL_VISION, "hidden_size": 128},
                                    text=SMALL_TEXT, projection_dim=32)
    ckpt = write_overlay_checkpoint(tmp_path / "other.pth", other, seed=2)
    with pytest.raises(ValueError, match=r"vision_model\..* has shape .*not a checkpoint of this base"):
        convert_source("structxlip", str(ckpt), tmp_path / "model", base=str(base_folder))
    with pytest.raises(ValueError, match=r"models\.goal_docci\.base: required for source goal"):
        convert_source("goal", str(ckpt), tmp_path / "model", key="models.goal_docci")


# --------------------------------------------------------------------------------------------------- FineLIP
ARCH = {"embed_dim": 32, "image_resolution": 32, "vision_layers": 2, "vision_width": 64, "vision_patch_size": 8,
        "context_length": 248, "vocab_size": 49408, "transformer_width": 64, "transformer_layers": 2}


class TokenAggregation(nn.Module):
    """FineLIP model/cross_net.py, as published."""

    def __init__(self, dim=512, keeped_patches=64, dim_ratio=0.2):
        super().__init__()
        hidden_dim = int(dim * dim_ratio)
        self.weight = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, hidden_dim), nn.GELU(),
                                    nn.Linear(hidden_dim, keeped_patches))
        self.scale = nn.Parameter(torch.ones(1, 1, 1))

    def forward(self, x, keep_policy=None):
        weight = self.weight(x)
        weight = weight.transpose(2, 1) * self.scale
        if keep_policy is not None:
            keep_policy = keep_policy.unsqueeze(1)
            weight = weight - (1 - keep_policy) * 1e10
        weight = F.softmax(weight, dim=2)
        return torch.bmm(weight, x)


def is_sqr(n):
    a = int(math.sqrt(n))
    return a * a == n


def mask_xattn_one_text(img_embs, cap_i_expand, img_mask=None, i2t=True, scan=True):
    """FineLIP model/xttn.py, as published (img_mask None)."""
    cap2img_sim = torch.bmm(cap_i_expand, img_embs.transpose(1, 2))
    if scan:
        cap2img_sim = F.leaky_relu(cap2img_sim, negative_slope=0.1)
    row_sim = cap2img_sim.max(dim=2)[0]
    row_sim_mean = row_sim.mean(dim=1, keepdim=True)
    if i2t:
        column_sim = cap2img_sim.max(dim=1)[0]
        column_sim_mean = column_sim.mean(dim=1, keepdim=True)
        sim_one_text = row_sim_mean + column_sim_mean
    else:
        sim_one_text = row_sim_mean
    return sim_one_text


def forward_dual_aggr(aggr_net, cap_aggr_net, img_embs, cap_embs, cap_lens):
    """CrossSparseAggrNet_v2.forward_dual_aggr (eval mode), as published."""
    B_v, L_v, C = img_embs.shape
    has_cls_token = not is_sqr(img_embs.shape[1])
    if has_cls_token:
        img_cls_emb = img_embs[:, 0:1, :]
        img_spatial_embs = img_embs[:, 1:, :]
    else:
        img_spatial_embs = img_embs
    aggr_tokens = aggr_net(img_spatial_embs)
    improve_sims = []
    for i in range(len(cap_lens)):
        n_word = cap_lens[i] - 1
        cap_i = cap_embs[i, :n_word, :].unsqueeze(0)
        cap_select_tokens = cap_aggr_net(cap_i)
        cap_select_tokens = torch.cat((cap_select_tokens, cap_embs[i, n_word:n_word + 1, :].unsqueeze(0)), dim=1)
        select_tokens = torch.cat((img_cls_emb, aggr_tokens), dim=1) if has_cls_token else aggr_tokens
        select_tokens = F.normalize(select_tokens, dim=-1)
        cap_select_tokens = F.normalize(cap_select_tokens, dim=-1)
        improve_sims.append(mask_xattn_one_text(img_embs=select_tokens,
                                                cap_i_expand=cap_select_tokens.repeat(B_v, 1, 1)))
    return torch.cat(improve_sims, dim=1)


def _aggregator(state: dict, prefix: str) -> TokenAggregation:
    slots, hidden = state[f"{prefix}.weight.3.weight"].shape
    module = TokenAggregation(dim=state[f"{prefix}.weight.0.weight"].shape[0], keeped_patches=slots)
    assert module.weight[1].out_features == hidden
    module.load_state_dict({k[len(prefix) + 1:]: v for k, v in state.items() if k.startswith(prefix + ".")})
    return module.eval()


def test_finelip_checkpoint_is_ranked_by_finelips_fused_score(tmp_path):
    from hnclip.framework_loading import load_framework
    from hnclip.rehearsal.released import write_finelip_checkpoint

    ckpt = write_finelip_checkpoint(tmp_path / "finelip-B.pt", seed=4, arch=ARCH)
    state = torch.load(ckpt)
    out = convert_source("finelip", str(ckpt), tmp_path / "model")
    model = load_model(out).eval()
    framework = load_framework(out, model).eval()
    assert framework.slots == int(16 * 0.4 * 0.5) and framework.settings.score_weight == pytest.approx(0.2)

    pixels = torch.randn(3, 3, 32, 32, generator=torch.Generator().manual_seed(9))
    tokens = model.tokenize(CAPTIONS)
    with torch.no_grad():
        # FineLIP's encode_image_full / encode_text_full @ text_projection: the encoder itself is Long-CLIP's,
        # checked against Long-CLIP's own encode_text in tests/test_models_checkpoints.py
        pooled, patches = model._encode_image(pixels, True)
        image_full = torch.cat([pooled[:, None], patches], dim=1)
        _, text_full, _ = model._encode_text(tokens, True)
        image_global = F.normalize(image_full[:, 0, :], dim=-1)
        text_global = F.normalize(text_full[torch.arange(len(tokens)), tokens.argmax(dim=-1)], dim=-1)
        lengths = [torch.nonzero(tokens[i]).size(0) for i in range(tokens.shape[0])]
        fine = forward_dual_aggr(_aggregator(state, "cross_net.aggr_net"), _aggregator(state, "cross_net.cap_aggr_net"),
                                 image_full, text_full, lengths)
        theirs = 0.8 * (image_global @ text_global.t()) + 0.2 * fine
        ours = framework.score(framework.encode_images(model, pixels), framework.encode_texts(model, tokens))
    assert float((theirs - ours).abs().max()) <= ATOL


def test_finelip_cross_net_of_another_shape_is_refused(tmp_path):
    state = finelip_state_dict(seed=1, arch=ARCH)
    state["cross_net.sparse_net.foo"] = torch.zeros(2)
    torch.save(state, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match=r"cross_net holds modules our FineLIP framework does not have"):
        convert_source("finelip", str(tmp_path / "odd.pt"), tmp_path / "model")
    state = finelip_state_dict(seed=1, arch=ARCH)
    del state["cross_net.cap_aggr_net.scale"]
    torch.save(state, tmp_path / "odd2.pt")
    with pytest.raises(ValueError, match=r"cross_net\.cap_aggr_net holds"):
        convert_source("finelip", str(tmp_path / "odd2.pt"), tmp_path / "model2")
