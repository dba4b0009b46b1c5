"""The HN objective and the FILIP token branch against float64 references written with plain loops.

The references below never call hnclip: they compute logits entry by entry, log-sum-exp with explicit
max subtraction, and gradients either in closed form (softmax - onehot, G held constant) or by central
finite differences. Inputs are small and seeded so every comparison is exact up to float64 rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from open_clip.loss import ClipLoss

from hnclip.losses import HNClipLoss, contrastive_loss, token_loss, token_similarity

GAMMAS = (0.0, 0.25, 0.5, 1.0)


# ----------------------------------------------------------------------------------------------------
# float64 references
# ----------------------------------------------------------------------------------------------------
def _dot(a, b) -> float:
    return sum(float(x) * float(y) for x, y in zip(a, b, strict=True))


def _logsumexp(values) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


def _margin_matrix(margin_texts) -> np.ndarray:
    n = len(margin_texts)
    g = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                g[i, j] = _dot(margin_texts[i], margin_texts[j])
    return g


def reference_hn(images, texts, scale, gamma, margin_texts=None):
    """Loss and closed-form gradients (images, texts, scale) of the HN objective with G held constant."""
    images = np.asarray(images, dtype=np.float64)
    texts = np.asarray(texts, dtype=np.float64)
    g = _margin_matrix(texts if margin_texts is None else np.asarray(margin_texts, dtype=np.float64))
    n = len(images)
    cos_i2t = np.array([[_dot(images[i], texts[j]) for j in range(n)] for i in range(n)])
    cos_t2i = np.array([[_dot(texts[i], images[j]) for j in range(n)] for i in range(n)])
    loss = 0.0
    grads = {}
    for name, cos in (("i2t", cos_i2t), ("t2i", cos_t2i)):
        grad_logits = np.zeros((n, n))
        for i in range(n):
            row = [scale * (cos[i, j] + gamma * g[i, j]) for j in range(n)]
            lse = _logsumexp(row)
            loss += (lse - row[i]) / (2 * n)
            for j in range(n):
                grad_logits[i, j] = (math.exp(row[j] - lse) - (1.0 if i == j else 0.0)) / (2 * n)
        grads[name] = grad_logits
    d = images.shape[1]
    grad_images = np.zeros_like(images)
    grad_texts = np.zeros_like(texts)
    grad_scale = 0.0
    for i in range(n):
        for j in range(n):
            for k in range(d):
                # logits_i2t[i, j] = s * (I_i . T_j + gamma G_ij); logits_t2i[i, j] = s * (T_i . I_j + gamma G_ij)
                grad_images[i, k] += grads["i2t"][i, j] * scale * texts[j, k]
                grad_texts[j, k] += grads["i2t"][i, j] * scale * images[i, k]
                grad_texts[i, k] += grads["t2i"][i, j] * scale * images[j, k]
                grad_images[j, k] += grads["t2i"][i, j] * scale * texts[i, k]
            grad_scale += grads["i2t"][i, j] * (cos_i2t[i, j] + gamma * g[i, j])
            grad_scale += grads["t2i"][i, j] * (cos_t2i[i, j] + gamma * g[i, j])
    return loss, grad_images, grad_texts, grad_scale


def reference_hn_loss(images, texts, scale, gamma, margin_texts=None) -> float:
    return reference_hn(images, texts, scale, gamma, margin_texts)[0]


def finite_difference(fn, array: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    grad = np.zeros_like(array)
    for index in np.ndindex(array.shape):
        plus, minus = array.copy(), array.copy()
        plus[index] += eps
        minus[index] -= eps
        grad[index] = (fn(plus) - fn(minus)) / (2 * eps)
    return grad


def reference_token_similarity(image_tokens, text_tokens, text_mask):
    """FILIP similarities pair by pair: the definition, one image-caption pair at a time."""
    image_tokens = np.asarray(image_tokens, dtype=np.float64)
    text_tokens = np.asarray(text_tokens, dtype=np.float64)
    n_images, n_patches = image_tokens.shape[:2]
    n_texts = text_tokens.shape[0]
    sim_i2t = np.zeros((n_images, n_texts))
    sim_t2i = np.zeros((n_texts, n_images))
    for i in range(n_images):
        for j in range(n_texts):
            valid = [k for k in range(text_tokens.shape[1]) if text_mask[j][k]]
            cos = [[_dot(image_tokens[i, p], text_tokens[j, k]) for k in valid] for p in range(n_patches)]
            sim_i2t[i, j] = sum(max(row) for row in cos) / n_patches
            sim_t2i[j, i] = sum(max(cos[p][c] for p in range(n_patches)) for c in range(len(valid))) / len(valid)
    return sim_i2t, sim_t2i


def reference_token_loss(image_tokens, text_tokens, text_mask, scale) -> float:
    sim_i2t, sim_t2i = reference_token_similarity(image_tokens, text_tokens, text_mask)
    n = len(sim_i2t)
    loss = 0.0
    for sim in (sim_i2t, sim_t2i):
        for i in range(n):
            row = [scale * v for v in sim[i]]
            loss += (_logsumexp(row) - row[i]) / (2 * n)
    return loss


# ----------------------------------------------------------------------------------------------------
# inputs
# ----------------------------------------------------------------------------------------------------
def _normalised(rng: np.random.Generator, *shape) -> np.ndarray:
    x = rng.standard_normal(shape)
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def dense_caption_batch(seed: int, n: int = 6, dim: int = 5):
    """Images, and captions that share a common direction (near-duplicates, as in DOCCI), so G is large."""
    rng = np.random.default_rng(seed)
    images = _normalised(rng, n, dim)
    shared = rng.standard_normal(dim)
    texts = shared + 0.6 * rng.standard_normal((n, dim))
    texts /= np.linalg.norm(texts, axis=-1, keepdims=True)
    return images, texts


def token_batch(seed: int, n: int = 5, patches: int = 4, length: int = 6, dim: int = 4):
    """Token features with padded captions whose pad slots hold large vectors aligned with the patches.

    If padding leaked into either max, the pad slots would win it, so a masking bug cannot hide.
    """
    rng = np.random.default_rng(seed)
    image_tokens = _normalised(rng, n, patches, dim)
    text_tokens = _normalised(rng, n, length, dim)
    lengths = [length, 1, 3, length - 1, 2][:n] + [length] * max(0, n - 5)
    mask = np.zeros((n, length), dtype=bool)
    for j, valid in enumerate(lengths):
        mask[j, :valid] = True
        text_tokens[j, valid:] = 10.0 * image_tokens[j % n, 0]
    return image_tokens, text_tokens, mask


def _t(array, dtype=torch.float64, grad=False) -> torch.Tensor:
    return torch.tensor(array, dtype=dtype, requires_grad=grad)


# ----------------------------------------------------------------------------------------------------
# the contrastive (global) term
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("gamma", GAMMAS)
def test_hn_loss_and_gradients_match_float64_reference(gamma):
    images, texts = dense_caption_batch(seed=1)
    scale = 14.285714  # CLIP's initial 1 / 0.07
    ref_loss, ref_gi, ref_gt, ref_gs = reference_hn(images, texts, scale, gamma)

    image_features, text_features = _t(images, grad=True), _t(texts, grad=True)
    logit_scale = torch.tensor(scale, dtype=torch.float64, requires_grad=True)
    loss = contrastive_loss(image_features, text_features, logit_scale, gamma=gamma)
    loss.backward()

    assert loss.item() == pytest.approx(ref_loss, rel=1e-12, abs=1e-12)
    np.testing.assert_allclose(image_features.grad.numpy(), ref_gi, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(text_features.grad.numpy(), ref_gt, rtol=1e-10, atol=1e-12)
    assert logit_scale.grad.item() == pytest.approx(ref_gs, rel=1e-10, abs=1e-12)


@pytest.mark.parametrize("gamma", GAMMAS)
def test_hn_loss_float32_close_to_float64_reference(gamma):
    images, texts = dense_caption_batch(seed=2, n=8, dim=7)
    ref_loss, ref_gi, ref_gt, _ = reference_hn(images, texts, 100.0, gamma)
    image_features = _t(images, torch.float32, grad=True)
    text_features = _t(texts, torch.float32, grad=True)
    loss = contrastive_loss(image_features, text_features, torch.tensor(100.0), gamma=gamma)
    loss.backward()
    assert loss.item() == pytest.approx(ref_loss, rel=1e-5, abs=1e-5)
    np.testing.assert_allclose(image_features.grad.numpy(), ref_gi, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(text_features.grad.numpy(), ref_gt, rtol=1e-4, atol=1e-5)


def test_reference_closed_form_gradients_match_finite_differences():
    """Guards the reference itself: its softmax - onehot gradients equal central differences (G fixed)."""
    images, texts = dense_caption_batch(seed=3, n=4, dim=3)
    margin = texts.copy()
    _, ref_gi, ref_gt, ref_gs = reference_hn(images, texts, 20.0, 0.5, margin)
    np.testing.assert_allclose(
        finite_difference(lambda x: reference_hn_loss(x, texts, 20.0, 0.5, margin), images), ref_gi, atol=1e-7)
    np.testing.assert_allclose(
        finite_difference(lambda x: reference_hn_loss(images, x, 20.0, 0.5, margin), texts), ref_gt, atol=1e-7)
    fd_scale = (reference_hn_loss(images, texts, 20.0 + 1e-6, 0.5, margin)
                - reference_hn_loss(images, texts, 20.0 - 1e-6, 0.5, margin)) / 2e-6
    assert fd_scale == pytest.approx(ref_gs, abs=1e-7)


def reference_smoothed_hn_loss(images, texts, scale, gamma, smoothing) -> float:
    """torch's label smoothing written out: target (1 - eps) on the positive plus eps / n on every column."""
    g = _margin_matrix(texts)
    n = len(images)
    loss = 0.0
    for first, second in ((images, texts), (texts, images)):
        for i in range(n):
            row = [scale * (_dot(first[i], second[j]) + gamma * g[i, j]) for j in range(n)]
            lse = _logsumexp(row)
            for j in range(n):
                target = (1.0 - smoothing) * (i == j) + smoothing / n
                loss += target * (lse - row[j]) / (2 * n)
    return loss


