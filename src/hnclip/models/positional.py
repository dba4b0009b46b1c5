"""Long-CLIP's "knowledge-preserving" stretch of a text positional-embedding table.

Long-CLIP (Zhang et al. 2024, ``model/longclip.py::load_from_clip``) keeps the first 20 rows, which
CLIP trained well on its mostly short captions, and fills each later gap between neighbouring rows with
``factor`` linearly interpolated rows; past the last row it extrapolates along the last difference.
77 rows become 20 + 4 * 57 = 248.
"""

from __future__ import annotations

import torch

__all__ = ["stretch_positional_embedding", "stretched_length"]


def stretched_length(num_positions: int, keep: int = 20, factor: int = 4) -> int:
    """Rows of the stretched table: ``keep`` copied, ``factor`` per later source row (gaps and tail)."""
    return keep + factor * (num_positions - keep)


def stretch_positional_embedding(pe: torch.Tensor, keep: int = 20, factor: int = 4) -> torch.Tensor:
    """Stretch ``pe`` [n, W] to [keep + factor * (n - keep), W] with Long-CLIP's scheme.

    Rows ``[0, keep)`` are copied. Source row ``keep + i`` (i < n - keep - 1) becomes ``factor`` rows
    ``(1 - j/factor) * pe[keep+i] + (j/factor) * pe[keep+i+1]`` for j = 0..factor-1; the last source
    row becomes ``pe[n-1] + (j/factor) * (pe[n-1] - pe[n-2])``. Computed in float64 and returned in
    ``pe``'s dtype, so a float16 table is not rounded twice.
    """
    if pe.ndim != 2:
        raise ValueError(f"positional embedding must be 2-D [positions, width], got shape {tuple(pe.shape)}")
    n = pe.shape[0]
    if factor < 1:
        raise ValueError(f"factor must be >= 1, got {factor}")
    if keep < 0 or n < keep + 1 or n < 2:
        raise ValueError(f"cannot stretch a {n}-row positional embedding keeping {keep} rows: "
                         f"need at least max(keep + 1, 2) rows")
    src = pe.detach().to(torch.float64)
    steps = torch.arange(factor, dtype=torch.float64, device=pe.device) / factor  # j / factor
    left = src[keep:n - 1]  # [gaps, W]
    right = src[keep + 1:n]
    gaps = left[:, None, :] * (1 - steps)[None, :, None] + right[:, None, :] * steps[None, :, None]
    last = src[n - 1]
    tail = last[None, :] + steps[:, None] * (last - src[n - 2])[None, :]
    stretched = torch.cat([src[:keep], gaps.reshape(-1, src.shape[1]), tail], dim=0)
    return stretched.to(pe.dtype)
