"""StructXLIP: the structure terms against per-pair float64 references, the annealing against the released
per-epoch schedule, chunk pooling against a float64 forward, what it reads of the products, the +HN
plug-in and a few training steps."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_preprocess_support import (
    build_products,
    hand_mask_generator,
    micro_batch,
    naive_infonce,
    prepared_framework,
    reference_states,
    train_steps,
)

from hnclip.data.image_store import to_model_input
from hnclip.frameworks.structxlip import (
    StructXLIPSettings,
    annealed_weight,
    chunk_embeddings,
    chunk_token_mask,
    clamp_log_logit_scale,
    local_edge_loss,
    rgb_edge_consistency,
    structure_loss,
)
from hnclip.models.tokenizer import _tokenizer
from hnclip.preprocess.edges import EdgeIndex, build_edges
from hnclip.preprocess.lexicon import chunk_spans


def edge_input(edges: np.ndarray, mean, std, device=None):
    """float32 [B, 3, S, S] model input of uint8 edge maps [B, S, S] (replicated to three channels): the
    reference for the edge pixels the framework feeds its image tower."""
    return to_model_input(np.repeat(edges[..., None], 3, axis=-1), mean, std, device)


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    return build_products(tmp_path_factory.mktemp("structxlip"), n=8)


# ------------------------------------------------------------------------------------------ pure parts
def released_epoch_weight(base, epoch, floor, warm=1, decay_start=1, decay_end=8):
    """StructXLIP's cosine_anneal_warm_decay as its train.py calls it (per epoch), re-derived."""
    if epoch < warm:
        factor = (epoch + 1) / warm
    elif epoch < decay_start:
        factor = 1.0
    else:
        total = decay_end - decay_start
        progress = min(max(epoch - decay_start, 0), total)
        factor = floor + (1 - floor) * 0.5 * (1 + math.cos(progress / total * math.pi))
    return base * factor


@pytest.mark.parametrize("floor", [0.7, 0.5, 0.4])
def test_annealing_matches_the_released_per_epoch_schedule(floor):
    for epoch in range(12):
        assert annealed_weight(0.5, epoch, floor) == pytest.approx(released_epoch_weight(0.5, epoch, floor))
    assert annealed_weight(0.5, 0, floor, warm=2) == pytest.approx(0.25)  # (epoch + 1) / warm
    assert annealed_weight(0.5, 9, floor) == pytest.approx(0.5 * floor)


def test_structure_loss_is_infonce_at_a_detached_scale():
    generator = torch.Generator().manual_seed(0)
    edges = F.normalize(torch.randn(4, 8, generator=generator, dtype=torch.float64), dim=-1).requires_grad_()
    texts = F.normalize(torch.randn(4, 8, generator=generator, dtype=torch.float64), dim=-1)
    scale = torch.tensor(30.0, dtype=torch.float64, requires_grad=True)
    loss = structure_loss(edges, texts, scale)
    assert float(loss.detach()) == pytest.approx(naive_infonce(edges.detach(), texts, 30.0), rel=1e-10)
    loss.backward()
    assert scale.grad is None and edges.grad.abs().sum() > 0


def test_consistency_is_mean_one_minus_cosine():
    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(5, 7, generator=generator).double(), torch.randn(5, 7, generator=generator).double()
    expected = np.mean([1 - float(a[i] @ b[i] / (a[i].norm() * b[i].norm())) for i in range(5)])
    assert float(rgb_edge_consistency(a, b)) == pytest.approx(expected, rel=1e-12)


def test_chunk_embeddings_are_norm_softmax_weighted_sums_without_weight_gradients():
    generator = torch.Generator().manual_seed(2)
    states = torch.randn(2, 6, 4, generator=generator, dtype=torch.float64).requires_grad_()
    spans = torch.tensor([[[1, 3], [2, 5], [0, 0]], [[4, 6], [0, 0], [0, 0]]])
    mask = chunk_token_mask(spans, length=6, context_length=6)  # position 5 is EOT: clipped off
    got = chunk_embeddings(states, mask)
    for b in range(2):
        for c in range(3):
            start, end = spans[b, c].tolist()
            end = min(end, 5)
            if end <= start:
                assert torch.all(got[b, c] == 0)
                continue
            rows = states[b, start:end].detach()
            weights = torch.softmax(rows.norm(dim=-1), dim=0)
            torch.testing.assert_close(got[b, c], (weights[:, None] * rows).sum(0))
    got[0, 1].sum().backward()  # with weights constant, d/d states = the weights themselves
    weights = torch.softmax(states[0, 2:5].detach().norm(dim=-1), dim=0)
    torch.testing.assert_close(states.grad[0, 2:5], weights[:, None].expand(3, 4))
    assert states.grad[0, :2].abs().sum() == 0 and states.grad[1].abs().sum() == 0


