"""What several verbs share: argument types, the thread count, store verification, table captions.

The counterpart of ``workflow/rules/common.smk``; like every module of :mod:`hnclip.cli` it imports
nothing beyond the standard library at the top, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hnclip import paths
from hnclip.analysis.data_sizes import data_sizes
from hnclip.checkpoint_formats import backbone_origin

WEIGHTS_DIR = paths.WEIGHTS_DIR  # Hub weights, one locked folder per source (hnclip.data.weights)
SPEC_HELP = f"experiment spec file ({paths.spec_path('<experiment>')}, written by hnclip.plan.write_spec)"


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


def backbone_words(origin: dict | None) -> str:
    """The backbone a spec's runs fine-tuned, in words, from its ``backbone`` (:func:`hnclip.plan.grid.backbone_origin`):
    a caption must not say "pretrained in the DAG" of a released or converted one."""
    if not origin:
        return "backbone not recorded"
    return backbone_origin(origin.get("source")).describe(origin.get("name"))


def scale_words(spec: dict) -> str:
    """What a spec's numbers are from: its scale and, at toy scale, the data and the backbone's source."""
    if spec.get("scale") == "toy":
        return f"toy-scale run (synthetic benchmark, {backbone_words(spec.get('backbone'))})"
    if spec.get("scale") == "paper" and spec.get("backbone"):
        return f"paper-scale run ({backbone_words(spec['backbone'])})"
    return {"rehearsal": "rehearsal-scale run (paper configuration, random weights, stand-in data)",
            "own": "run on your data"}.get(spec.get("scale"), "paper-scale run")


def caption(spec: dict, records=(), summaries=None) -> str:
    """A table's caption: its experiment and what its numbers are from (on your data: the benchmarks and sizes)."""
    name = {"released": "released checkpoints beside the retrained ones, every one scored with this pipeline's "
                        "resize and centre crop (torchvision), not its authors' (GOAL and StructXLIP crop with "
                        "transformers' image processor, which rounds odd margins the other way)"}.get(
        spec.get("experiment"), spec.get("experiment", ""))
    if spec.get("scale") == "own":
        return f"{name}: {scale_words(spec)}, {data_sizes(spec.get('cells', []), records, summaries)}"
    return f"{name}: {scale_words(spec)}"


def workflow_config(configfiles, effective: Path | None = None) -> dict:
    """The workflow config a verb reads: the effective config the workflow wrote (``results/config.json``,
    already validated and filled by Snakemake, read as it is), else config files layered and validated as
    Snakemake layers them (:func:`hnclip.workflow_config.load_config`)."""
    if effective is not None:
        try:
            return json.loads(Path(effective).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise SystemExit(f"{effective}: not the workflow's effective config ({error})") from None
    from hnclip.workflow_config import load_config

    return load_config(configfiles)