@pytest.mark.parametrize("gamma", [0.0, 0.5])
def test_label_smoothing_composes_with_the_margin_as_the_float64_reference(gamma):
    """Long-CLIP's smoothed global term: the HN margin acts on the logits, the smoothing on the targets."""
    images, texts = dense_caption_batch(seed=6, n=7, dim=5)
    expected = reference_smoothed_hn_loss(images, texts, 30.0, gamma, 0.1)
    scale = torch.tensor(30.0, dtype=torch.float64)
    got = contrastive_loss(_t(images), _t(texts), scale, gamma, label_smoothing=0.1)
    assert got.item() == pytest.approx(expected, rel=1e-12)
    module = HNClipLoss(gamma=gamma, label_smoothing=0.1).global_loss(_t(images), _t(texts), scale)
    assert torch.equal(module, got)  # one process: the module is the function
    assert got.item() != pytest.approx(contrastive_loss(_t(images), _t(texts), scale, gamma).item(), rel=1e-3)


@pytest.mark.parametrize("seed", range(5))
def test_gamma_zero_is_bitwise_open_clip_clip_loss(seed):
    torch.manual_seed(seed)
    batch, dim = 9 + 7 * seed, 16 + 29 * seed
    logit_scale = torch.tensor(1.0 + 99.0 * torch.rand(()).item())
    images = F.normalize(torch.randn(batch, dim), dim=-1)
    texts = F.normalize(torch.randn(batch, dim), dim=-1)

    ours_i, ours_t = images.clone().requires_grad_(), texts.clone().requires_grad_()
    ours = contrastive_loss(ours_i, ours_t, logit_scale, gamma=0.0)
    ours.backward()
    module_i, module_t = images.clone().requires_grad_(), texts.clone().requires_grad_()
    module = HNClipLoss(gamma=0.0)(module_i, module_t, logit_scale)
    module.backward()
    theirs_i, theirs_t = images.clone().requires_grad_(), texts.clone().requires_grad_()
    theirs = ClipLoss()(theirs_i, theirs_t, logit_scale)
    theirs.backward()

    for loss, gi, gt in ((ours, ours_i.grad, ours_t.grad), (module, module_i.grad, module_t.grad)):
        assert torch.equal(loss, theirs)
        assert torch.equal(gi, theirs_i.grad)
        assert torch.equal(gt, theirs_t.grad)


