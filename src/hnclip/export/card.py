"""The model card written beside every export: scale, results rows with their intervals, training data,
recipe, architecture, limitations, licence and provenance.

The scale (``hnclip export --scale``, the workflow config's ``scale``: toy, paper, rehearsal, or any other
word a config uses) heads the card and tags it, so a toy-scale number is never read as the paper's on
the Hub (``hnclip push`` uploads these cards). The architecture shows the model's own text positions
(a Long-CLIP stretch makes them 248 where the base config says 77).

Rows come from the run's evaluation records (``results/evals/<run>/<benchmark>.json``): every Recall@K
they hold, with the percentile-bootstrap interval of :mod:`hnclip.analysis.bootstrap` (test images
resampled, their captions with them) wherever a record stores its per-query ranks, the same interval the
tables print for a one-seed cell. Provenance is the run's ``summary.json``: config hash, data fingerprint,
the commit it was trained at, the recipe, and the sha256 of our checkpoint; the card adds the sha256 of every
exported file and the commit the export ran at.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hnclip import paths

__all__ = ["CARD_FILE", "ResultRow", "build_model_card", "card_architecture", "discover_evals", "read_run",
           "results_rows", "scale_statement"]

CARD_FILE = "README.md"
_METRIC = re.compile(r"^(i2t|t2i)_r(\d+)$")
_DIRECTION = {"i2t": "image -> text", "t2i": "text -> image"}
_LIBRARY = {"longclip": None, "open_clip": "open_clip", "transformers": "transformers"}
_OWNER = {"longclip": "Long-CLIP's", "open_clip": "open_clip's", "transformers": "transformers'"}
# what each scale of the workflow config means for the numbers on the card; another word is shown as it is
_SCALES = {
    "toy": "**Toy scale.** A small model fine-tuned by hnclip-repro's embedded default on procedurally rendered "
           "synthetic scenes. Its numbers are toy-scale results on synthetic data: not the HN-CLIP paper's, and "
           "not evidence about natural images.",
    "paper": "**Paper scale.** Fine-tuned with the HN-CLIP paper's recipe on its benchmark data by hnclip-repro; "
             "its numbers are this reproduction's (one seed, intervals below), not the paper's own.",
    "rehearsal": "**Rehearsal scale.** Trained on stand-in files with capped steps to rehearse the paper's grid: "
                 "its numbers mean nothing.",
}
LICENCE = "MIT"  # hnclip-repro's own (LICENSE, pyproject.toml)


@dataclass(frozen=True)
class ResultRow:
    benchmark: str
    split: str
    metric: str
    value: float
    interval: tuple[float, float] | None
    n_images: int | None
    n_texts: int | None
    source: str


@dataclass
class RunInfo:
    """What the card says about the run: its summary.json (may be empty), where it was read, and the run's
    fields (train_set, method, gamma, fraction, seed) when its folder is ``results/runs/<run>``."""

    summary: dict = field(default_factory=dict)
    path: Path | None = None
    fields: dict | None = None


def _runs_index(run_dir: Path) -> tuple[tuple[str, ...], int] | None:
    parts = Path(run_dir).resolve().parts
    for i in range(len(parts) - 1, 0, -1):
        if parts[i - 1:i + 1] == Path(paths.RUNS_DIR).parts:
            return parts, i
    return None


def run_fields(run_dir: Path | None) -> dict | None:
    """The run's wildcards from ``.../results/runs/<train_set>/<method>/g<gamma>/f<fraction>/s<seed>``."""
    found = _runs_index(run_dir) if run_dir is not None else None
    if found is None:
        return None
    parts, i = found
    rest = parts[i + 1:]
    if len(rest) != 5 or not (rest[2].startswith("g") and rest[3].startswith("f") and rest[4][:1] == "s"
                              and rest[4][1:].isdigit()):
        return None
    return {"train_set": rest[0], "method": rest[1], "gamma": rest[2][1:], "fraction": rest[3][1:],
            "seed": int(rest[4][1:])}


def read_run(run_dir: Path | None) -> RunInfo:
    if run_dir is None:
        return RunInfo()
    from hnclip.analysis.records import load_summary

    summary = load_summary(run_dir)
    return RunInfo(summary, Path(summary["run_dir"]) / "summary.json", run_fields(Path(run_dir)))


def discover_evals(run_dir: Path | None) -> list[Path]:
    """``results/evals/<run>/*.json`` of a run folder ``results/runs/<run>`` (none elsewhere)."""
    found = _runs_index(run_dir) if run_dir is not None else None
    if found is None:
        return []
    parts, i = found
    evals_dir = Path(*parts[:i - 1], paths.eval_path(Path(*parts[i + 1:]).as_posix())).parent
    return sorted(evals_dir.glob("*.json")) if evals_dir.is_dir() else []


