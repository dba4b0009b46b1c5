"""GOAL: each loss term against a per-pair float64 reference, the pooled features against a float64 forward
written out module by module, the +HN plug-in, and a few training steps of plain and +HN GOAL."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from test_preprocess_support import (
    build_products,
    micro_batch,
    naive_infonce,
    objective,
    prepared_framework,
    reference_states,
    train_steps,
)

from hnclip.frameworks.goal import (
    GoalFramework,
    GoalSettings,
    alignment_loss,
    box_patch_mask,
    normalise_pixels,
    paired_infonce,
    span_token_mask,
)


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    return build_products(tmp_path_factory.mktemp("goal"), n=8)


# ------------------------------------------------------------------------------------------ loss terms
def test_paired_infonce_matches_per_pair_float64():
    generator = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(5, 8, generator=generator), dim=-1)
    b = F.normalize(torch.randn(5, 8, generator=generator), dim=-1)
    assert float(paired_infonce(a.double(), b.double(), 20.0)) == pytest.approx(naive_infonce(a, b, 20.0), rel=1e-10)


def test_alignment_loss_is_mean_squared_cosine_gap_over_valid_rows():
    generator = torch.Generator().manual_seed(1)
    pooled, target = torch.randn(4, 6, generator=generator).double(), torch.randn(4, 6, generator=generator).double()
    valid = torch.tensor([True, False, True, True])
    expected = np.mean([(float(F.cosine_similarity(pooled[i], target[i], dim=0)) - 1) ** 2 for i in (0, 2, 3)])
    assert float(alignment_loss(pooled, target, valid)) == pytest.approx(expected, rel=1e-12)
    everything = np.mean([(float(F.cosine_similarity(pooled[i], target[i], dim=0)) - 1) ** 2 for i in range(4)])
    assert float(alignment_loss(pooled, target)) == pytest.approx(everything, rel=1e-12)
    nothing = alignment_loss(pooled.requires_grad_(), target, torch.zeros(4, dtype=torch.bool))
    nothing.backward()
    assert float(nothing.detach()) == 0.0 and pooled.grad is not None


def goal_patch_indices(box, image_size: int, patch: int) -> list[int]:
    """GOAL's get_patch_tokens_from_bbox index rule (without its CLS offset), box given as fractions."""
    fx1, fy1, fx2, fy2 = box
    x1 = max(0, min(int(round(fx1 * image_size)), image_size - 1))
    y1 = max(0, min(int(round(fy1 * image_size)), image_size - 1))
    x2 = max(0, min(int(round(fx2 * image_size)), image_size))
    y2 = max(0, min(int(round(fy2 * image_size)), image_size))
    per_row = image_size // patch
    return [i * per_row + j for i in range(y1 // patch, (y2 + patch - 1) // patch)
            for j in range(x1 // patch, (x2 + patch - 1) // patch)]


@pytest.mark.parametrize("image_size, patch", [(32, 8), (224, 14)])
def test_box_patch_mask_reproduces_goal_patch_rule(image_size, patch):
    rng = np.random.default_rng(image_size)
    boxes = []
    while len(boxes) < 200:
        a, b = np.sort(rng.uniform(0, 1, 2)), np.sort(rng.uniform(0, 1, 2))
        if goal_patch_indices((a[0], b[0], a[1], b[1]), image_size, patch):
            boxes.append((a[0], b[0], a[1], b[1]))
    boxes += [(0.0, 0.0, 1.0, 1.0), (0.5, 0.5, 1.0, 1.0)]
    grid = image_size // patch
    mask = box_patch_mask(torch.tensor(boxes, dtype=torch.float32), (grid, grid), image_size)
    for row, box in enumerate(boxes):
        # float32 boxes: recompute the reference from the same rounded values
        box32 = tuple(float(v) for v in torch.tensor(box, dtype=torch.float32))
        assert torch.nonzero(mask[row]).flatten().tolist() == goal_patch_indices(box32, image_size, patch), box


def test_box_patch_mask_degenerate_and_missing_boxes():
    mask = box_patch_mask(torch.tensor([[0.5, 0.5, 0.5, 0.5], [float("nan")] * 4, [0.99, 0.0, 1.0, 0.1]]),
                          (4, 4), 32)
    assert torch.nonzero(mask[0]).flatten().tolist() == [10]  # a point box still covers the patch it lies in
    assert not mask[1].any()
    assert torch.nonzero(mask[2]).flatten().tolist() == [3]


def test_span_token_mask_clips_to_content_positions():
    spans = torch.tensor([[1, 4], [3, 9], [8, 12], [2, 2]])
    mask = span_token_mask(spans, length=10, context_length=10)  # position 9 holds EOT when truncated
    assert [torch.nonzero(m).flatten().tolist() for m in mask] == [[1, 2, 3], [3, 4, 5, 6, 7, 8], [8], []]


def test_normalise_pixels_matches_the_store_transform():
    from hnclip.data.image_store import to_model_input

    pixels = np.random.default_rng(0).integers(0, 256, (2, 5, 5, 3), dtype=np.uint8)
    mean, std = (0.4, 0.5, 0.6), (0.2, 0.3, 0.25)
    assert torch.equal(normalise_pixels(torch.from_numpy(pixels), mean, std), to_model_input(pixels, mean, std))
    edges = pixels[..., 0]
    assert torch.equal(normalise_pixels(torch.from_numpy(edges), mean, std),
                       to_model_input(np.repeat(edges[..., None], 3, axis=-1), mean, std))


# ------------------------------------------------------------------------------------------ encode
def test_encode_pools_boxes_and_spans_like_goal(products):
    framework, model, data, store = prepared_framework(products, framework="goal")
    model.eval()
    batch = micro_batch(framework, model, data, store, [0, 3, 5, 6])
    with torch.no_grad():
        out = framework.encode(model, batch)
        plain = model(batch.pixels, batch.tokens)
    torch.testing.assert_close(out["image_features"], plain["image_features"], atol=1e-5, rtol=0)
    torch.testing.assert_close(out["text_features"], plain["text_features"], atol=1e-5, rtol=0)

    crops = normalise_pixels(batch.extras["crops"], model.image_mean, model.image_std)
    m, image_states, text_states = reference_states(model, crops, batch.extras["sentence_tokens"])
    with torch.no_grad():
        crop_ref = F.normalize(m.clip.visual.ln_post(image_states[:, 0]) @ m.clip.visual.proj, dim=-1)
        eot = batch.extras["sentence_tokens"].argmax(dim=-1)
        sentence_ref = F.normalize(m.clip.ln_final(text_states)[torch.arange(4), eot] @ m.clip.text_projection, dim=-1)
        _, caption_image_states, caption_text_states = reference_states(model, batch.pixels, batch.tokens)
    torch.testing.assert_close(out["crop_features"].double(), crop_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(out["sentence_features"].double(), sentence_ref, atol=1e-5, rtol=0)

    index = framework._data["index"]
    for row, position in enumerate(batch.positions.tolist()):
        pair = index.record(data.image_ids[position])["pairs"][0]
        patches = [1 + k for k in goal_patch_indices(pair["box_store"], 32, 8)]  # + CLS offset, as in GOAL
        pooled = caption_image_states[row, patches].mean(dim=0)
        box_ref = F.normalize(m.clip.visual.ln_post(pooled) @ m.clip.visual.proj, dim=-1)
        torch.testing.assert_close(F.normalize(out["box_features"][row], dim=-1).double(), box_ref, atol=1e-5, rtol=0)
        start, end = pair["token_span"]
        span = caption_text_states[row, start:end].mean(dim=0)
        span_ref = F.normalize(m.clip.ln_final(span) @ m.clip.text_projection, dim=-1)
        torch.testing.assert_close(F.normalize(out["span_features"][row], dim=-1).double(), span_ref, atol=1e-5, rtol=0)
    assert out["box_valid"].all() and out["span_valid"].all()


def test_extra_terms_are_goal_weighted_terms(products):
    framework, model, data, store = prepared_framework(products, framework="goal")
    batch = micro_batch(framework, model, data, store, [1, 2, 4, 7])
    with torch.no_grad():
        out = framework.encode(model, batch)
        terms = framework.loss_terms(out, batch)
    assert list(terms) == ["global", "segment", "patch", "text"]
    scale = float(out["logit_scale"])

    def mse(a, b):
        return np.mean([(float(F.cosine_similarity(a[i].double(), b[i].double(), dim=0)) - 1) ** 2
                        for i in range(len(a))])

    assert float(terms["global"]) == pytest.approx(naive_infonce(out["image_features"], out["text_features"], scale),
                                                   rel=1e-5)
    assert float(terms["segment"]) == pytest.approx(
        0.5 * naive_infonce(out["crop_features"], out["sentence_features"], scale), rel=1e-5)
    assert float(terms["patch"]) == pytest.approx(mse(out["box_features"], out["crop_features"]), rel=1e-4)
    assert float(terms["text"]) == pytest.approx(mse(out["span_features"], out["sentence_features"]), rel=1e-4)


def test_weights_come_from_the_goal_settings():
    from hnclip.config.train import TrainConfig

    cfg = TrainConfig.from_overrides({"framework": "goal", "goal.segment_weight": "0.25", "goal.text_weight": "0"})
    assert cfg.framework_settings == GoalSettings(segment_weight=0.25, patch_weight=1.0, text_weight=0.0)
    with pytest.raises(ValueError, match="TrainConfig.goal.patch_weight=-1.0"):
        GoalSettings(patch_weight=-1.0)


def test_hn_replaces_only_the_global_term(products):
    plain, model, data, store = prepared_framework(products, framework="goal")
    boosted = prepared_framework(products, framework="goal", gamma=0.5)[0]
    batch = micro_batch(plain, model, data, store, [0, 1, 2, 3])
    with torch.no_grad():
        out = plain.encode(model, batch)
        a, b = plain.loss_terms(out, batch), boosted.loss_terms(out, batch)
    for name in ("segment", "patch", "text"):
        assert float(a[name]) == float(b[name])
    images, texts, s = out["image_features"].double(), out["text_features"].double(), float(out["logit_scale"])
    g = (texts @ texts.T) * (1 - torch.eye(4, dtype=torch.float64))
    logits = s * (images @ texts.T + 0.5 * g)
    logits_t = s * (texts @ images.T + 0.5 * g)
    expected = -(logits.diagonal() - torch.logsumexp(logits, 1)).mean() / 2 \
        - (logits_t.diagonal() - torch.logsumexp(logits_t, 1)).mean() / 2
    assert float(b["global"]) == pytest.approx(float(expected), rel=1e-5)
    assert float(b["global"]) != pytest.approx(float(a["global"]), rel=1e-3)


@pytest.mark.parametrize("gamma", [0.0, 0.5], ids=["plain", "hn"])
def test_training_steps_decrease_the_goal_objective(products, gamma):
    framework, model, data, store = prepared_framework(products, framework="goal", gamma=gamma)
    batch = micro_batch(framework, model, data, store, [0, 2, 4, 6])
    before, after = train_steps(framework, model, batch)
    assert math.isfinite(before) and after < 0.95 * before  # +HN at s = 100 on a random micro model: ~10%


# ------------------------------------------------------------------------------------------ data
def test_prepare_refuses_a_product_of_other_captions(products):
    from hnclip.config.train import TrainConfig
    from hnclip.models import load_model
    from hnclip.training.batches import TrainingSet

    manifest, _, model_dir, segments_dir, _ = products
    captions = list(manifest["caption"])
    captions[2] = "Something else entirely. " + captions[2]
    data = TrainingSet(list(manifest["image_id"]), captions, np.arange(len(captions)))
    framework = GoalFramework(TrainConfig(framework="goal"), load_model(model_dir))
    with pytest.raises(ValueError, match="'scene_002'.*other captions"):
        framework.prepare(data, {"segments": segments_dir}, load_model(model_dir).tokenize)
    data = TrainingSet(["unknown"], captions[:1], np.arange(1))
    with pytest.raises(KeyError, match="'unknown'.*segments.jsonl"):
        framework.prepare(data, {"segments": segments_dir}, load_model(model_dir).tokenize)


def test_train_model_runs_goal_and_saves_it(products, tmp_path):
    from hnclip.config.train import TrainConfig
    from hnclip.data.image_store import ImageStore
    from hnclip.models import load_model
    from hnclip.train import train_model
    from hnclip.training.inputs import load_training_set

    manifest, store_dir, model_dir, segments_dir, _ = products
    cfg = TrainConfig(framework="goal", gamma=0.5, device="cpu", micro_batch=4, accum_steps=1, max_steps=2,
                      dynamics_every=1, eval_every_epoch=False, lr=1e-3)
    store = ImageStore(store_dir)
    data = load_training_set(manifest, store, "caption", "test manifest")
    summary = train_model(cfg, load_model(model_dir), data, store, tmp_path / "out", tmp_path / "ckpt",
                          products={"segments": segments_dir / "index.json"})
    assert summary["steps"] == 2 and math.isfinite(summary["final_loss"])
    assert json.loads((tmp_path / "out" / "model" / "framework.json").read_text())["framework"] == "goal"
    with pytest.raises(ValueError, match="needs the preprocessing product.*segments"):
        train_model(cfg, load_model(model_dir), data, store, tmp_path / "out2", tmp_path / "ckpt2")


def test_objective_is_finite_with_token_term(products):
    framework, model, data, store = prepared_framework(products, framework="goal", token_weight=0.5, gamma=0.5)
    batch = micro_batch(framework, model, data, store, [0, 1, 2, 3])
    terms = framework.loss_terms(framework.encode(model, batch), batch)
    assert list(terms) == ["global", "token", "segment", "patch", "text"]
    assert math.isfinite(float(objective(framework, model, batch).detach()))