def test_margin_matrix_carries_no_gradient():
    """With gamma > 0 the text gradient is the G-constant one, not the one through G's dependence on T."""
    images, texts = dense_caption_batch(seed=4, n=5, dim=4)
    gamma, scale = 1.0, 30.0
    _, _, ref_gt_detached, _ = reference_hn(images, texts, scale, gamma)
    # Differentiating through G (G recomputed from the perturbed captions) gives a different gradient;
    # it must differ clearly, or this test could not tell the two apart.
    grad_through_g = finite_difference(lambda x: reference_hn_loss(images, x, scale, gamma), texts)
    assert np.abs(grad_through_g - ref_gt_detached).max() > 1e-2

    text_features = _t(texts, grad=True)
    contrastive_loss(_t(images), text_features, torch.tensor(scale, dtype=torch.float64), gamma=gamma).backward()
    np.testing.assert_allclose(text_features.grad.numpy(), ref_gt_detached, rtol=1e-10, atol=1e-12)


def test_margin_features_receive_no_gradient():
    images, texts = dense_caption_batch(seed=5)
    margin = _t(dense_caption_batch(seed=6)[1], grad=True)
    image_features = _t(images, grad=True)
    contrastive_loss(image_features, _t(texts, grad=True), torch.tensor(50.0, dtype=torch.float64), 0.5,
                     margin_text_features=margin).backward()
    assert image_features.grad is not None
    assert margin.grad is None


