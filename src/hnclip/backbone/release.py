"""Releasing a backbone: the model folder the embedded default starts from, with its card and its figures.

``snakemake backbone_release`` rebuilds the toy backbone from nothing with the recorded recipe (the config's
``pretrain`` section) and calls :func:`write_release`: the model files, ``release.json`` (what was built, from
what recipe, at which commit, on which CPU with which kernels, in how many minutes, and its regime figures,
:mod:`hnclip.backbone.figures`) and ``README.md``, the card generated from it. :func:`compare_releases` sets a
rebuilt release beside the shipped one: the same recipe on another CPU trains other weights (its kernels
round differently), so what a rebuild should reproduce is the figures, within their noise, not the digest.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from pathlib import Path

from hnclip.backbone.released import CARD_FILE, RECORDED_FILES
from hnclip.fileio import write_json_atomic, write_text_atomic
from hnclip.hashing import sha256_file
from hnclip.model_files import MODEL_JSON, MODEL_WEIGHTS, RELEASE_FILE

__all__ = ["FIGURE_ROWS", "compare_releases", "recipe_digest", "render_card", "write_release"]

RELEASE_FORMAT = 1
# the card's and the comparison's rows: (label, path into release.json's figures, format)
FIGURE_ROWS = (
    ("logit scale s", ("logit_scale",), "{:.1f}"),
    ("train micro-batch: mean caption cosine", ("train", "mean_offdiag"), "{:.3f}"),
    ("train micro-batch: hardest caption cosine", ("train", "mean_hardest"), "{:.3f}"),
    ("train micro-batch: negatives with cosine >= 0.8", ("train", "frac_ge_0.8"), "{:.1%}"),
    ("train micro-batch: holds a pair >= 0.9", ("train", "pair_share"), "{:.1%}"),
    ("train micro-batch: standard InfoNCE, median", ("train", "infonce_median"), "{:.2g}"),
    ("train micro-batch: InfoNCE < 1e-3 (saturated)", ("train", "saturated_share"), "{:.1%}"),
    ("train captions: effective dimensions", ("train", "effective_dimensions"), "{:.1f}"),
)


def recipe_digest(recipe: Mapping) -> str:
    """sha256 of the recipe as canonical JSON (sorted keys): two builds from the same recipe share it."""
    return hashlib.sha256(json.dumps(recipe, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _minutes(timing_files: Mapping[str, Path]) -> dict[str, float]:
    """Minutes per job from Snakemake's benchmark files (tab-separated, first column ``s``)."""
    minutes = {}
    for job, path in timing_files.items():
        lines = Path(path).read_text().splitlines()
        header, values = lines[0].split("\t"), lines[1].split("\t")
        minutes[job] = round(float(values[header.index("s")]) / 60, 2)
    minutes["total"] = round(sum(minutes.values()), 2)
    return minutes


def write_release(name: str, model_dir, out_dir, recipe: Mapping, figures: Mapping, stage_summaries: Mapping,
                  timing_files: Mapping[str, Path]) -> dict:
    """Write the release folder ``out_dir`` (model files, ``release.json``, ``README.md``); return release.json.

    ``stage_summaries``: stage name -> the training stage's ``summary.json`` (its commit, CPU and kernels,
    torch version); ``timing_files``: job name -> Snakemake benchmark file of the jobs that built it.
    """
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for file in (MODEL_WEIGHTS, MODEL_JSON):
        shutil.copyfile(model_dir / file, out_dir / file)
    summaries = {stage: json.loads(Path(path).read_text()) for stage, path in stage_summaries.items()}
    last = summaries[list(summaries)[-1]]
    spec = json.loads((out_dir / MODEL_JSON).read_text())["spec"]
    release = {
        "format": RELEASE_FORMAT,
        "name": name,
        # what hnclip.backbone.released.check_release_record compares an installed folder against
        **{key: sha256_file(out_dir / file) for file, key in RECORDED_FILES.items()},
        "architecture": {"name": spec.get("name"), "image_size": spec["config"]["vision_cfg"]["image_size"],
                         "context_length": spec["context_length"], "frozen_positions": spec["frozen_positions"],
                         "parameters": _parameter_count(out_dir)},
        "recipe": dict(recipe),
        "recipe_sha256": recipe_digest(recipe),
        "built": {"git_commit": last.get("git_commit"), "cpu_kernels": last.get("cpu_kernels"),
                  "torch_version": last.get("torch_version"), "device": last.get("device"),
                  "minutes": _minutes(timing_files),
                  "stages": {stage: {"steps": s.get("steps"), "samples_seen": s.get("samples_seen"),
                                     "world_size": s.get("world_size"), "final_loss": s.get("final_loss")}
                             for stage, s in summaries.items()}},
        "figures": dict(figures),
    }
    write_json_atomic(out_dir / RELEASE_FILE, release, sort_keys=True)
    write_text_atomic(out_dir / CARD_FILE, render_card(release))
    return release


def _parameter_count(folder: Path) -> int:
    from safetensors.torch import load_file

    return int(sum(t.numel() for t in load_file(str(folder / MODEL_WEIGHTS)).values()))


