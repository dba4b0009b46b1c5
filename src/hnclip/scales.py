"""What a number is from, carried by every table, figure and report: one list, read by the analysis and by the
CLI's parsers (this module imports nothing, so building a parser stays cheap)."""

from __future__ import annotations

__all__ = ["SCALES", "scale_label", "scale_runs"]

# the embedded default, the paper grid, the paper grid rehearsed on stand-ins, a fine-tune on your own data
# (config/finetune.yaml); workflow/schemas/config.schema.yaml's `scale` enum lists the same
SCALES = ("toy", "paper", "rehearsal", "own")


def scale_label(scale: str) -> str:
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {', '.join(SCALES)}, got {scale!r}")
    return "run on your data" if scale == "own" else f"{scale}-scale run"


def scale_runs(scale: str) -> str:
    """The plural of :func:`scale_label`, for captions over several runs: "runs on your data", not the
    "run on your datas" that appending an s gives."""
    return "runs on your data" if scale_label(scale) == "run on your data" else f"{scale}-scale runs"