@pytest.mark.parametrize("gamma", (0.25, 1.0))
def test_frozen_margin_features_set_g(gamma):
    images, texts = dense_caption_batch(seed=7)
    frozen = dense_caption_batch(seed=8)[1]
    scale = 40.0
    ref_loss, ref_gi, ref_gt, _ = reference_hn(images, texts, scale, gamma, margin_texts=frozen)
    own_margin_loss = reference_hn_loss(images, texts, scale, gamma)
    assert abs(ref_loss - own_margin_loss) > 1e-3  # the frozen G must matter for this to test anything

    image_features, text_features = _t(images, grad=True), _t(texts, grad=True)
    loss = contrastive_loss(image_features, text_features, torch.tensor(scale, dtype=torch.float64), gamma,
                            margin_text_features=_t(frozen))
    loss.backward()
    assert loss.item() == pytest.approx(ref_loss, rel=1e-12)
    np.testing.assert_allclose(image_features.grad.numpy(), ref_gi, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(text_features.grad.numpy(), ref_gt, rtol=1e-10, atol=1e-12)


def test_frozen_margin_with_wrong_row_count_is_rejected():
    images, texts = dense_caption_batch(seed=9)
    with pytest.raises(ValueError, match="margin_text_features has 5 rows but the batch has 6"):
        contrastive_loss(_t(images), _t(texts), 10.0, 0.5, margin_text_features=_t(texts[:5]))


def _ratio_batch() -> tuple[np.ndarray, np.ndarray]:
    """Row 0 has two negatives (1, 2) with equal cosine to the anchor in both directions, captions apart by dG.

    image 0 . caption 1 = image 0 . caption 2 = 0.3 and caption 0 . image 1 = caption 0 . image 2 = 0;
    G[0, 1] - G[0, 2] = 0.6 * (0.5 - 1/3) = 0.1.
    """
    texts = np.array([
        [0.8, 0.6, 0.0, 0.0],
        [0.3, 0.5, math.sqrt(1 - 0.3**2 - 0.5**2), 0.0],
        [0.3, 1 / 3, math.sqrt(1 - 0.3**2 - (1 / 3) ** 2), 0.0],
    ])
    images = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 1.0, 0.0]])
    return images, texts


