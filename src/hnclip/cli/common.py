"""What several verbs share: argument types, the thread count, store verification, table captions.

The counterpart of ``workflow/rules/common.smk``; like every module of :mod:`hnclip.cli` it imports
nothing beyond the standard library at the top, so building the parser stays cheap.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from hnclip import paths
from hnclip.checkpoint_formats import backbone_origin

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


def data_sizes(cells, records=(), summaries=None) -> str:
    """Each benchmark of ``cells`` by its label with its sizes: training pairs (from the run summaries'
    ``n_train``, keyed by the runs' train set) and test images and captions (from the evaluation records), e.g.
    ``My captions: 60 training pairs, 30 test images (45 captions)``, and the test captions the text tower cut
    when a record counts any (``captions_truncated``). What a run on your own data is, in words."""
    labels = {c["eval_benchmark"]: c.get("group") or c["eval_benchmark"] for c in cells}
    tests = {r["eval_benchmark"]: (r.get("n_images"), r.get("n_texts")) for r in records if "eval_benchmark" in r}
    # test captions the text tower cut (the evaluation records' captions_truncated): the most any model cut
    cut: dict[str, dict] = {}
    for r in records:
        found, bench = r.get("captions_truncated") or {}, r.get("eval_benchmark")
        if bench is not None and found.get("count", 0) > cut.get(bench, {}).get("count", 0):
            cut[bench] = found
    trained = {}
    for run_dir, summary in (summaries or {}).items():
        # the run's record, else its folder
        train_set = ((summary.get("run") or {}).get("train_set")
                     or paths.train_set_of_dir(summary.get("run_dir") or run_dir))
        if train_set and summary.get("n_train") is not None:
            trained[train_set] = summary["n_train"]
    parts = []
    for bench, label in labels.items():
        sizes = []
        if bench in trained:
            sizes.append(f"{trained[bench]:,} training pairs")
        if tests.get(bench, (None, None))[0] is not None:
            images, texts = tests[bench]
            sizes.append(f"{images:,} test images" + (f" ({texts:,} captions)" if texts != images else ""))
        if bench in cut:
            sizes.append(f"{cut[bench]['count']:,} test captions cut at {cut[bench].get('context_length', '?')} "
                         "text positions")
        parts.append(f"{label}: {', '.join(sizes)}" if sizes else label)
    return "; ".join(parts)


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
    Snakemake layers them (:func:`hnclip.config.loading.load_config`)."""
    if effective is not None:
        try:
            return json.loads(Path(effective).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as error:
            raise SystemExit(f"{effective}: not the workflow's effective config ({error})") from None
    from hnclip.config.loading import load_config

    return load_config(configfiles)
