"""Each framework's whole objective against a transcription of its authors' public code, on the same tensors.

The references below are float64 numpy transcriptions of the formulas in the public repositories (the
commits the fetch tool brought, read for this test), never calls into hnclip:

- FineLIP (ffa-ti-ma/FineLIP 9389127): model/model_finelip.py ``CLIP.forward`` (FineLIP mode: ``loss_1 =
  0.0``, the hinge ``inference_lvl3`` times ``warmup_alpha``), model/cross_net.py ``TokenAggregation`` and
  ``CrossSparseAggrNet_v2.forward_dual_aggr`` on the raw projected tokens, model/xttn.py
  ``mask_xattn_one_text``, train/loss.py ``ContrastiveLoss``, train/train.py ``warmup_alpha``.
- StructXLIP (intelligolabs/StructXLIP bd63274): structxlip/train.py ``run_training`` (``total_loss``),
  structxlip/losses.py ``clip_loss``, ``cosine_anneal_warm_decay``, ``compute_structure_centric_loss``,
  ``compute_rgb_structure_consistency_loss``, ``compute_local_structure_centric_loss`` (from the chunk
  embeddings on).
- GOAL (PerceptualAI-Lab/GOAL 2db3d4a): goal_loss_finetuning.py ``train`` (``loss = loss_org + 0.5 *
  loss_seg + loss_patch + loss_text``, ``clip_loss``, the MSE of the diagonal cosines to 1), from the
  pooled box and span features on.
- Long-CLIP (beichenzbc/Long-CLIP 3966af9): model/model_longclip.py ``CLIP.forward`` (``loss_itcl`` with
  ``label_smoothing=0.1``; ``PCA`` and ``loss_itcs`` for the short-caption option) on one process.

The HN-CLIP margin (the "+HN" variants) is checked against the paper's formula written out here.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from hnclip.config.train import TrainConfig
from hnclip.frameworks import build_framework, framework_names
from hnclip.frameworks.base import Batch
from hnclip.models import create_model

EPS = 1e-8  # the references' F.normalize(x + eps)


def micro_model():
    return create_model("micro", seed=0)


def as64(t: torch.Tensor) -> np.ndarray:
    return t.detach().double().numpy()


def normalize(x: np.ndarray, eps: float = 0.0) -> np.ndarray:
    x = x + eps
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def log_softmax(row: np.ndarray) -> np.ndarray:
    top = row.max()
    return row - (top + math.log(np.exp(row - top).sum()))


def cross_entropy(logits: np.ndarray, smoothing: float = 0.0) -> float:
    """torch's F.cross_entropy(logits, arange(n), label_smoothing=smoothing), mean over rows."""
    n = logits.shape[1]
    total = 0.0
    for i, row in enumerate(logits):
        logp = log_softmax(row)
        target = np.full(n, smoothing / n)
        target[i] += 1.0 - smoothing
        total -= float(target @ logp)
    return total / len(logits)


def clip_loss(similarity: np.ndarray, smoothing: float = 0.0) -> float:
    """Long-CLIP / GOAL / StructXLIP: (CE(sim) + CE(sim.T)) / 2 with targets arange."""
    return (cross_entropy(similarity, smoothing) + cross_entropy(similarity.T, smoothing)) / 2


def hn_global(images, texts, scale, gamma, margin_texts, smoothing=0.0) -> float:
    """The paper's HN term: logits s * (cos + gamma * G), G the caption cosine with a zero diagonal."""
    g = margin_texts @ margin_texts.T
    np.fill_diagonal(g, 0.0)
    return (cross_entropy(scale * (images @ texts.T + gamma * g), smoothing)
            + cross_entropy(scale * (texts @ images.T + gamma * g), smoothing)) / 2


