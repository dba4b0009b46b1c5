"""The gradient-dynamics measurements: saturation shares and the exact-zero definitions.

Each exact-zero expectation is derived here in float64 from how floating point rounds, not from the
code under test: with a positive logit ``gap`` above each of ``n`` negatives, the loss is
log(1 + n e^-gap), which rounds to 0.0 once 1 + n e^-gap rounds to 1, i.e. once n e^-gap is below
half the spacing of numbers just above 1 (2^-24 in fp32, 2^-8 in bf16, 8 significant bits); a
negative's softmax probability e^-gap / (1 + n e^-gap) is 0.0 in fp32 only below half the smallest
subnormal, 2^-150; a norm squares each element, so it is 0.0 once every square is below 2^-150.
"""

from __future__ import annotations

import math

import pytest
import torch

from hnclip.training.dynamics import (
    DYNAMICS_COLUMNS,
    EXACT_ZERO_COLUMNS,
    EXACT_ZERO_DTYPES,
    GradientProbe,
    exact_zero_flags,
    pair_sums,
    sparse_embeddings,
    step_saturation,
    zero_norm_flags,
)

HALF_ULP_OF_ONE = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8}
HALF_SMALLEST_SUBNORMAL_FP32 = 2.0 ** -150


def is_zero_norm(grads, dtype: torch.dtype) -> bool:
    """The definition :func:`zero_norm_flags` is checked against: whether the global L2 norm of ``grads``,
    as torch computes it in ``dtype``, is exactly 0.0.

    Each gradient is rounded to ``dtype`` and its norm taken with ``torch.linalg.vector_norm`` (what
    ``clip_grad_norm_`` logs): no rescaling, so the norm underflows to 0.0 once every element is below
    ~2.6e-23 even though the gradient itself is not zero. ``None`` entries (parameters the loss does
    not reach) count as zero.
    """
    norms = [torch.linalg.vector_norm(g.detach().to(dtype)) for g in grads if g is not None]
    return not norms or bool(torch.linalg.vector_norm(torch.stack(norms)) == 0)


def gap_batch(batch: int, gap: float):
    """Features whose logits at scale ``gap`` are ``gap`` on the diagonal and 0 elsewhere (exact in bf16)."""
    eye = torch.eye(batch, dtype=torch.float32)
    return eye, eye.clone(), torch.tensor(float(gap))


