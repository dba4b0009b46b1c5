"""What several verbs share: argument types, the thread count, store verification, table captions.

The counterpart of ``workflow/rules/common.smk``; like every module of :mod:`hnclip.cli` it imports
nothing beyond the standard library at the top, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WEIGHTS_DIR = "resources/checkpoints"  # Hub weights, one locked folder per source (hnclip.data.weights)
SPEC_HELP = "experiment spec file (results/specs/<experiment>.json, written by hnclip.plan.write_spec)"


def add_verb(sub, name: str, func, help_text: str) -> argparse.ArgumentParser:
    """A verb's sub-parser, its help doubling as its description, calling ``func(args)``."""
    p = sub.add_parser(name, help=help_text, description=help_text)
    p.set_defaults(func=func)
    return p


def json_arg(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e}): {text[:200]!r}") from e


def set_threads(n: int | None) -> None:
    if n:
        import torch

        torch.set_num_threads(n)


def verify_stores(*dirs) -> None:
    """Re-hash each image store a job reads against the checksum recorded when it was built: a corrupted
    file fails the job before it trains on it (~1 s per GB, once per job; see hnclip.data.image_store)."""
    from hnclip.data.image_store import ImageStore

    for store_dir in dict.fromkeys(str(d) for d in dirs if d):  # each once (a test split read twice)
        ImageStore(store_dir).verify()


def run_folders(paths) -> list[Path]:
    """Run folders, given as folders or as their ``summary.json`` files (what the rules pass)."""
    return [Path(p).parent if Path(p).name == "summary.json" else Path(p) for p in paths]


def scale_words(spec: dict) -> str:
    return {"toy": "toy-scale run (synthetic benchmark, small backbone pretrained in the DAG)",
            "rehearsal": "rehearsal-scale run (paper configuration, random weights, stand-in data)"}.get(
        spec.get("scale"), "paper-scale run")


def caption(spec: dict) -> str:
    return f"{spec.get('experiment', '')}: {scale_words(spec)}"
