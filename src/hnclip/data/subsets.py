"""Nested deterministic fraction subsets of a training split (the paper's data-fraction study).

Each id gets a rank from ``sha256(seed, id)``; a subset of fraction f is the ceil(f * N) ids of
lowest rank. Ranks do not depend on the input order nor on the other fractions, so for one seed the
10 % subset lies inside the 25 % subset, which lies inside the 50 % one: differences between fraction
runs come from the amount of data, not from which images were drawn. SHA-256 rather than ``hash()``
because Python salts ``hash`` of strings per process.
"""

from __future__ import annotations

import hashlib
import math
import numbers
from fractions import Fraction
from pathlib import Path

from hnclip.fileio import write_text_atomic

__all__ = ["read_subset", "subset_ids", "subset_size", "write_subset"]


def subset_size(n: int, fraction) -> int:
    """ceil(fraction * n), at least 1, computed on the fraction's decimal value.

    Exact arithmetic matters: in floats 0.07 * 100 is 7.000000000000001, whose ceiling is 8.
    """
    if isinstance(fraction, bool) or not isinstance(fraction, numbers.Real) or not math.isfinite(fraction):
        raise ValueError(f"fraction must be a number in (0, 1], got {fraction!r}")
    exact = fraction if isinstance(fraction, Fraction) else Fraction(str(fraction))
    if not 0 < exact <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction!r}")
    return max(1, math.ceil(exact * n))


def _rank(seed, item) -> bytes:
    return hashlib.sha256(f"{seed}\x00{item}".encode()).digest()


def subset_ids(ids, fraction, seed) -> list:
    """The ids of the ``fraction`` subset for ``seed``, in the order they appear in ``ids``.

    Deterministic for (set of ids, seed); nested across fractions for one seed. Ids are ranked by
    their ``str``; duplicates raise ValueError.
    """
    ids = list(ids)
    if not ids:
        raise ValueError("cannot draw a subset of an empty id list")
    size = subset_size(len(ids), fraction)
    seen = set()
    for item in ids:
        if item in seen:
            raise ValueError(f"duplicate id {item!r} in the ids to subset")
        seen.add(item)
    # str(item) breaks ties between ranks, which would otherwise follow the input order.
    chosen = set(sorted(ids, key=lambda item: (_rank(seed, item), str(item)))[:size])
    return [item for item in ids if item in chosen]


def write_subset(ids, path) -> None:
    """One id per line (UTF-8, "\\n" line ends), written atomically."""
    lines = []
    for item in ids:
        text = str(item)
        if not text or text != text.strip() or "\n" in text or "\r" in text:
            raise ValueError(f"id {item!r} cannot be written one per line to {path}")
        lines.append(text + "\n")
    write_text_atomic(path, "".join(lines))


def read_subset(path) -> list[str]:
    """Ids written by :func:`write_subset`, in file order; blank lines and repeats raise ValueError."""
    path = Path(path)
    ids, seen = [], {}
    with open(path, encoding="utf-8", newline="") as f:
        for lineno, line in enumerate(f, start=1):
            text = line.rstrip("\r\n")
            if not text.strip():
                raise ValueError(f"{path}:{lineno}: blank line in a subset file")
            if text in seen:
                raise ValueError(f"{path}:{lineno}: id {text!r} repeats line {seen[text]}")
            seen[text] = lineno
            ids.append(text)
    return ids