def loss_rounds_to_zero(batch: int, gap: float, dtype) -> bool:
    return (batch - 1) * math.exp(-gap) < HALF_ULP_OF_ONE[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize(("batch", "gap"), [(2, 3.0), (2, 12.0), (2, 20.0), (4, 16.0), (4, 22.0), (16, 4.0),
                                            (16, 10.0), (16, 14.0), (16, 24.0)])
def test_loss_and_positive_gradient_vanish_exactly_when_one_plus_the_negatives_rounds_to_one(dtype, batch, gap):
    threshold_gap = math.log((batch - 1) / HALF_ULP_OF_ONE[dtype])
    if abs(gap - threshold_gap) < 0.5:
        pytest.skip("too close to the rounding boundary for a clean expectation")
    flags = exact_zero_flags(*gap_batch(batch, gap), dtype)
    expected = loss_rounds_to_zero(batch, gap, dtype)
    assert flags["loss"] is expected
    assert flags["positive_logit_grad"] is expected  # p - 1 with p = exp(log_softmax) = exp(0) = 1
    assert flags["feature_grad"] is False  # each negative keeps e^-gap / (1 + ...) > 0: no underflow yet


def test_feature_gradient_vanishes_only_when_every_negative_probability_underflows():
    # unit features with cos(v_i, t_j) = -0.1 off the diagonal: at s = 100 the gap is 110 logits
    v = torch.tensor([[1.0, 0.0], [-0.1, math.sqrt(0.99)]])
    scale = torch.tensor(100.0)
    gap = float(scale) * (1.0 - float(v[0] @ v[1]))
    assert math.exp(-gap) < HALF_SMALLEST_SUBNORMAL_FP32  # float64: the negative's probability underflows
    flags = exact_zero_flags(v, v.clone(), scale, torch.float32)
    assert flags == {"loss": True, "positive_logit_grad": True, "feature_grad": True}
    # at s = 50 the gap is 55: exp(-55) ~ 1.3e-24 is a normal fp32 number, so the features still get a gradient
    assert math.exp(-55.0) > 2.0 ** -126
    assert exact_zero_flags(v, v.clone(), torch.tensor(50.0), torch.float32)["feature_grad"] is False


@pytest.mark.parametrize("value", [1e-21, 1e-22, 1e-24, 1e-30, 1e-6])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_norm_is_zero_exactly_when_every_square_underflows(value, dtype):
    grads = [torch.full((3, 4), value), None, torch.full((5,), -value)]
    rounded = float(torch.tensor(value).to(dtype))  # the element as stored in dtype, reasoned in float64
    expected = rounded * rounded < HALF_SMALLEST_SUBNORMAL_FP32
    assert is_zero_norm(grads, dtype) is expected
    assert is_zero_norm([torch.zeros(3), torch.full((2,), 1e-30), torch.full((1,), 1e-3)], dtype) is False


def test_norm_of_no_gradient_at_all_is_zero():
    assert is_zero_norm([None, None], torch.float32) is True


def test_step_saturation_counts_micro_batches_on_each_side_of_one_in_a_thousand():
    trained = [0.5, 2e-4, 1e-3, 3.0]
    standard = [1e-4, 9.99e-4, 1e-3, 0.2]
    assert step_saturation(trained, standard) == {"saturated_share": 0.5, "objective_active_share": 0.75}
    with pytest.raises(ValueError, match="one trained and one standard loss"):
        step_saturation([1.0], [])


def test_probe_logs_the_share_of_micro_batches_with_each_exact_zero():
    torch.manual_seed(0)
    weight = torch.nn.Parameter(torch.randn(4, 4))
    probe = GradientProbe([weight])
    for gap in (30.0, 3.0):  # one micro-batch saturated in fp32 (loss 0), one not
        images, texts, scale = gap_batch(4, gap)
        loss = (weight * 0.0).sum()  # a stand-in objective: its parameter gradient is exactly zero
        probe.add(loss, loss, 0.5, (images, texts, scale))
    row = probe.summary()
    assert set(EXACT_ZERO_COLUMNS) <= set(row) and set(row) <= set(DYNAMICS_COLUMNS)
    assert row["zero_loss_fp32"] == 0.5 and row["zero_positive_logit_grad_fp32"] == 0.5
    assert row["zero_loss_bf16"] == 0.5  # gap 3 with 3 negatives: 3 e^-3 = 0.15 > 2^-8
    assert row["zero_feature_grad_fp32"] == 0.0
    # the stand-in losses have an all-zero gradient (times 0): the norm is 0 in both micro-batches
    assert row["zero_param_grad_fp32"] == 1.0 and row["grad_norm_standard_fp32"] == 0.0
    assert row["standard_grad_zero"] == 1


def test_probe_without_features_leaves_the_exact_zero_columns_empty():
    weight = torch.nn.Parameter(torch.ones(3))
    probe = GradientProbe([weight])
    loss = (weight * torch.tensor([1.0, 2.0, 2.0])).sum()
    probe.add(loss, loss, 1.0)
    row = probe.summary()
    assert row["grad_norm_standard_fp32"] == pytest.approx(3.0) and row["grad_norm_standard"] == pytest.approx(3.0)
    assert all(math.isnan(row[c]) for c in EXACT_ZERO_COLUMNS)


# ------------------------------------------------- the loop's probe against an independent float64 reference

CAPTIONS = ["a red cube left of a ball", "a blue ball near the car", "two green trees", "the shiny dog above a car",
            "a small matte cube", "a large red ball left of a tree", "the car below the dog", "a blue tree"]


def hand_infonce(out: dict, gamma: float) -> torch.Tensor:
    """Symmetric InfoNCE with the HN margin gamma * G (G: detached caption cosine, zero diagonal), from the
    paper's formula, in the features' own dtype."""
    images, texts, s = out["image_features"], out["text_features"], out["logit_scale"]
    g = (texts @ texts.T).detach() * (1 - torch.eye(len(texts), dtype=texts.dtype))
    labels = torch.arange(len(texts))
    return (F_cross(s * (images @ texts.T + gamma * g), labels) + F_cross(s * (texts @ images.T + gamma * g), labels)) / 2


def F_cross(logits, labels):
    return -(logits.diagonal() - torch.logsumexp(logits, dim=1)).mean()


def micro_batches():
    from hnclip.models import create_model

    model = create_model("micro", seed=3).train(False)  # no dropout in the micro model; eval keeps it explicit
    generator = torch.Generator().manual_seed(4)
    size = model.spec["config"]["vision_cfg"]["image_size"]
    images = torch.rand(len(CAPTIONS), 3, size, size, generator=generator)
    tokens = model.tokenize(CAPTIONS)
    return model, [(images[:4], tokens[:4]), (images[4:], tokens[4:])]


def reference(gamma: float) -> dict:
    """Norms, ratio and cosine of the step's standard and boosted gradients over every parameter (the
    token-embedding table densely), with a float64 copy of the model: nothing of the probe is used."""
    model, batches = micro_batches()
    model = model.double()
    params = [p for p in model.parameters() if p.requires_grad]
    standard = [torch.zeros_like(p) for p in params]
    boosted = [torch.zeros_like(p) for p in params]
    for images, tokens in batches:
        out = model(images.double(), tokens)
        for total, loss in ((standard, hand_infonce(out, 0.0)), (boosted, hand_infonce(out, gamma))):
            for t, g in zip(total, torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True),
                            strict=True):
                if g is not None:
                    t.add_(g / len(batches))
    ns = math.sqrt(sum(float((g * g).sum()) for g in standard))
    nb = math.sqrt(sum(float((g * g).sum()) for g in boosted))
    dot = sum(float((a * b).sum()) for a, b in zip(standard, boosted, strict=True))
    return {"grad_norm_standard": ns, "grad_norm_boosted": nb, "grad_ratio": nb / ns, "grad_cosine": dot / (ns * nb)}