def _figure(release: Mapping, path: tuple[str, ...]):
    value = release.get("figures", {})
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


def _rows(release: Mapping) -> list[tuple[str, str]]:
    rows = []
    for label, (i2t, t2i) in _zeroshot_rows(release):
        rows.append((label, f"{i2t:.1f} / {t2i:.1f}"))
    for label, path, fmt in FIGURE_ROWS:
        value = _figure(release, path)
        rows.append((label, "–" if value is None else fmt.format(value)))
    return rows


def _zeroshot_rows(release: Mapping) -> list[tuple[str, tuple[float, float]]]:
    return [(f"zero-shot R@1 I→T / T→I, {label} ({z['n_images']:,} images)", (z["i2t_r1"], z["t2i_r1"]))
            for label, z in sorted(release.get("figures", {}).get("zeroshot", {}).items())]


def render_card(release: Mapping) -> str:
    """The model card (Markdown) of a release: what it is, how it was built, what it measures, its limits."""
    arch, built = release["architecture"], release["built"]
    pretrain = release["recipe"].get("pretrain", {})
    pool = pretrain.get("pool", {}).get("size")
    kernels = built.get("cpu_kernels") or {}
    figure_lines = "\n".join(f"| {label} | {value} |" for label, value in _rows(release))
    stages = "\n".join(f"- {stage}: {s['steps']} steps, {s['samples_seen']:,} samples, {s['world_size']} "
                       f"process(es), final loss {s['final_loss']:.4g}" for stage, s in built["stages"].items())
    minutes = ", ".join(f"{job} {m:g}" for job, m in built["minutes"].items())
    return f"""---
license: mit
tags: [hnclip, toy-scale, synthetic-data, dual-encoder]
---
# {release['name']}: a toy Long-CLIP for hnclip-repro

**Toy scale.** A small dual encoder (open_clip layout, {arch['parameters']:,} parameters, {arch['image_size']} px
images, {arch['context_length']} text positions) pretrained on procedurally rendered synthetic scenes. It plays the
part Long-CLIP-L plays in the HN-CLIP paper (a strong, released initialisation for dense-caption fine-tuning) in
hnclip-repro's embedded default. Its numbers are toy-scale results on synthetic data, never the paper's.

## Files
- `model.safetensors` (sha256 `{release['weights_sha256']}`), `model.json` (the architecture,
  sha256 `{release['spec_sha256']}`): `hnclip.models.load_model` reads the folder.
- `release.json`: everything on this card, as data.

## How it was built
`snakemake backbone_release` rebuilds it from nothing (the config's `pretrain` section, recipe sha256
`{release['recipe_sha256'][:16]}…`): a pool of {f"{pool:,}" if pool else "?"} fresh scenes that holds
no benchmark scene, CLIP on their short captions at {pretrain.get('context_length', 77)} positions, Long-CLIP's
stretch to {arch['context_length']} positions, then Long-CLIP-style training on their long captions.
{stages}

Built at commit `{built.get('git_commit')}` with torch {built.get('torch_version')} on {kernels.get('cpu', '?')}
(CPU kernels `{kernels.get('setting', '?')}`, capability {kernels.get('capability', '?')}); minutes: {minutes}.
The same recipe on another CPU trains other weights (its kernels round differently): compare the figures
below, not the digest.

## Figures (before any fine-tuning)
| figure | value |
|---|---|
{figure_lines}

The regime conditions these feed (strong initialisation, caption geometry, saturation, ...) are judged with
the fine-tuning runs by `hnclip regime`, beside the paper's figures, in the embedded default's report.

## Limitations
- Synthetic scenes only (coloured shapes on a 3x3 grid, template captions): it knows nothing of natural
  images or free text, and its tokenizer (CLIP's BPE) is far larger than its vocabulary needs.
- Chosen so the embedded default meets the paper's regime conditions on the synthetic benchmark, judged on
  the validation split; not tuned for, and not evidence about, any other use.

## Licence
MIT, as hnclip-repro.
"""


def compare_releases(new: Mapping, shipped: Mapping | None) -> str:
    """The digest and figures of a rebuilt release beside the shipped one's, as plain text."""
    width = max(len(label) for label, _ in _rows(new)) + 2
    head = f"{'':{width}}{'rebuilt':>22}  {'shipped':>22}"
    lines = [f"backbone release {new['name']}", head]
    old = dict(_rows(shipped)) if shipped else {}
    lines.append(f"{'weights sha256':{width}}{new['weights_sha256'][:20]:>22}  "
                 f"{(shipped or {}).get('weights_sha256', '–')[:20]:>22}")
    lines.append(f"{'recipe sha256':{width}}{new['recipe_sha256'][:20]:>22}  "
                 f"{(shipped or {}).get('recipe_sha256', '–')[:20]:>22}")
    for label, value in _rows(new):
        lines.append(f"{label:{width}}{value:>22}  {old.get(label, '–'):>22}")
    if shipped:
        same = new["weights_sha256"] == shipped.get("weights_sha256")
        lines.append("identical weights" if same else
                     "different weights (another CPU or kernel setting trains other weights: compare the figures)")
    return "\n".join(lines)