def naive_local_loss(chunks, chunk_valid, edges, edge_valid, scale, tau):
    batch, top_k = edge_valid.shape
    effective = min(scale / tau, 100.0)
    flat = [(b, k) for b in range(batch) for k in range(top_k) if edge_valid[b, k]]
    losses = []
    for b in range(batch):
        own = [(bb, k) for bb, k in flat if bb == b]
        valid_chunks = [c for c in range(chunks.shape[1]) if chunk_valid[b, c]]
        if not own or not valid_chunks:
            continue
        per_chunk = []
        for c in valid_chunks:
            logits = {key: effective * float(chunks[b, c].double() @ edges[key].double()) for key in flat}
            all_ = np.log(sum(np.exp(v) for v in logits.values()))
            pos = np.log(sum(np.exp(logits[key]) for key in own))
            per_chunk.append(all_ - pos)
        losses.append(np.mean(per_chunk))
    return float(np.mean(losses)) if losses else 0.0


@pytest.mark.parametrize("scale", [2.0, 30.0])  # 30 / 0.07 > 100: the effective scale is capped
def test_local_edge_loss_matches_per_chunk_reference(scale):
    generator = torch.Generator().manual_seed(3)
    chunks = F.normalize(torch.randn(4, 3, 8, generator=generator), dim=-1)
    edges = F.normalize(torch.randn(4, 2, 8, generator=generator), dim=-1)
    chunk_valid = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1]], dtype=torch.bool)
    edge_valid = torch.tensor([[1, 1], [1, 0], [1, 1], [0, 0]], dtype=torch.bool)  # caption 3: no own crop
    got = local_edge_loss(chunks.double(), chunk_valid, edges.double(), edge_valid, torch.tensor(scale), 0.07)
    assert float(got) == pytest.approx(naive_local_loss(chunks, chunk_valid, edges, edge_valid, scale, 0.07),
                                       rel=1e-8)
    assert torch.isfinite(got)


def test_logit_scale_is_clamped_in_log_space():
    class Holder(torch.nn.Module):
        def __init__(self, value):
            super().__init__()
            self.logit_scale = torch.nn.Parameter(torch.tensor(value))

    high, low = Holder(4.6), Holder(-1.0)
    clamp_log_logit_scale(high, 3.5)
    clamp_log_logit_scale(low, 3.5)
    assert float(high.logit_scale.detach()) == 3.5 and float(low.logit_scale.detach()) == 0.0


def test_settings_are_validated_with_the_field_name():
    with pytest.raises(ValueError, match=r"TrainConfig.structxlip.top_k=0 must be >= 1"):
        StructXLIPSettings(top_k=0)
    with pytest.raises(ValueError, match=r"TrainConfig.structxlip.anneal_decay_end=0 must be >= anneal_decay_start"):
        StructXLIPSettings(anneal_decay_end=0)


# ------------------------------------------------------------------------------------------ framework
def test_prepared_chunk_spans_hold_exactly_the_chunk_tokens(products):
    framework, _, data, _ = prepared_framework(products, framework="structxlip")
    for row in (0, 5):
        text = framework._data["filtered_captions"][row]
        assert "smooth" not in text and "red" not in text.lower()
        ids = framework._data["filtered_tokens"][row].tolist()
        chunks = chunk_spans(text)
        spans = framework._data["chunk_spans"][row]
        assert len(chunks) > 3 and spans[len(chunks):].abs().sum() == 0
        for (start, end), (token_start, token_end) in zip(chunks, spans.tolist(), strict=False):
            assert ids[token_start:token_end] == _tokenizer().encode(text[start:end])


def test_encode_adds_edge_and_chunk_features(products):
    framework, model, data, store = prepared_framework(products, framework="structxlip")
    model.eval()
    positions = [0, 3, 5, 6]
    batch = micro_batch(framework, model, data, store, positions)
    with torch.no_grad():
        out = framework.encode(model, batch)
    assert float(out["logit_scale"]) == pytest.approx(math.exp(3.5), rel=1e-6)  # clamped from 100

    edges = EdgeIndex(products[4])
    edge_pixels = edge_input(np.stack([edges.images[edges.row(data.image_ids[p])] for p in positions]),
                             model.image_mean, model.image_std)
    with torch.no_grad():
        torch.testing.assert_close(out["edge_features"], model.encode_image(edge_pixels), atol=1e-5, rtol=0)
    index = framework._data["segments"]
    for row, position in enumerate(positions):
        pairs = index.record(data.image_ids[position])["pairs"][:3]
        assert out["edge_valid"][row].tolist() == [k < len(pairs) for k in range(3)]
        crops = edge_input(np.stack([edges.crops[p["crop"]] for p in pairs]), model.image_mean, model.image_std)
        with torch.no_grad():
            torch.testing.assert_close(out["edge_crop_features"][row, :len(pairs)], model.encode_image(crops),
                                       atol=1e-5, rtol=0)

    filtered = batch.extras["filtered_tokens"]
    m, _, states = reference_states(model, batch.pixels, filtered)
    with torch.no_grad():
        final = m.clip.ln_final(states)
        for row in range(4):
            for c, (start, end) in enumerate(batch.extras["chunk_spans"][row].tolist()):
                if end <= start:
                    assert not out["chunk_valid"][row, c]
                    continue
                tokens = final[row, start:end]
                weights = torch.softmax(tokens.norm(dim=-1), dim=0)
                ref = F.normalize(m.clip.ln_final((weights[:, None] * tokens).sum(0)) @ m.clip.text_projection, dim=-1)
                torch.testing.assert_close(out["chunk_features"][row, c].double(), ref, atol=1e-5, rtol=0)


