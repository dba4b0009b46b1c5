"""Long-CLIP positional stretch: row-by-row against hand formulas and Long-CLIP's literal loop."""

import pytest
import torch

from hnclip.models import stretch_positional_embedding


def test_stretch_25_rows_keep_20_every_row_by_formula():
    torch.manual_seed(0)
    pe = torch.randn(25, 2, dtype=torch.float64)
    out = stretch_positional_embedding(pe, keep=20, factor=4)
    # 20 kept + 4 gaps (rows 20-21, 21-22, 22-23, 23-24) * 4 + 4 tail rows
    assert out.shape == (40, 2)
    for row in range(20):
        assert torch.equal(out[row], pe[row])
    expected_gap_rows = []
    for src in (20, 21, 22, 23):
        a, b = pe[src], pe[src + 1]
        expected_gap_rows += [a, 0.75 * a + 0.25 * b, 0.5 * a + 0.5 * b, 0.25 * a + 0.75 * b]
    for offset, expected in enumerate(expected_gap_rows):
        torch.testing.assert_close(out[20 + offset], expected, rtol=0, atol=1e-15)
    last, before = pe[24], pe[23]
    for j in range(4):
        torch.testing.assert_close(out[36 + j], last + j * (last - before) / 4, rtol=0, atol=1e-15)


def _longclip_literal_loop(pe: torch.Tensor, keep_len: int = 20) -> torch.Tensor:
    """Long-CLIP's load_from_clip loop written out with its literal coefficients (independent reference)."""
    length, dim = pe.shape
    new = torch.zeros(4 * length - 3 * keep_len, dim, dtype=pe.dtype)
    new[:keep_len] = pe[:keep_len]
    for i in range(length - 1 - keep_len):
        a, b = pe[i + keep_len], pe[i + 1 + keep_len]
        new[4 * i + keep_len] = a
        new[4 * i + 1 + keep_len] = 3 * a / 4 + 1 * b / 4
        new[4 * i + 2 + keep_len] = 2 * a / 4 + 2 * b / 4
        new[4 * i + 3 + keep_len] = 1 * a / 4 + 3 * b / 4
    end = 4 * length - 3 * keep_len
    for j in range(4):
        new[end - 4 + j] = pe[length - 1] + j * (pe[length - 1] - pe[length - 2]) / 4
    return new


def test_stretch_77_to_248_matches_longclip_loop():
    torch.manual_seed(1)
    pe = torch.randn(77, 3, dtype=torch.float64)
    out = stretch_positional_embedding(pe)
    assert out.shape == (248, 3)
    torch.testing.assert_close(out, _longclip_literal_loop(pe), rtol=0, atol=1e-12)


def test_stretch_keeps_dtype_and_generalises_factor():
    pe = torch.arange(12, dtype=torch.float32).reshape(6, 2)  # rows [2r, 2r+1]: linear in the row index
    out = stretch_positional_embedding(pe, keep=2, factor=2)
    assert out.dtype == torch.float32
    # on a linear table interpolation and extrapolation both continue the line at half steps
    expected = torch.tensor([[0, 1], [2, 3]] + [[4 + k, 5 + k] for k in range(0, 8)], dtype=torch.float32)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("shape,keep", [((20, 4), 20), ((1, 4), 0), ((4,), 0)])
def test_stretch_rejects_tables_too_short_or_not_2d(shape, keep):
    with pytest.raises(ValueError, match="positional embedding|rows"):
        stretch_positional_embedding(torch.zeros(shape), keep=keep)