def outputs(b=6, d=32, patches=16, length=12, crops=2, chunks=3, seed=11):
    """Every output key any framework's loss reads: global, raw and normalised tokens, GOAL's, StructXLIP's."""
    g = torch.Generator().manual_seed(seed)

    def unit(*shape):
        return F.normalize(torch.randn(*shape, generator=g), dim=-1)

    eot = torch.randint(3, length, (b,), generator=g)
    mask = torch.arange(length)[None, :] <= eot[:, None]
    image_raw = 3 * torch.randn(b, 1 + patches, d, generator=g)  # CLS first, as encode_image_full gives
    text_raw = 3 * torch.randn(b, length, d, generator=g) * mask[..., None]
    out = {
        "logit_scale": torch.tensor(30.0),
        "image_features": F.normalize(image_raw[:, 0], dim=-1),
        "text_features": F.normalize(text_raw[torch.arange(b), eot], dim=-1),
        "image_tokens_raw": image_raw[:, 1:], "text_tokens_raw": text_raw,
        "image_tokens": F.normalize(image_raw[:, 1:], dim=-1), "text_tokens": F.normalize(text_raw, dim=-1),
        "text_mask": mask, "short_text_features": unit(b, d),
        # GOAL
        "crop_features": unit(b, d), "sentence_features": unit(b, d), "box_features": torch.randn(b, d, generator=g),
        "span_features": torch.randn(b, d, generator=g), "box_valid": torch.ones(b, dtype=torch.bool),
        "span_valid": torch.ones(b, dtype=torch.bool),
        # StructXLIP
        "edge_features": unit(b, d), "filtered_features": unit(b, d), "edge_crop_features": unit(b, crops, d),
        "edge_valid": torch.rand(b, crops, generator=g) > 0.3, "chunk_features": unit(b, chunks, d),
        "chunk_valid": torch.rand(b, chunks, generator=g) > 0.3,
    }
    out["edge_valid"][0] = False  # a caption without own crops: left out of the local term
    out["chunk_valid"][1] = False  # one without chunks
    return out, image_raw, text_raw, eot


def batch_of(b=6, epoch=0, epoch_progress=0.0) -> Batch:
    return Batch(torch.zeros(b, 3, 32, 32), torch.zeros(b, 12, dtype=torch.long), torch.arange(b), epoch=epoch,
                 epoch_progress=epoch_progress)


def total(terms: dict) -> float:
    return float(sum(float(v.detach()) for v in terms.values()))


# ------------------------------------------------------------------------------------------- FineLIP
def finelip_token_aggregation(x: np.ndarray, module) -> np.ndarray:
    """cross_net.py TokenAggregation.forward for one sequence [N, C]: softmax over N of scale * MLP(x)^T, times x."""
    ln, fc1, _, fc2 = module.weight
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    h = (x - mean) / np.sqrt(var + ln.eps) * as64(ln.weight) + as64(ln.bias)
    h = h @ as64(fc1.weight).T + as64(fc1.bias)
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))  # nn.GELU()
    weight = (h @ as64(fc2.weight).T + as64(fc2.bias)).T * float(module.scale.detach())  # [K, N]
    weight = np.exp(weight - weight.max(axis=1, keepdims=True))
    weight /= weight.sum(axis=1, keepdims=True)
    return weight @ x


