"""The rates the protocol tries and the rule that picks one: the same for every method.

A grid point is an integer number of half-decade steps ``k`` from the method's centre (its paper-ratio
rate): rate = centre * 10**(k/2), rounded to one significant digit (1e-4, 3e-4, 1e-3 ...), so two methods
with the same centre try the same rates and a record's rates read as written in the config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["choose", "next_step", "paper_ratio", "rate_at", "start_steps"]


def rate_at(centre: float, step: int) -> float:
    """The rate ``step`` half-decades from ``centre``, to one significant digit."""
    if centre <= 0:
        raise ValueError(f"a rate grid's centre must be positive, got {centre}")
    return float(f"{centre * 10 ** (step / 2):.0e}")


def start_steps(steps: int) -> list[int]:
    """The first grid: ``steps`` half-decades on each side of the centre, the centre included."""
    if steps < 1:
        raise ValueError(f"tuning.steps must be at least 1, got {steps}")
    return list(range(-steps, steps + 1))


def choose(scores: Mapping[int, float]) -> int:
    """The grid step with the best score; a tie goes to the step nearer the centre, then the lower rate."""
    if not scores:
        raise ValueError("no grid point was scored")
    finite = {k: v for k, v in scores.items() if math.isfinite(v)}
    if not finite:
        raise ValueError("no grid point has a finite score")
    return max(finite, key=lambda k: (finite[k], -abs(k), -k))


def next_step(scores: Mapping[int, float], steps: int, max_extensions: int) -> int | None:
    """The step to try next: one beyond the edge the best sits on, while fewer than ``max_extensions``
    steps were added on that side; None once the best is inside the grid (or the extensions are spent)."""
    best, tried = choose(scores), sorted(scores)
    if best == tried[0] and -tried[0] < steps + max_extensions:
        return tried[0] - 1
    if best == tried[-1] and tried[-1] < steps + max_extensions:
        return tried[-1] + 1
    return None


def paper_ratio(paper_config: Mapping, method: str, key: str, anchor: str = "longclip") -> float:
    """The method's rate (``key``) over Long-CLIP FT's ``lr`` in the paper's recipes (``config/paper.yaml``):
    GOAL and StructXLIP 5, the adapters 100, FineLIP's aggregators 200, HN-CLIP 1."""
    methods = paper_config["methods"]
    if method not in methods:
        raise KeyError(f"{method!r} has no recipe in the paper config, so it has no paper-ratio rate")
    base = float((methods[anchor].get("train") or {})["lr"])
    recipe = {**(paper_config.get("train") or {}), **(methods[method].get("train") or {})}
    if key not in recipe:
        raise KeyError(f"the paper config's {method!r} recipe has no {key!r}")
    return float(recipe[key]) / base