def _same_run(a: Mapping, b: Mapping) -> bool:
    from hnclip.analysis.records import RUN_FIELDS
    from hnclip.plan import format_number

    return all(format_number(a[f]) == format_number(b[f]) if f in ("gamma", "fraction", "seed")
               else str(a[f]) == str(b[f]) for f in RUN_FIELDS)


def results_rows(eval_paths: Sequence[Path], settings=None, run: Mapping | None = None) -> list[ResultRow]:
    """One row per (record, Recall@K) in ``eval_paths``; an interval where the record has its ranks.

    With ``run`` (the summary's run fields), a record of another run is refused naming its file.
    """
    from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Samples, interval, outcomes_of
    from hnclip.analysis.records import load_eval

    settings = settings or BootstrapSettings()
    rows = []
    for path in eval_paths:
        record = load_eval(path)
        if run is not None and not _same_run(record["run"], run):
            raise ValueError(f"evaluation record {path}: run {record['run']} is not the exported run {dict(run)}")
        outcomes = outcomes_of(record)
        samples = Samples.from_pairs([(str(record["run"].get("seed", "")), outcomes)]) if outcomes else None
        metrics = []
        for metric, value in record["metrics"].items():
            match = _METRIC.match(metric)
            if match:
                metrics.append((match.group(1), int(match.group(2)), metric, float(value)))
        for _, _, metric, value in sorted(metrics):
            low_high = interval(Estimate.of(samples, metric, value), settings) if samples else None
            rows.append(ResultRow(str(record["eval_benchmark"]), str(record.get("split", "test")), metric, value,
                                  low_high, record.get("n_images"), record.get("n_texts"), str(path)))
    return rows


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 24), b""):
            digest.update(block)
    return digest.hexdigest()


def _export_commit() -> str | None:
    try:
        result = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).parent, capture_output=True,
                                text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (result.stdout.strip() or None) if result.returncode == 0 else None


def _usage(fmt: str, files: Sequence[Path], context_length: int, mean, std, image_size: int,
           interpolation: str = "bicubic") -> str:
    names = [f.name for f in files]
    if fmt == "longclip":
        return ("```python\n# Long-CLIP's repository (github.com/beichenzbc/Long-CLIP), model/longclip.py\n"
                "from model import longclip\n"
                "model, preprocess = longclip.load(\"longclip.pt\", device=\"cpu\")\n"
                "tokens = longclip.tokenize([\"a long caption ...\"], truncate=True)  # 248 positions\n"
                "features = model.encode_text(tokens)\n```\n\n"
                "`longclip.load` rounds the Linear/Conv weights and both projections through float16 "
                "(`convert_weights`) before running in float32 on the CPU; its features equal ours up to that "
                "rounding.\n")
    if fmt == "open_clip":
        config = next(n for n in names if n.endswith(".json") and n != "open_clip_config.json")
        name = config.removesuffix(".json")
        return ("```python\nimport open_clip\n"
                f"open_clip.add_model_config(\"{config}\")\n"
                "model, _, preprocess = open_clip.create_model_and_transforms(\n"
                f"    \"{name}\", pretrained=\"open_clip_model.safetensors\",\n"
                f"    image_mean={list(mean)}, image_std={list(std)}, image_interpolation=\"{interpolation}\")\n"
                f"tokenizer = open_clip.get_tokenizer(\"{name}\")  # CLIP BPE, {context_length} positions\n"
                "# or, mean/std/interpolation read from open_clip_config.json:\n"
                "# open_clip.create_model_and_transforms(\"local-dir:.\")\n```\n")
    return ("```python\nfrom transformers import CLIPModel, CLIPProcessor\n"
            "from torchvision import transforms\n"
            "model = CLIPModel.from_pretrained(\".\")\n"
            "processor = CLIPProcessor.from_pretrained(\".\", backend=\"pil\")\n"
            "# hnclip's (and open_clip's) geometry, pixel for pixel: torchvision's resize and centre crop first\n"
            f"side = {image_size}\n"
            "geometry = transforms.Compose([transforms.Resize(side, "
            f"transforms.InterpolationMode.{interpolation.upper()}),\n"
            "                               transforms.CenterCrop(side)])\n"
            "inputs = processor(text=[\"a long caption ...\"], images=[geometry(image)], do_resize=False,\n"
            f"                   do_center_crop=False, padding=\"max_length\", max_length={context_length},\n"
            "                   truncation=True, return_tensors=\"pt\")\n"
            "outputs = model(**inputs)  # outputs.image_embeds, outputs.text_embeds (normalised)\n```\n\n"
            "The processor alone (resize and crop included) also works: its default torchvision backend's "
            f"{interpolation} "
            "resize differs slightly from PIL's, which our image store uses, and both its backends put an odd crop "
            "margin's extra pixel on the other side than open_clip and our store.\n")