def probe_step(gamma: float, step_gradient: bool, sparse: bool) -> tuple[dict, int]:
    """One step through the probe as the training loop drives it; returns its row and the number of
    autograd.grad passes it took."""
    model, batches = micro_batches()
    params = [p for p in model.parameters() if p.requires_grad]
    calls = [0]
    real_grad = torch.autograd.grad

    def counting(outputs, inputs, *args, **kwargs):  # backward passes through the model (not the feature-level
        calls[0] += any(any(x is p for p in params) for x in inputs)  # exact-zero measurements)
        return real_grad(outputs, inputs, *args, **kwargs)

    probe = GradientProbe(params, sparse_embeddings([model], params) if sparse else (), step_gradient=step_gradient)
    torch.autograd.grad = counting
    try:
        for images, tokens in batches:
            out = model(images, tokens)
            standard = hand_infonce(out, 0.0)
            boosted = standard if gamma == 0 else hand_infonce(out, gamma)
            probe.add(standard, boosted, 1.0 / len(batches),
                      (out["image_features"].detach(), out["text_features"].detach(), out["logit_scale"].detach()))
            if step_gradient:
                (boosted / len(batches)).backward()
    finally:
        torch.autograd.grad = real_grad
    return probe.summary(), calls[0]


@pytest.mark.parametrize("gamma", [0.0, 0.5])
@pytest.mark.parametrize(("step_gradient", "sparse"), [(True, True), (True, False), (False, True), (False, False)])
def test_probe_numbers_equal_a_float64_reference_on_a_tiny_model(gamma, step_gradient, sparse):
    expected = reference(gamma)
    row, passes = probe_step(gamma, step_gradient, sparse)
    for column, value in expected.items():
        assert row[column] == pytest.approx(value, rel=2e-5, abs=1e-9), column
    if gamma == 0:
        assert row["grad_ratio"] == 1.0 and row["grad_cosine"] == pytest.approx(1.0, abs=1e-12)
    else:
        assert abs(row["grad_ratio"] - 1) > 1e-3 and row["grad_cosine"] < 1 - 1e-6  # the margin changes it
    # one pass per micro-batch for the standard gradient; a second only where the probe takes the boosted one
    assert passes == 2 * (1 if step_gradient or gamma == 0 else 2)
    assert row["grad_norm_standard_fp32"] == pytest.approx(expected["grad_norm_standard"], rel=1e-4)
    assert row["zero_param_grad_fp32"] == 0.0 and row["standard_grad_zero"] == 0