def finelip_mask_xattn_one_text(img_embs: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """xttn.py mask_xattn_one_text(img_embs [B_v, L_v, C], cap_i_expand = cap [L_t, C] repeated) -> [B_v]."""
    sims = []
    for img in img_embs:
        cap2img = cap @ img.T  # (L_t, L_v)
        cap2img = np.where(cap2img >= 0, cap2img, 0.1 * cap2img)  # leaky_relu(0.1)
        row_sim_mean = cap2img.max(axis=1).mean()
        column_sim_mean = cap2img.max(axis=0).mean()
        sims.append(row_sim_mean + column_sim_mean)
    return np.array(sims)


def finelip_forward_dual_aggr(img_embs, cap_embs, cap_lens, framework) -> np.ndarray:
    """cross_net.py CrossSparseAggrNet_v2.forward_dual_aggr -> improved_sims [B_v, B_t]."""
    img_cls_emb = img_embs[:, 0:1, :]  # 1 + 16 tokens: not a square count, so has_cls_token
    aggr_tokens = np.stack([finelip_token_aggregation(x, framework.image_aggregator) for x in img_embs[:, 1:]])
    columns = []
    for i in range(len(cap_lens)):
        n_word = cap_lens[i] - 1
        cap_select = finelip_token_aggregation(cap_embs[i, :n_word], framework.text_aggregator)
        cap_select = np.concatenate([cap_select, cap_embs[i, n_word:n_word + 1]])
        select_tokens = normalize(np.concatenate([img_cls_emb, aggr_tokens], axis=1))
        columns.append(finelip_mask_xattn_one_text(select_tokens, normalize(cap_select)))
    return np.stack(columns, axis=1)


def finelip_contrastive_loss(scores: np.ndarray, margin=0.2, max_violation=False) -> float:
    """train/loss.py ContrastiveLoss.forward (img_ids all distinct: the mask is the diagonal)."""
    diagonal = np.diag(scores)
    cost_s = np.clip(margin + scores - diagonal[:, None], 0, None)
    cost_im = np.clip(margin + scores - diagonal[None, :], 0, None)
    np.fill_diagonal(cost_s, 0)
    np.fill_diagonal(cost_im, 0)
    if max_violation:
        return float(cost_s.max(axis=1).sum() + cost_im.max(axis=0).sum())
    return float(cost_s.sum() + cost_im.sum())


def finelip_loss(image_raw, text_raw, eot, framework, warmup_alpha, margin_matrix=None) -> float:
    """model_finelip.py CLIP.forward in FineLIP mode: loss_1 = 0, loss_3 = hinge(improved_sims) * warmup_alpha."""
    lengths = (eot + 1).tolist()  # the count of non-zero token ids: SOT ... EOT
    sims = finelip_forward_dual_aggr(as64(image_raw), as64(text_raw), lengths, framework)
    if margin_matrix is not None:
        sims = sims + margin_matrix
    return finelip_contrastive_loss(sims) * warmup_alpha


@pytest.mark.parametrize(("epoch", "micro_index", "per_epoch"), [(0, 0, 8), (0, 3, 8), (1, 0, 8), (4, 5, 8)])
def test_finelip_trains_its_ramped_hinge_on_raw_tokens_and_nothing_else(epoch, micro_index, per_epoch):
    out, image_raw, text_raw, eot = outputs()
    torch.manual_seed(0)
    framework = build_framework(TrainConfig(framework="finelip", framework_settings={"slots": 3}), micro_model())
    terms = framework.loss_terms(out, batch_of(epoch=epoch, epoch_progress=micro_index / per_epoch))
    warmup_alpha = float(micro_index) / per_epoch if epoch == 0 else 1.0  # train.py, embedding_warmup_epochs 0
    assert list(terms) == ["finelip"]  # no global InfoNCE: FineLIP mode sets loss_1 = 0.0
    expected = finelip_loss(image_raw, text_raw, eot, framework, warmup_alpha)
    assert total(terms) == pytest.approx(expected, rel=2e-5, abs=1e-6)
    if warmup_alpha == 1.0:  # the aggregators read raw tokens: normalised ones give another hinge
        normalised = finelip_loss(F.normalize(image_raw, dim=-1), F.normalize(text_raw, dim=-1), eot, framework, 1.0)
        assert abs(normalised - expected) > 1e-3 * expected


def test_finelip_hn_adds_the_hn_global_term_beside_the_unchanged_hinge():
    out, image_raw, text_raw, eot = outputs()
    margin_texts = F.normalize(torch.randn(6, 32, generator=torch.Generator().manual_seed(5)), dim=-1)
    frameworks = {}
    for gamma in (0.0, 0.5):
        torch.manual_seed(0)
        frameworks[gamma] = build_framework(TrainConfig(framework="finelip", gamma=gamma, label_smoothing=0.1,
                                                        framework_settings={"slots": 3}), micro_model())
    batch = batch_of(epoch=0, epoch_progress=0.5)
    plain, hn = (frameworks[g].loss_terms(out, batch, margin_texts) for g in (0.0, 0.5))
    assert list(plain) == ["finelip"] and list(hn) == ["global", "finelip"]
    assert torch.equal(plain["finelip"], hn["finelip"])  # the hinge, ramp included, is untouched
    expected = hn_global(as64(out["image_features"]), as64(out["text_features"]), 30.0, 0.5, as64(margin_texts), 0.1)
    assert float(hn["global"]) == pytest.approx(expected, rel=1e-5)
    assert "adds the HN global term" in frameworks[0.5].hn_meaning


def test_finelip_hinge_reading_puts_the_margin_inside_the_hinge_and_trains_no_global_term():
    out, image_raw, text_raw, eot = outputs()
    torch.manual_seed(0)
    framework = build_framework(TrainConfig(framework="finelip", gamma=0.5, framework_settings={"slots": 3,
                                                                                                 "hn": "hinge"}),
                                micro_model())
    terms = framework.loss_terms(out, batch_of(epoch=2))
    assert list(terms) == ["finelip"]
    texts = as64(out["text_features"])
    g = texts @ texts.T
    np.fill_diagonal(g, 0.0)
    expected = finelip_loss(image_raw, text_raw, eot, framework, 1.0, margin_matrix=0.5 * g)
    assert total(terms) == pytest.approx(expected, rel=2e-5)
    assert expected > finelip_loss(image_raw, text_raw, eot, framework, 1.0)  # boosted negatives cost more
    assert "hinge" in framework.hn_meaning


@pytest.mark.parametrize(("gamma", "hn", "token_weight", "trained"), [
    (0.0, "global", 0.0, False), (0.5, "hinge", 0.0, False), (0.5, "global", 0.0, True), (0.0, "global", 0.5, True)])
def test_finelip_freezes_the_logit_scale_only_when_nothing_reads_it(gamma, hn, token_weight, trained):
    cfg = TrainConfig(framework="finelip", gamma=gamma, token_weight=token_weight, framework_settings={"hn": hn})
    model = micro_model()
    framework = build_framework(cfg, model)
    assert framework.wrap_model(model).logit_scale.requires_grad is trained
    grouped = {id(p) for g in framework.param_groups(model) for p in g["params"]}
    assert (id(model.logit_scale) in grouped) is trained


# ----------------------------------------------------------------------------------------- StructXLIP
def cosine_anneal_warm_decay(base_weight, epoch, *, warm=1, decay_start=3, decay_end=8, floor=0.2) -> float:
    """structxlip/losses.py cosine_anneal_warm_decay."""
    if epoch < warm:
        factor = (epoch + 1) / max(1, warm)
    elif epoch < decay_start:
        factor = 1.0
    else:
        span = max(1e-6, decay_end - decay_start)
        progress = min(max(epoch - decay_start, 0.0), span)
        factor = floor + (1 - floor) * 0.5 * (1 + math.cos(progress / span * math.pi))
    return float(base_weight * factor)


def structxlip_local_loss(chunks, chunk_valid, edge_flat, edge_valid, logit_scale, tau) -> float:
    """structxlip/losses.py compute_local_structure_centric_loss, from each caption's chunk embeddings on."""
    batch_size, top_k = edge_valid.shape
    edge_all = normalize(edge_flat, EPS)
    valid_all = edge_valid.reshape(-1)
    neg_inf = np.finfo(np.float64).min
    total_loss, valid_items = 0.0, 0
    for b in range(batch_size):
        chunk_embeds = chunks[b][chunk_valid[b]]
        if len(chunk_embeds) == 0:  # `if not chunk_spans: continue`
            continue
        chunk_n = normalize(chunk_embeds, EPS)
        scale_eff = min(logit_scale / tau, 100.0)
        sim_all = scale_eff * chunk_n @ edge_all.T
        sim_den = np.where(valid_all[None, :], sim_all, neg_inf)
        log_den = np.array([np.logaddexp.reduce(row) for row in sim_den])
        if not edge_valid[b].any():
            continue
        pos = np.zeros(batch_size * top_k, dtype=bool)
        pos[b * top_k:(b + 1) * top_k] = edge_valid[b]
        log_pos = np.array([np.logaddexp.reduce(row) for row in np.where(pos[None, :], sim_all, neg_inf)])
        total_loss += -(log_pos - log_den).mean()
        valid_items += 1
    return total_loss / valid_items if valid_items else 0.0


def structxlip_total_loss(out, epoch, lambdas=(0.5, 0.05, 0.1), tau=0.07) -> float:
    """structxlip/train.py run_training's total_loss (Phase 2, lambda_global 1) for one batch."""
    scale = float(out["logit_scale"])
    x_i_org, x_t_org = normalize(as64(out["image_features"]), EPS), normalize(as64(out["text_features"]), EPS)
    loss_org = clip_loss(scale * x_i_org @ x_t_org.T)
    scribble, filtered = normalize(as64(out["edge_features"]), EPS), normalize(as64(out["filtered_features"]), EPS)
    loss_structure_centric = clip_loss(scale * scribble @ filtered.T)  # logit_scale.detach(): same value
    loss_rgb = float(np.mean(1 - (x_i_org * scribble).sum(axis=-1)))  # cosine_embedding_loss, y = 1
    edge_crops = as64(out["edge_crop_features"])
    loss_local = structxlip_local_loss(as64(out["chunk_features"]), out["chunk_valid"].numpy(),
                                       edge_crops.reshape(-1, edge_crops.shape[-1]), out["edge_valid"].numpy(),
                                       scale, tau)
    lam_structure = cosine_anneal_warm_decay(lambdas[0], epoch, warm=1, decay_start=1, decay_end=8, floor=0.7)
    lam_rgb = cosine_anneal_warm_decay(lambdas[1], epoch, warm=1, decay_start=1, decay_end=8, floor=0.5)
    lam_local = cosine_anneal_warm_decay(lambdas[2], epoch, warm=1, decay_start=1, decay_end=8, floor=0.4)
    return 1.0 * loss_org + lam_structure * loss_structure_centric + lam_rgb * loss_rgb + lam_local * loss_local


@pytest.mark.parametrize("epoch", [0, 1, 3, 8, 9])
def test_structxlip_trains_its_four_terms_with_the_released_per_epoch_weights(epoch):
    out = outputs()[0]
    framework = build_framework(TrainConfig(framework="structxlip"), micro_model())
    terms = framework.loss_terms(out, batch_of(epoch=epoch))
    assert list(terms) == ["global", "structure", "consistency", "local"]  # no GOAL segment/patch/text terms
    assert total(terms) == pytest.approx(structxlip_total_loss(out, epoch), rel=1e-5)


# ---------------------------------------------------------------------------------------------- GOAL
def goal_total_loss(out) -> float:
    """goal_loss_finetuning.py train: loss_org + 0.5 * loss_seg + loss_patch + loss_text."""
    scale = float(out["logit_scale"])
    x_i_org, x_t_org = normalize(as64(out["image_features"]), EPS), normalize(as64(out["text_features"]), EPS)
    x_i_seg, x_t_seg = normalize(as64(out["crop_features"]), EPS), normalize(as64(out["sentence_features"]), EPS)
    loss_org = clip_loss(scale * x_i_org @ x_t_org.T)
    loss_seg = clip_loss(scale * x_i_seg @ x_t_seg.T)
    patch_pooled = normalize(as64(out["box_features"]), EPS)
    loss_patch = float(np.mean((np.diag(patch_pooled @ x_i_seg.T) - 1) ** 2))  # MSELoss(diag, ones)
    text_pooled = normalize(as64(out["span_features"]), EPS)
    loss_text = float(np.mean((np.diag(text_pooled @ x_t_seg.T) - 1) ** 2))
    return loss_org + 0.5 * loss_seg + loss_patch + loss_text


def test_goal_trains_its_four_terms():
    out = outputs()[0]
    framework = build_framework(TrainConfig(framework="goal"), micro_model())
    terms = framework.loss_terms(out, batch_of())
    assert list(terms) == ["global", "segment", "patch", "text"]
    assert total(terms) == pytest.approx(goal_total_loss(out), rel=1e-5)


# ----------------------------------------------------------------------------------- Long-CLIP, LoRA
def longclip_pca(x: np.ndarray, dim: int) -> np.ndarray:
    """model_longclip.py CLIP.PCA: SVD of the centred batch, top `dim` right singular vectors, back + mean."""
    mean = x.mean(axis=0)
    centred = x - mean
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    components = vt.T[:, :dim]
    return centred @ components @ components.T + mean


def longclip_losses(out, pca_dim=32) -> tuple[float, float]:
    """model_longclip.py CLIP.forward on one process: (loss_itcl, loss_itcs), both label-smoothed by 0.1."""
    scale = float(out["logit_scale"])
    image_long, text_long = as64(out["image_features"]), as64(out["text_features"])
    text_short = as64(out["short_text_features"])
    image_short = longclip_pca(image_long, pca_dim)
    sim_i2tl, sim_tl2i = scale * image_long @ text_long.T, scale * (image_long @ text_long.T).T
    sim_i2ts, sim_ts2i = scale * image_short @ text_short.T, scale * (image_short @ text_short.T).T
    loss_itcl = (cross_entropy(sim_i2tl, 0.1) + cross_entropy(sim_tl2i, 0.1)) / 2
    loss_itcs = (cross_entropy(sim_i2ts, 0.1) + cross_entropy(sim_ts2i, 0.1)) / 2
    return loss_itcl, loss_itcs


def test_longclip_ft_is_the_label_smoothed_long_caption_term():
    out = outputs()[0]
    framework = build_framework(TrainConfig(framework="longclip", label_smoothing=0.1), micro_model())
    terms = framework.loss_terms(out, batch_of())
    assert list(terms) == ["global"]
    assert total(terms) == pytest.approx(longclip_losses(out)[0], rel=1e-6)


def test_longclip_with_its_short_caption_term_is_the_released_objective():
    out = outputs()[0]
    cfg = TrainConfig(framework="longclip", label_smoothing=0.1, framework_settings={"short_weight": 1.0,
                                                                                      "pca_components": 3})
    terms = build_framework(cfg, micro_model()).loss_terms(out, batch_of())
    assert list(terms) == ["global", "short"]
    loss_long, loss_short = longclip_losses(out, pca_dim=3)
    assert total(terms) == pytest.approx(loss_long + loss_short, rel=1e-5)  # train.py: loss_long + loss_short


@pytest.mark.parametrize("name", ["lora", "dora"])
def test_adapter_frameworks_train_the_global_term_only(name):
    out = outputs()[0]
    terms = build_framework(TrainConfig(framework=name, label_smoothing=0.1), micro_model()).loss_terms(out, batch_of())
    assert list(terms) == ["global"]
    assert total(terms) == pytest.approx(longclip_losses(out)[0], rel=1e-6)


# -------------------------------------------------------------------------------- the plug-in protocol
@pytest.mark.parametrize("name", framework_names())
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_hn_changes_only_the_global_term(name, smoothing):
    """For every registered framework (the paper's six) "+HN" replaces the global term by the HN objective (FineLIP: adds it)."""
    out = outputs()[0]
    margin_texts = F.normalize(torch.randn(6, 32, generator=torch.Generator().manual_seed(12)), dim=-1)
    batch = batch_of(epoch=1, epoch_progress=0.25)
    terms = {}
    for gamma in (0.0, 0.5):
        torch.manual_seed(0)  # the same module initialisation for both variants
        framework = build_framework(TrainConfig(framework=name, gamma=gamma, label_smoothing=smoothing), micro_model())
        terms[gamma] = framework.loss_terms(out, batch, margin_texts)
    plain, hn = terms[0.0], terms[0.5]
    if name == "finelip":
        assert "global" not in plain and list(hn) == ["global", *plain]
    else:
        assert list(plain) == list(hn) and list(plain)[0] == "global"
        expected_plain = hn_global(as64(out["image_features"]), as64(out["text_features"]), 30.0, 0.0,
                                   as64(margin_texts), smoothing)
        assert float(plain["global"]) == pytest.approx(expected_plain, rel=1e-6)
    for key in plain:
        if key != "global":
            assert torch.equal(plain[key], hn[key]), key
    expected = hn_global(as64(out["image_features"]), as64(out["text_features"]), 30.0, 0.5, as64(margin_texts),
                         smoothing)
    assert float(hn["global"]) == pytest.approx(expected, rel=1e-6)