def scale_statement(scale: str | None) -> str:
    """The card's first word on what its numbers are: the scale's meaning, or the word as the config has it."""
    if scale is None:
        return ("**Scale not stated** (exported without `hnclip export --scale`): treat its numbers as unlabelled; "
                "the workflow's `export` rule states the config's scale.")
    return _SCALES.get(scale, f"**Scale: {scale}** (the workflow config's `scale`).")


def card_architecture(model) -> dict:
    """The model's spec with its own text positions in ``text_cfg.context_length`` (the base config's
    count stays in ``base_context_length`` when a stretch changed it)."""
    spec = json.loads(json.dumps(model.spec))
    text = spec.get("config", {}).get("text_cfg")
    if isinstance(text, dict) and text.get("context_length") != model.context_length:
        text["base_context_length"] = text.get("context_length")
        text["context_length"] = model.context_length
    return spec


def _dataset_terms(train_set: str | None) -> str | None:
    """The training data's licence as hnclip's source list records it, if it does."""
    if not train_set:
        return None
    from hnclip.data.download import load_sources

    try:
        entry = load_sources().get(train_set)
    except (OSError, ValueError):
        return None
    return entry.get("licence") if entry else None


def _training_data(run: RunInfo, scale: str | None) -> list[str]:
    summary, fields = run.summary, run.fields or {}
    train_set = fields.get("train_set")
    lines = ["## Training data", ""]
    if not train_set and not summary:
        return lines + ["Unknown: no run summary (summary.json) was given.", ""]
    caption = _caption_origin(summary, _source_record(summary))
    count = summary.get("n_train")
    lines.append(f"- fine-tuned on: `{train_set or '?'}`" + (f", {count:,} images" if isinstance(count, int) else "")
                 + (f", {caption}" if caption else ""))
    if (summary.get("run") or {}).get("train_manifest"):
        lines.append(f"- manifest: `{summary['run']['train_manifest']}`")
    truncated = summary.get("captions_truncated") or {}
    if truncated.get("count"):
        lines.append(f"- {truncated['count']:,} training captions were cut at the text tower's "
                     f"{truncated.get('context_length', '?')} positions")
    terms = _dataset_terms(train_set)
    if scale == "toy" or train_set == "synthetic":
        lines.append("- terms: synthetic scenes generated by hnclip-repro's own code (MIT)")
    elif terms:
        lines.append(f"- terms (hnclip's source list): {terms}")
    else:
        lines.append("- terms: not recorded by hnclip (src/hnclip/data/sources.json); see the data's own")
    return lines + [""]


