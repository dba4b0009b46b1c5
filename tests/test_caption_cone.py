"""The toy recipe's caption-cone term, against a float64 loop over pairs."""

import itertools

import pytest
import torch

from hnclip.frameworks.longclip import caption_cone_loss


def _mean_offdiag(t):
    pairs = [float(t[i] @ t[j]) for i, j in itertools.permutations(range(len(t)), 2)]
    return sum(pairs) / len(pairs)


def test_the_cone_term_is_the_mean_hinge_over_every_ordered_pair():
    torch.manual_seed(0)
    t = torch.nn.functional.normalize(torch.randn(7, 5, dtype=torch.float64) + 2.0, dim=-1)
    pairs = [float(t[i] @ t[j]) for i, j in itertools.permutations(range(len(t)), 2)]
    floor = sorted(pairs)[len(pairs) // 2]
    expected = sum(max(0.0, floor - c) for c in pairs) / len(pairs)
    assert expected > 0
    assert float(caption_cone_loss(t, floor)) == pytest.approx(expected, abs=1e-12)
    assert float(caption_cone_loss(t, min(pairs) - 1e-6)) == 0.0


def test_a_mean_above_the_floor_does_not_hide_a_spread_pair():
    # three crowded captions and one far one: the mean cosine clears 0.3, the far pairs do not
    t = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    assert _mean_offdiag(t) == pytest.approx(0.5)
    assert float(caption_cone_loss(t, 0.3)) == pytest.approx(6 * 0.3 / 12)


def test_the_cone_term_pulls_captions_together_only_below_the_target():
    t = torch.nn.functional.normalize(torch.randn(6, 4, dtype=torch.float64), dim=-1).requires_grad_()
    loss = caption_cone_loss(t, 0.99)
    loss.backward()
    # the gradient step -grad raises the mean cosine
    with torch.no_grad():
        moved = torch.nn.functional.normalize(t - 0.01 * t.grad, dim=-1)
    assert _mean_offdiag(moved) > _mean_offdiag(t.detach())
