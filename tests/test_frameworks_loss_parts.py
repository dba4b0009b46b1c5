"""Framework loss parts against naive float64 per-pair references, and the plug-in protocol.

References are written as loops over pairs and tokens from the definitions (FineLIP's aggregation,
cross similarity and VSE hinge; Long-CLIP's PCA short-caption term via an eigendecomposition of the
covariance), never by calling the code under test. Each framework's whole objective against its
authors' code is in tests/test_frameworks_objectives.py.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hnclip.config.train import TrainConfig
from hnclip.frameworks import build_framework, framework_names, get_framework_class
from hnclip.frameworks.base import Batch, Framework
from hnclip.frameworks.finelip import TokenAggregator, cross_similarity, vse_hinge_loss
from hnclip.frameworks.longclip import pca_reconstruct, short_caption_loss
from hnclip.losses import contrastive_loss
from hnclip.models import create_model


def normalised(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(*shape, generator=g, dtype=torch.float64), dim=-1)


# ------------------------------------------------------------------------------------------ registry
def test_unknown_framework_lists_the_known_ones():
    with pytest.raises(ValueError, match=re.escape(f"known frameworks: {', '.join(framework_names())}")):
        get_framework_class("clipzilla")
    with pytest.raises(ValueError, match="framework='clipzilla'"):
        TrainConfig(framework="clipzilla")
    assert {"longclip", "lora", "dora", "finelip", "goal", "structxlip"} <= set(framework_names())


# ------------------------------------------------------------------------------------- FineLIP parts
def reference_aggregate(module: TokenAggregator, tokens: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """Per sample and slot: softmax over the valid tokens of scale * MLP(token)[slot], weighted token sum."""
    ln, fc1, _, fc2 = module.weight
    p = {k: v.detach().double().numpy() for k, v in [("g", ln.weight), ("b", ln.bias), ("w1", fc1.weight),
                                                     ("b1", fc1.bias), ("w2", fc2.weight), ("b2", fc2.bias)]}
    scale = float(module.scale.detach())
    out = np.zeros((tokens.shape[0], p["w2"].shape[0], tokens.shape[2]))
    for b in range(tokens.shape[0]):
        logits = []
        for n in range(tokens.shape[1]):
            x = tokens[b, n]
            mean, var = x.mean(), ((x - x.mean()) ** 2).mean()
            h = (x - mean) / math.sqrt(var + ln.eps) * p["g"] + p["b"]
            h = p["w1"] @ h + p["b1"]
            h = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in h])
            logits.append((p["w2"] @ h + p["b2"]) * scale)
        logits = np.array(logits)  # [N, K]
        for k in range(logits.shape[1]):
            idx = [n for n in range(tokens.shape[1]) if valid[b, n]]
            m = max(logits[n, k] for n in idx)
            w = {n: math.exp(logits[n, k] - m) for n in idx}
            total = sum(w.values())
            out[b, k] = sum(w[n] / total * tokens[b, n] for n in idx)
    return out


def test_token_aggregator_matches_per_token_softmax_reference_and_ignores_masked_tokens():
    torch.manual_seed(0)
    module = TokenAggregator(dim=10, slots=3).double()
    with torch.no_grad():
        module.scale.fill_(1.7)
        for param in module.parameters():
            param.add_(0.1 * torch.randn_like(param))  # LayerNorm gain/bias away from 1/0
    tokens = torch.randn(2, 5, 10, dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False, False], [True, True, True, True, True]])
    got = module(tokens, mask).detach().numpy()
    expected = reference_aggregate(module, tokens.numpy(), mask.numpy())
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    garbage = tokens.clone()
    garbage[0, 3:] = 1e6  # padding content cannot leak into the aggregate
    np.testing.assert_allclose(module(garbage, mask).detach().numpy(), expected, rtol=1e-10, atol=1e-12)


def reference_cross(image_tokens: np.ndarray, text_tokens: np.ndarray) -> np.ndarray:
    def leaky(v):
        return v if v >= 0 else 0.1 * v

    out = np.zeros((len(image_tokens), len(text_tokens)))
    for i, img in enumerate(image_tokens):
        for j, txt in enumerate(text_tokens):
            c = [[leaky(float(img[p] @ txt[q])) for q in range(len(txt))] for p in range(len(img))]
            text_side = sum(max(c[p][q] for p in range(len(img))) for q in range(len(txt))) / len(txt)
            image_side = sum(max(c[p][q] for q in range(len(txt))) for p in range(len(img))) / len(img)
            out[i, j] = text_side + image_side
    return out


@pytest.mark.parametrize("chunk_size", [1, 2, 32])
def test_cross_similarity_is_the_sum_of_both_directions_mean_of_max_of_leaky_cosines(chunk_size):
    images, texts = normalised(3, 4, 6, seed=1), normalised(5, 3, 6, seed=2)
    got = cross_similarity(images, texts, chunk_size=chunk_size).numpy()
    np.testing.assert_allclose(got, reference_cross(images.numpy(), texts.numpy()), rtol=1e-12, atol=1e-12)


def reference_hinge(s: np.ndarray, margin: float, max_violation: bool) -> float:
    n = len(s)
    total = 0.0
    for i in range(n):  # image i as query: its captions j != i are negatives
        costs = [max(0.0, margin + s[i, j] - s[i, i]) for j in range(n) if j != i]
        total += max(costs) if max_violation else sum(costs)
    for j in range(n):  # caption j as query: images i != j are negatives
        costs = [max(0.0, margin + s[i, j] - s[j, j]) for i in range(n) if i != j]
        total += max(costs) if max_violation else sum(costs)
    return total


@pytest.mark.parametrize("max_violation", [False, True])
def test_vse_hinge_matches_per_pair_reference(max_violation):
    g = torch.Generator().manual_seed(3)
    scores = torch.rand(5, 5, generator=g, dtype=torch.float64) * 0.6
    scores.fill_diagonal_(0.4)
    got = float(vse_hinge_loss(scores, 0.2, max_violation))
    assert got == pytest.approx(reference_hinge(scores.numpy(), 0.2, max_violation), rel=1e-12)
    assert got > 0


def test_vse_hinge_is_zero_when_every_positive_beats_every_negative_by_the_margin():
    scores = torch.full((4, 4), 0.1, dtype=torch.float64)
    scores.fill_diagonal_(0.31)
    assert float(vse_hinge_loss(scores, 0.2)) == 0.0 and float(vse_hinge_loss(scores, 0.2, True)) == 0.0


def micro_model():
    return create_model("micro", seed=0)


def test_finelip_slots_use_global_feature_and_only_tokens_before_eot():
    torch.manual_seed(0)
    model = micro_model()
    fw = build_framework(TrainConfig(framework="finelip", framework_settings={"slots": 2}), model).double()
    d = model.embed_dim
    tokens = normalised(2, 6, d, seed=4)
    mask = torch.tensor([[True, True, True, True, False, False], [True] * 6])  # EOT at 3, resp. 5
    text_features = normalised(2, d, seed=5)
    got = fw.text_slots(text_features, tokens, mask)
    assert got.shape == (2, 3, d)
    for b, eot in enumerate((3, 5)):
        alone = fw.text_aggregator(tokens[b:b + 1, :eot])  # the tokens before EOT, no mask needed
        expected = F.normalize(torch.cat([alone[0], text_features[b:b + 1]]), dim=-1)
        torch.testing.assert_close(got[b], expected, rtol=1e-12, atol=1e-12)
    changed = tokens.clone()
    changed[0, 3:] = 5.0  # EOT and padding of caption 0: not aggregated
    torch.testing.assert_close(fw.text_slots(text_features, changed, mask)[0], got[0], rtol=0, atol=0)

    patches, image_features = normalised(2, 16, d, seed=6), normalised(2, d, seed=7)
    image = fw.image_slots(image_features, patches)
    assert image.shape == (2, 3, d)
    torch.testing.assert_close(image[:, 0], image_features, rtol=0, atol=1e-15)


def test_finelip_default_slots_are_a_fifth_of_the_patches():
    model = micro_model()  # 32 px / 8 px patches = 16 patches -> int(3.2) = 3
    fw = build_framework(TrainConfig(framework="finelip"), model)
    assert fw.slots == 3
    assert fw.image_aggregator.weight[-1].out_features == 3 and fw.text_aggregator.weight[-1].out_features == 3


def test_finelip_eval_score_is_point_eight_global_plus_point_two_cross_by_hand():
    fw = build_framework(TrainConfig(framework="finelip"), micro_model())
    images = {"features": torch.tensor([[1.0, 0.0]]), "slots": torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])}
    texts = {"features": torch.tensor([[0.6, 0.8]]), "slots": torch.tensor([[[1.0, 0.0], [-1.0, 0.0]]])}
    # cosines patch x word: [[1, -1], [0, 0]] -> leaky [[1, -0.1], [0, 0]]
    # words' best patch: 1 and 0 -> mean 0.5; patches' best word: 1 and 0 -> mean 0.5; cross = 1.0
    # global cosine 0.6; score = 0.8 * 0.6 + 0.2 * 1.0 = 0.68
    assert float(fw.score(images, texts)) == pytest.approx(0.68, abs=1e-7)


# --------------------------------------------------------------------------------- Long-CLIP short
def reference_pca(x: np.ndarray, k: int) -> np.ndarray:
    mean = x.mean(axis=0)
    c = x - mean
    values, vectors = np.linalg.eigh(c.T @ c)
    top = vectors[:, np.argsort(values)[::-1][:k]]
    return c @ top @ top.T + mean


def reference_smoothed_ce(logits: np.ndarray, eps: float) -> float:
    n = len(logits)
    total = 0.0
    for i in range(n):
        m = logits[i].max()
        log_z = m + math.log(sum(math.exp(v - m) for v in logits[i]))
        for j in range(n):
            target = (1 - eps) * (i == j) + eps / n
            total -= target * (logits[i, j] - log_z)
    return total / n


def test_pca_reconstruction_matches_covariance_eigenvectors():
    x = normalised(8, 6, seed=8)
    np.testing.assert_allclose(pca_reconstruct(x, 3).numpy(), reference_pca(x.numpy(), 3), atol=1e-10)
    np.testing.assert_allclose(pca_reconstruct(x, 32).numpy(), x.numpy(), atol=1e-12)  # k >= rank: identity


def test_short_caption_term_matches_reference_with_label_smoothing():
    images, shorts = normalised(8, 6, seed=9), normalised(8, 6, seed=10)
    scale = 20.0
    reduced = reference_pca(images.numpy(), 3)
    logits = scale * reduced @ shorts.numpy().T
    expected = (reference_smoothed_ce(logits, 0.1) + reference_smoothed_ce(logits.T, 0.1)) / 2
    got = float(short_caption_loss(images, shorts, torch.tensor(scale, dtype=torch.float64), components=3))
    assert got == pytest.approx(expected, rel=1e-10)


# ------------------------------------------------------------------------------- plug-in protocol
def fake_outputs(b=6, d=32, patches=16, length=12, seed=11):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(3, length + 1, (b,), generator=g)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    return {
        "image_features": F.normalize(torch.randn(b, d, generator=g), dim=-1),
        "text_features": F.normalize(torch.randn(b, d, generator=g), dim=-1),
        "short_text_features": F.normalize(torch.randn(b, d, generator=g), dim=-1),
        "logit_scale": torch.tensor(30.0),
        "image_tokens": F.normalize(torch.randn(b, patches, d, generator=g), dim=-1),
        "text_tokens": F.normalize(torch.randn(b, length, d, generator=g), dim=-1) * mask[..., None],
        "text_mask": mask,
    }


VARIANTS = [
    ("longclip", {"token_weight": 0.5}),
    ("longclip", {"framework_settings": {"short_weight": 1.0, "pca_components": 3}}),
    ("lora", {"token_weight": 0.5, "label_smoothing": 0.1}),
    ("dora", {}),
    ("finelip", {}),
    ("finelip", {"token_weight": 0.5, "framework_settings": {"hinge": "max"}}),
]


@pytest.mark.parametrize(("name", "settings"), VARIANTS)
def test_hn_variant_replaces_only_the_global_term(name, settings):
    out = fake_outputs()
    out["image_tokens_raw"], out["text_tokens_raw"] = 2 * out["image_tokens"], 3 * out["text_tokens"]
    batch = Batch(pixels=torch.zeros(6, 3, 32, 32), tokens=torch.zeros(6, 12, dtype=torch.long),
                  positions=torch.arange(6), epoch=1)
    margin_source = F.normalize(torch.randn(6, 32, generator=torch.Generator().manual_seed(12)), dim=-1)
    terms = {}
    for gamma in (0.0, 0.5):
        torch.manual_seed(0)  # same module initialisation for both variants
        fw = build_framework(TrainConfig(framework=name, gamma=gamma, **settings), micro_model())
        terms[gamma] = fw.loss_terms(out, batch, margin_source)
    plain, hn = terms[0.0], terms[0.5]
    assert list(hn)[0] == "global"
    assert list(plain) == (list(hn)[1:] if name == "finelip" else list(hn))  # FineLIP: +HN adds the term
    assert ("token" in plain) == (settings.get("token_weight", 0) > 0)
    for key in plain:
        if key != "global":
            assert torch.equal(plain[key], hn[key]), key
    images, texts, scale = out["image_features"], out["text_features"], out["logit_scale"]
    smoothing = settings.get("label_smoothing", 0.0)
    if name != "finelip":
        assert torch.equal(plain["global"], contrastive_loss(images, texts, scale, label_smoothing=smoothing))
    assert torch.equal(hn["global"], contrastive_loss(images, texts, scale, 0.5, margin_source, smoothing))


def test_framework_terms_are_named_and_weighted():
    out = fake_outputs()
    out["image_tokens_raw"], out["text_tokens_raw"] = out["image_tokens"], out["text_tokens"]
    batch = Batch(torch.zeros(1), torch.zeros(1), torch.arange(6), epoch=1)
    fw = build_framework(TrainConfig(framework="finelip", framework_settings={"weight": 0.25}), micro_model())
    terms = fw.loss_terms(out, batch)
    assert list(terms) == ["finelip"]
    fw_full = build_framework(TrainConfig(framework="finelip"), micro_model())
    fw_full.load_state_dict(fw.state_dict())
    full = fw_full.loss_terms(out, batch)["finelip"].detach()
    assert float(full) > 0 and float(terms["finelip"].detach()) == pytest.approx(0.25 * float(full))
    ramped = fw_full.loss_terms(out, Batch(torch.zeros(1), torch.zeros(1), torch.arange(6), epoch_progress=0.25))
    assert float(ramped["finelip"].detach()) == pytest.approx(0.25 * float(full))  # a quarter into epoch 1
    assert list(Framework(TrainConfig()).loss_terms(out, batch)) == ["global"]


def test_new_modules_get_module_lr_and_the_model_its_framework_lr():
    model = micro_model()
    cfg = TrainConfig(framework="finelip", lr=1e-6, module_lr=2e-4, weight_decay=0.1)
    fw = build_framework(cfg, model)
    groups = fw.param_groups(model)
    module_params = {id(p) for p in fw.parameters()}
    for group in groups:
        in_modules = {id(p) in module_params for p in group["params"]}
        assert len(in_modules) == 1  # a group never mixes encoder and module parameters
        assert group["lr"] == (2e-4 if in_modules == {True} else 1e-6), group["name"]
    covered = sum(p.numel() for g in groups for p in g["params"])
    assert covered == sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in fw.parameters())
    lora = build_framework(TrainConfig(framework="lora", lr=3e-4, module_lr=1.0), model)
    assert {g["lr"] for g in lora.param_groups(model)} == {3e-4}  # adapters are the model's parameters


def test_each_frameworks_class_takes_its_registration_row():
    from hnclip.frameworks.registry import framework_entry, framework_names, get_framework_class

    for name in framework_names():
        framework, entry = get_framework_class(name), framework_entry(name)
        assert framework.name == name and framework.__module__ == entry.module, name
        assert tuple(framework.products) == entry.products, name
        assert framework.settings_class is entry.settings_cls, name
        assert framework.hn_plugin == entry.hn_legend, name
    assert framework_entry("dora").settings_cls is framework_entry("lora").settings_cls  # one lora section