def _source_record(summary: dict) -> dict:
    """The ``source.json`` that ``hnclip fetch`` wrote beside the run's training manifest (adapter, its settings,
    caption column), or {} when there is none: what the card can say of where the captions came from."""
    manifest = (summary.get("run") or {}).get("train_manifest")
    if not manifest:
        return {}
    try:
        record = json.loads((Path(manifest).parent / "source.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _own_data(source: dict, scale: str | None) -> bool:
    """Whether the run trained on the user's own files (the ``table``/``webdataset`` adapters, or scale own)."""
    from hnclip.data.own import ADAPTERS

    return source.get("adapter") in ADAPTERS or scale == "own"


def _caption_origin(summary: dict, source: dict) -> str | None:
    """Where the training captions were read, in the user's terms: the ``table`` adapter's ``caption_key``
    (open_clip's ``title`` by default), the ``webdataset`` adapter's caption files, else the manifest column.
    The prepared manifest always calls its column ``caption``, which is not the column of the user's files."""
    from hnclip.data.own import DEFAULTS

    adapter = source.get("adapter")
    settings = {**DEFAULTS.get(adapter, {}), **(source.get("adapter_settings") or {})}
    if adapter == "table":
        return f"captions from column `{settings['caption_key']}`"
    if adapter == "webdataset":
        return f"captions from the shards' `.{settings['caption_ext']}` files"
    column = source.get("caption_column") or (summary.get("config") or {}).get("caption_column")
    return f"captions from column `{column}`" if column else None


def _long_clip_style(summary: dict, model) -> bool:
    """Long-CLIP's recipe: a stretched text position table (more than CLIP's 77) or its short-caption term."""
    longclip = (summary.get("config") or {}).get("longclip") or {}
    return model.context_length > 77 or float(longclip.get("short_weight") or 0) > 0


def _method_phrase(summary: dict, model) -> str:
    """How the model was fine-tuned, as the run's recorded config says: plain contrastive fine-tuning (the
    CLIP loss alone, 77 positions) is not called Long-CLIP-style, and HN's margin is named when it was on."""
    config = summary.get("config") or {}
    if not config:
        return "fine-tuned by the hnclip-repro pipeline"
    gamma, token = float(config.get("gamma") or 0), config.get("token_weight")
    framework = config.get("framework") or summary.get("framework")
    if _long_clip_style(summary, model):
        how = "Long-CLIP-style"
    elif framework == "longclip" and token is not None and float(token) == 0:
        how = "plain contrastive fine-tuning, CLIP's loss"
    else:
        how = f"the `{framework}` framework"
    return f"fine-tuned by the hnclip-repro pipeline ({how}" + (f", HN margin gamma {gamma:g})" if gamma else ")")


def _limitations(fmt: str, model, scale: str | None, own: bool = False, train_set: str | None = None) -> list[str]:
    lines = ["## Limitations", ""]
    if scale == "toy":
        lines.append("- Synthetic scenes only (coloured shapes on a grid, template captions): it knows nothing of "
                     "natural images or free text.")
    elif scale == "rehearsal":
        lines.append("- A rehearsal's model: not trained to be used.")
    data = f"on the captions of `{train_set or '?'}`" if own else "with dense captions"
    lines += [f"- Trained and evaluated for image-text retrieval {data}; its text tower reads "
              f"{model.context_length} positions of CLIP's BPE, a longer caption is cut.",
              "- Measured only on the benchmarks under Results, with one seed: the intervals cover test-image "
              "sampling, not seed-to-seed variation.",
              "- Not assessed for bias, safety or any use beyond the benchmarks above."]
    if fmt == "transformers":
        lines.append("- transformers' own `CLIPImageProcessor` places an odd crop margin's extra pixel on the other "
                     "side than open_clip and hnclip do (features differ by ~5e-3 on such images): resize and crop "
                     "with torchvision first, as the usage above does, for hnclip's pixels exactly.")
    return lines + [""]


def _licence(scale: str | None, run: RunInfo) -> tuple[str, list[str]]:
    """(the card's ``license`` metadata, its Licence section)."""
    train_set = (run.fields or {}).get("train_set")
    if scale == "toy":
        return "mit", ["## Licence", "", f"{LICENCE}, as hnclip-repro: the toy backbone is released under it and "
                       "the synthetic scenes are generated by hnclip-repro's own code.", ""]
    init = (run.summary.get("run") or {}).get("init_model_dir") or "the initial model"
    terms = _dataset_terms(train_set)
    return "other", ["## Licence", "",
                     f"The code that trained and exported this model is {LICENCE}-licensed (hnclip-repro). The weights "
                     f"derive from `{init}` and from the training data (`{train_set or '?'}`"
                     + (f": {terms}" if terms else "") + "), whose terms carry over to them: check both before "
                     "using or redistributing it (the Hub's `license: other`).", ""]


def _fmt(value: float) -> str:
    return f"{value:.2f}"


def build_model_card(fmt: str, files: Sequence[Path], model, run: RunInfo, rows: Sequence[ResultRow],
                     settings, model_dir: Path, notes: Sequence[str] = (), scale: str | None = None):
    """The ``huggingface_hub.ModelCard`` of one export (``files``: the exported files, card excluded;
    ``scale``: the workflow config's, None when not given)."""
    from huggingface_hub import ModelCard, ModelCardData

    summary = run.summary
    spec = model.spec
    title = f"{run.fields['train_set']}/{run.fields['method']}" if run.fields else spec.get("name") or "model"
    licence, licence_lines = _licence(scale, run)
    train_set = (run.fields or {}).get("train_set")
    own = _own_data(_source_record(summary), scale)
    long_style = _long_clip_style(summary, model)
    data = ModelCardData(library_name=_LIBRARY[fmt], license=licence,
                         tags=["clip", *(["long-clip"] if long_style else []), "hnclip", "image-text-retrieval",
                               *([f"{scale}-scale"] if scale else [])],
                         datasets=[train_set] if train_set else None,
                         pipeline_tag="zero-shot-image-classification" if fmt != "longclip" else None)
    heading = f"# hnclip export: {title} ({fmt})" + (f", {scale}-scale run" if scale else "")
    lines = [heading, "", scale_statement(scale), "",
             f"A dual encoder {_method_phrase(summary, model)} for image-text retrieval "
             + (f"on your captions (`{train_set or '?'}`)" if own else "with dense captions")
             + f", {model.context_length} text positions; exported in {_OWNER[fmt]} own format.", ""]
    for note in notes:
        lines += [f"> **Note.** {note}", ""]
    lines += ["## Loading", "", _usage(fmt, files, model.context_length, model.image_mean, model.image_std,
                                             model.image_size[0], model.interpolation)]

    lines += _results_lines(rows, settings)
    lines += _training_data(run, scale)
    lines += _recipe_lines(run)

    lines += ["## Architecture", "", f"Text positions: {model.context_length}"
              + (f" (the base architecture's {spec['config']['text_cfg']['context_length']}, stretched)"
                 if spec.get("config", {}).get("text_cfg", {}).get("context_length") not in (None, model.context_length)
                 else "") + ".", "",
              "```json", json.dumps(card_architecture(model), indent=2, sort_keys=True), "```", ""]
    lines += _limitations(fmt, model, scale, own, train_set)
    lines += licence_lines

    lines += _provenance_lines(run, model_dir, files)
    content = f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)
    return ModelCard(content)


def _results_lines(rows: Sequence[ResultRow], settings) -> list[str]:
    """The card's Results section: one Markdown row per recall with its bootstrap interval, or why none."""
    lines = ["## Results", ""]
    if not rows:
        return lines + ["No evaluation records were given for this model.", ""]
    level = f"{100 * settings.confidence:g} %"
    lines += [f"Recall@K in percent; interval: {level} percentile bootstrap over test images (their captions "
              f"resampled with them), {settings.resamples} resamples, seed {settings.seed}; one seed, so "
              "seed-to-seed variation is not in it.", "",
              f"| benchmark | split | direction | K | R@K | {level} interval | images | captions |",
              "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        direction, k = _METRIC.match(row.metric).groups()
        ci = f"[{_fmt(row.interval[0])}, {_fmt(row.interval[1])}]" if row.interval else "n/a (no ranks)"
        lines.append(f"| {row.benchmark} | {row.split} | {_DIRECTION[direction]} | {k} | {_fmt(row.value)} "
                     f"| {ci} | {row.n_images} | {row.n_texts} |")
    return lines + [""]


def _recipe_lines(run: RunInfo) -> list[str]:
    """The card's Recipe section from the run summary: the run, its inputs, the headline settings, the
    recipe and the full training config; or that no summary was given."""
    summary = run.summary
    lines = ["## Recipe", ""]
    if not summary:
        return lines + ["No run summary (summary.json) was given: recipe and provenance unknown.", ""]
    head = {k: summary.get(k) for k in ("framework", "hn_plugin", "seed", "steps", "epochs", "samples_seen",
                                        "n_train", "world_size", "device", "torch_version") if k in summary}
    lines += [f"- run: `{json.dumps(run.fields, sort_keys=True)}`" if run.fields else f"- run: (not a {paths.RUNS_DIR}/ folder)"]
    if summary.get("run"):
        lines.append(f"- inputs: `{json.dumps(summary['run'], sort_keys=True)}`")
    lines += [f"- {k}: `{v}`" for k, v in head.items()]
    return lines + ["", "```json", json.dumps(summary.get("recipe", {}), indent=2, sort_keys=True), "```", "",
                    "<details><summary>full training config</summary>", "", "```json",
                    json.dumps(summary.get("config", {}), indent=2, sort_keys=True), "```", "", "</details>", ""]


def _provenance_lines(run: RunInfo, model_dir: Path, files: Sequence[Path]) -> list[str]:
    """The card's Provenance section: the run's hashes and commits, the weights' sha256 and each exported file's."""
    from hnclip.models.io import MODEL_WEIGHTS

    summary = run.summary
    ours = Path(model_dir) / MODEL_WEIGHTS
    provenance = {
        "config_hash": summary.get("config_hash"),
        "data_fingerprint": summary.get("data_fingerprint"),
        "git_commit (training)": summary.get("git_commit"),
        "git_commit (export)": _export_commit(),
        "checkpoint_sha256 (run summary)": summary.get("checkpoint_sha256"),
        f"sha256 of {ours}": _sha256(ours) if ours.is_file() else None,
        "run summary": str(run.path) if run.path else None,
    }
    lines = ["## Provenance", "", "| | |", "|---|---|"]
    lines += [f"| {k} | `{v}` |" for k, v in provenance.items()]
    lines += ["", "Exported files:", "", "| file | sha256 |", "|---|---|"]
    lines += [f"| {f.name} | `{_sha256(f)}` |" for f in sorted(files)]
    return lines + [""]