def test_the_embedding_table_by_its_rows_gives_the_dense_numbers():
    model, _ = micro_batches()
    params = [p for p in model.parameters() if p.requires_grad]
    (table,) = sparse_embeddings([model], params)
    assert table is model.clip.token_embedding and table.weight.shape[0] == 49408
    sparse, _ = probe_step(0.5, True, True)
    dense, _ = probe_step(0.5, True, False)
    for column in ("grad_norm_standard", "grad_norm_boosted", "grad_ratio", "grad_cosine"):
        assert sparse[column] == pytest.approx(dense[column], rel=1e-6), column
    assert {c: sparse[c] for c in EXACT_ZERO_COLUMNS} == {c: dense[c] for c in EXACT_ZERO_COLUMNS}


@pytest.mark.parametrize("value", [1e-21, 1e-22, 2.6e-23, 1e-24, 1e-30, 1e-6, 0.0])
def test_zero_flags_from_the_largest_element_equal_torchs_norm_in_each_dtype(value):
    grads = [torch.full((3, 4), value), torch.full((5,), -value / 3), torch.zeros(2)]
    amaxes = [float(g.abs().max()) for g in grads]
    flags = zero_norm_flags(amaxes)
    for name, dtype in EXACT_ZERO_DTYPES.items():
        assert flags[name] is is_zero_norm(grads, dtype), name


def test_norms_and_cosine_of_gradients_whose_fp32_squares_underflow_are_exact():
    torch.manual_seed(1)
    s = torch.randn(1000) * 1e-24  # each square ~1e-48: below the smallest fp32 subnormal
    b = torch.randn(1000) * 1e-3 + 5e20 * s
    big = torch.randn(300_000)  # many elements: float32 chunks reduced in float64
    ss, bb, sb = pair_sums([(s, b), (big, big)])
    s64, b64, big64 = s.double(), b.double(), big.double()
    # the big pair's float32 dot over a chunk of 2^16 elements carries a relative error of ~1e-7 (the BLAS
    # kernel, and so the exact figure, depends on the thread count and the machine): 1e-6 bounds it
    assert ss == pytest.approx(float((s64 * s64).sum() + (big64 * big64).sum()), rel=1e-6)
    assert bb == pytest.approx(float((b64 * b64).sum() + (big64 * big64).sum()), rel=1e-6)
    assert sb == pytest.approx(float((s64 * b64).sum() + (big64 * big64).sum()), rel=1e-6)
    alone = pair_sums([(s, b)])
    cosine = float((s64 * b64).sum() / (s64.norm() * b64.norm()))
    assert alone[2] / math.sqrt(alone[0] * alone[1]) == pytest.approx(cosine, rel=1e-9)
    assert alone[0] > 0 and float(torch.linalg.vector_norm(s)) == 0.0  # what fp32 squares alone would give
