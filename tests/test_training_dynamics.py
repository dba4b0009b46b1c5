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
    GradientProbe,
    exact_zero_flags,
    is_zero_norm,
    step_saturation,
)

HALF_ULP_OF_ONE = {torch.float32: 2.0 ** -24, torch.bfloat16: 2.0 ** -8}
HALF_SMALLEST_SUBNORMAL_FP32 = 2.0 ** -150


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