@pytest.mark.parametrize(("gamma", "expected"), [(0.5, math.exp(5.0)), (0.0, 1.0)])
def test_gradient_ratio_of_negatives_is_exp_s_gamma_dg(monkeypatch, gamma, expected):
    """The paper's claim: dG = 0.1, s = 100, gamma = 0.5 -> e^5 ~ 148.4 times the gradient (1 at gamma = 0)."""
    images, texts = _ratio_batch()
    assert _dot(images[0], texts[1]) == pytest.approx(_dot(images[0], texts[2]), abs=1e-15)
    assert _dot(texts[0], texts[1]) - _dot(texts[0], texts[2]) == pytest.approx(0.1, abs=1e-15)

    captured = []
    real_cross_entropy = F.cross_entropy

    def spy(logits, target, *args, **kwargs):
        logits.retain_grad()  # the softmax gradient lands on the logits that contrastive_loss built
        captured.append(logits)
        return real_cross_entropy(logits, target, *args, **kwargs)

    monkeypatch.setattr(F, "cross_entropy", spy)
    contrastive_loss(_t(images, grad=True), _t(texts, grad=True), torch.tensor(100.0, dtype=torch.float64),
                     gamma=gamma).backward()
    assert len(captured) == 2  # both directions, each with its anchor-0 row built to show the ratio
    for logits in captured:
        ratio = (logits.grad[0, 1] / logits.grad[0, 2]).item()
        assert ratio == pytest.approx(expected, rel=1e-9)
    if gamma:
        assert expected == pytest.approx(148.413, abs=1e-3)


# ----------------------------------------------------------------------------------------------------
# the token (FILIP) branch
# ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("chunk_size", (1, 2, 4, 5, 32))
def test_token_similarity_matches_pairwise_loop(chunk_size):
    image_tokens, text_tokens, mask = token_batch(seed=10)
    ref_i2t, ref_t2i = reference_token_similarity(image_tokens, text_tokens, mask)
    sim_i2t, sim_t2i = token_similarity(_t(image_tokens), _t(text_tokens), torch.tensor(mask), chunk_size)
    assert sim_i2t.shape == (5, 5) and sim_t2i.shape == (5, 5)
    np.testing.assert_allclose(sim_i2t.numpy(), ref_i2t, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sim_t2i.numpy(), ref_t2i, rtol=1e-12, atol=1e-12)