def test_terms_carry_annealed_weights(products):
    framework, model, data, store = prepared_framework(products, framework="structxlip")
    early = micro_batch(framework, model, data, store, [0, 1, 2, 3], epoch=0)
    late = micro_batch(framework, model, data, store, [0, 1, 2, 3], epoch=9)
    with torch.no_grad():
        out = framework.encode(model, early)
        a, b = framework.loss_terms(out, early), framework.loss_terms(out, late)
    assert list(a) == ["global", "structure", "consistency", "local"]
    scale = float(out["logit_scale"])
    assert float(a["structure"]) == pytest.approx(
        0.5 * naive_infonce(out["edge_features"], out["filtered_features"], scale), rel=1e-5)
    for name, floor in (("structure", 0.7), ("consistency", 0.5), ("local", 0.4)):
        assert float(b[name]) == pytest.approx(floor * float(a[name]), rel=1e-6)
    assert float(b["global"]) == float(a["global"])


def test_batches_carry_edges_and_filtered_captions_but_no_segment_pairs(products):
    """StructXLIP reads the segments only to rank each image's edge crops, never GOAL's crops or sentences."""
    framework, model, data, store = prepared_framework(products, framework="structxlip")
    batch = micro_batch(framework, model, data, store, [0, 1])
    assert set(batch.extras) == {"edges", "edge_crops", "edge_valid", "filtered_tokens", "chunk_spans"}
    with torch.no_grad():
        out = framework.encode(model, batch)
    assert not {"crop_features", "sentence_features", "box_features", "span_features"} & set(out)


def test_hn_replaces_only_the_global_term(products):
    plain, model, data, store = prepared_framework(products, framework="structxlip")
    boosted = prepared_framework(products, framework="structxlip", gamma=0.5)[0]
    batch = micro_batch(plain, model, data, store, [4, 5, 6, 7])
    with torch.no_grad():
        out = plain.encode(model, batch)
        a, b = plain.loss_terms(out, batch), boosted.loss_terms(out, batch)
    assert float(b["global"]) > float(a["global"])
    assert all(float(a[k]) == float(b[k]) for k in a if k != "global")


@pytest.mark.parametrize("gamma", [0.0, 0.5], ids=["plain", "hn"])
def test_training_steps_decrease_the_structxlip_objective(products, gamma):
    framework, model, data, store = prepared_framework(products, framework="structxlip", gamma=gamma)
    batch = micro_batch(framework, model, data, store, [0, 2, 4, 6])
    # +HN at s <= 33 on the micro model's near-duplicate captions starts near 18 and falls slowly: 20 steps
    before, after = train_steps(framework, model, batch, steps=20)
    assert math.isfinite(before) and after < 0.95 * before


def test_edges_of_another_segment_product_are_refused(products, tmp_path):
    from hnclip.preprocess.segments import build_segments

    manifest, store_dir, model_dir, _, edges_dir = products
    build_segments(manifest, model_dir, tmp_path / "segments", max_pairs=1, device="cpu",
                   mask_generator=hand_mask_generator(manifest))
    with pytest.raises(ValueError, match="another segment product"):
        prepared_framework((manifest, store_dir, model_dir, tmp_path / "segments", edges_dir), framework="structxlip")
    build_edges(store_dir, tmp_path / "segments", tmp_path / "edges")
    framework = prepared_framework((manifest, store_dir, model_dir, tmp_path / "segments", tmp_path / "edges"),
                                   framework="structxlip")[0]
    assert (framework._data["edge_crop_rows"][:, 1:] == -1).all()  # one pair per image: one valid edge crop


def test_train_model_runs_structxlip(products, tmp_path):
    from hnclip.config.train import TrainConfig
    from hnclip.data.image_store import ImageStore
    from hnclip.models import load_model
    from hnclip.train import train_model
    from hnclip.training.inputs import load_training_set

    manifest, store_dir, model_dir, segments_dir, edges_dir = products
    cfg = TrainConfig(framework="structxlip", device="cpu", micro_batch=4, accum_steps=2, epochs=2,
                      dynamics_every=1, eval_every_epoch=False, lr=1e-3)
    store = ImageStore(store_dir)
    data = load_training_set(manifest, store, "caption", "test manifest")
    summary = train_model(cfg, load_model(model_dir), data, store, tmp_path / "out", tmp_path / "ckpt",
                          products={"segments": segments_dir / "index.json", "edges": edges_dir / "index.json"})
    assert summary["steps"] == 2 and math.isfinite(summary["final_loss"])