def test_token_similarity_rectangular_and_integer_mask():
    """More captions than images, and a 0/1 long mask as tokenizers return it."""
    image_tokens = token_batch(seed=11, n=3)[0]
    _, text_tokens, mask = token_batch(seed=12, n=7)
    ref_i2t, ref_t2i = reference_token_similarity(image_tokens, text_tokens, mask)
    sim_i2t, sim_t2i = token_similarity(_t(image_tokens), _t(text_tokens), torch.tensor(mask).long(), 3)
    assert sim_i2t.shape == (3, 7) and sim_t2i.shape == (7, 3)
    np.testing.assert_allclose(sim_i2t.numpy(), ref_i2t, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(sim_t2i.numpy(), ref_t2i, rtol=1e-12, atol=1e-12)


def test_token_similarity_ignores_padding_values():
    image_tokens, text_tokens, mask = token_batch(seed=13)
    scrambled = text_tokens.copy()
    scrambled[~mask] = np.random.default_rng(0).standard_normal(scrambled[~mask].shape) * 100
    first = token_similarity(_t(image_tokens), _t(text_tokens), torch.tensor(mask), 2)
    second = token_similarity(_t(image_tokens), _t(scrambled), torch.tensor(mask), 2)
    for a, b in zip(first, second, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("chunk_size", (2, 32))
def test_token_loss_and_gradients_match_reference(chunk_size):
    image_tokens, text_tokens, mask = token_batch(seed=14, n=3, patches=3, length=4, dim=3)
    scale = 10.0
    image_t, text_t = _t(image_tokens, grad=True), _t(text_tokens, grad=True)
    loss = token_loss(image_t, text_t, torch.tensor(mask), torch.tensor(scale, dtype=torch.float64), chunk_size)
    loss.backward()

    assert loss.item() == pytest.approx(reference_token_loss(image_tokens, text_tokens, mask, scale), rel=1e-12)
    fd_images = finite_difference(lambda x: reference_token_loss(x, text_tokens, mask, scale), image_tokens)
    fd_texts = finite_difference(lambda x: reference_token_loss(image_tokens, x, mask, scale), text_tokens)
    np.testing.assert_allclose(image_t.grad.numpy(), fd_images, atol=1e-7)
    np.testing.assert_allclose(text_t.grad.numpy(), fd_texts, atol=1e-7)
    assert torch.count_nonzero(text_t.grad[~torch.tensor(mask)]) == 0  # padding gets exactly no gradient


def test_token_similarity_runs_under_bfloat16_autocast():
    """Regression: the mask fill value once overflowed fp16/bf16 cosines under autocast."""
    image_tokens, text_tokens, mask = token_batch(seed=15)
    ref_i2t, ref_t2i = reference_token_similarity(image_tokens, text_tokens, mask)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        sim_i2t, sim_t2i = token_similarity(_t(image_tokens, torch.float32), _t(text_tokens, torch.float32),
                                            torch.tensor(mask), 2)
    np.testing.assert_allclose(sim_i2t.float().numpy(), ref_i2t, atol=2e-2)
    np.testing.assert_allclose(sim_t2i.float().numpy(), ref_t2i, atol=2e-2)


# ----------------------------------------------------------------------------------------------------
# the nn.Module
# ----------------------------------------------------------------------------------------------------
def test_hnclip_loss_output_dict_keys_and_values():
    images, texts = dense_caption_batch(seed=16, n=5, dim=4)
    image_tokens, text_tokens, mask = token_batch(seed=17)
    scale, gamma, weight = 25.0, 0.5, 0.3
    inputs = dict(image_features=_t(images), text_features=_t(texts),
                  logit_scale=torch.tensor(scale, dtype=torch.float64),
                  image_tokens=_t(image_tokens), text_tokens=_t(text_tokens), text_mask=torch.tensor(mask))
    ref_contrastive = reference_hn_loss(images, texts, scale, gamma)
    ref_token = reference_token_loss(image_tokens, text_tokens, mask, scale)

    global_only = HNClipLoss(gamma=gamma)(**inputs, output_dict=True)
    assert set(global_only) == {"contrastive_loss"}
    assert global_only["contrastive_loss"].item() == pytest.approx(ref_contrastive, rel=1e-12)

    loss_fn = HNClipLoss(gamma=gamma, token_weight=weight, token_chunk_size=2)
    both = loss_fn(**inputs, output_dict=True)
    assert set(both) == {"contrastive_loss", "token_loss"}
    assert both["contrastive_loss"].item() == pytest.approx(ref_contrastive, rel=1e-12)
    assert both["token_loss"].item() == pytest.approx(weight * ref_token, rel=1e-12)
    assert loss_fn(**inputs).item() == pytest.approx(ref_contrastive + weight * ref_token, rel=1e-12)


def test_hnclip_loss_frozen_margin_matches_reference():
    images, texts = dense_caption_batch(seed=18)
    frozen = dense_caption_batch(seed=19)[1]
    loss = HNClipLoss(gamma=1.0)(_t(images), _t(texts), torch.tensor(30.0, dtype=torch.float64),
                                 margin_text_features=_t(frozen))
    assert loss.item() == pytest.approx(reference_hn_loss(images, texts, 30.0, 1.0, frozen), rel=1e-12)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"gamma": -0.1}, "gamma must be >= 0, got -0.1"),
    ({"token_weight": -1.0}, "token_weight must be >= 0, got -1.0"),
])
def test_hnclip_loss_rejects_negative_settings(kwargs, message):
    with pytest.raises(ValueError, match=message):
        HNClipLoss(**kwargs)


@pytest.mark.parametrize("missing", ("image_tokens", "text_tokens", "text_mask"))
def test_hnclip_loss_token_branch_requires_tokens(missing):
    images, texts = dense_caption_batch(seed=20, n=5, dim=4)
    image_tokens, text_tokens, mask = token_batch(seed=21)
    tokens = dict(image_tokens=_t(image_tokens), text_tokens=_t(text_tokens), text_mask=torch.tensor(mask))
    tokens[missing] = None
    with pytest.raises(ValueError, match="token_weight > 0 needs image_tokens, text_tokens and text_mask"):
        HNClipLoss(token_weight=0.5)(_t(images), _t(texts), 10.0, **tokens)
