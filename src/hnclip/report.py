"""Render the one-file HTML report: scale banner, claims, every table and figure, paper vs ours, provenance.

On your own data (scale ``own``, config/finetune.yaml) the report is about your data alone: its banner and opening
paragraph name your benchmarks with their sizes and the backbone it started from, the tables come first, and no
claim, regime, caption geometry or paper-vs-ours section is shown (nothing there would be about your data).

The file is self-contained (figures embedded as base64 PNG, CSS inline, no scripts, no external assets)
so it can be mailed, archived or opened offline on a phone; tables scroll sideways instead of shrinking.
Every number carries its scale: the banner, each table caption and the "ours" column say whether it is a
toy-scale or a paper-scale run, because a toy number read as the paper's is the one mistake to prevent.

This module renders; the paper-vs-ours rows it shows are found by :mod:`hnclip.analysis.published`.
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

import jinja2
import markupsafe

from hnclip import paths
from hnclip.analysis.claims import VERDICTS
from hnclip.analysis.data_sizes import data_sizes
from hnclip.analysis.premise import PAPER_GEOMETRY
from hnclip.analysis.published import compare_published, format_number, load_published
from hnclip.analysis.table_format import scale_label

__all__ = ["DEFAULT_PUBLISHED", "TEMPLATE_DIR", "own_banner", "render_report", "render_report_from_files"]

TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "report"
DEFAULT_PUBLISHED = TEMPLATE_DIR / "published_numbers.yaml"
TEMPLATE = "report.html.j2"
BANNERS = {
    "toy": "Toy-scale results on a synthetic benchmark: not the paper's numbers.",
    "paper": "Paper-scale results (the paper's benchmarks and backbone): compare with the paper's numbers below.",
    "rehearsal": "Rehearsal of the paper configuration: random weights, a few generated images per benchmark and "
                 "capped steps, to check that every job runs. Its numbers mean nothing and are not the paper's.",
    # a run on your own data names your benchmarks and their sizes (own_banner), never the paper's
    "own": "Results on your data",
}
_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
VERDICT_CLASS = dict(zip(VERDICTS, ("holds", "fails", "noise", "unknown", "collapsed"), strict=True))


# ---------------------------------------------------------------------------------------------- render
def _premise_rows(premise: Mapping | None) -> list[dict]:
    """One row per regime figure: ours (None: not measured), the paper's, the definition, the runs behind it."""
    from hnclip.analysis.premise import DEFINITIONS, PAPER, PREMISE_KEYS

    if not premise:
        return []
    sources = premise.get("sources", {})
    return [{"key": key, "ours": premise.get(key), "paper": PAPER[key], "definition": DEFINITIONS[key],
             "runs": len(sources.get(key, []))} for key in PREMISE_KEYS]


def _regime_rows(regime: Mapping[str, Mapping] | None) -> list[dict]:
    """Per benchmark, its regime conditions (:mod:`hnclip.analysis.regime`) as table rows."""
    marks = {"met": ("✓", "holds"), "not met": ("✗", "fails"), "undecided": ("?", "undecided"),
             "not measured": ("–", "unknown")}
    legacy = {True: "met", False: "not met", None: "not measured"}  # a regime file written before decisions
    out = []
    for benchmark, data in (regime or {}).items():
        rows = []
        for c in data["conditions"]:
            decision = c.get("decision") or legacy[c["met"]]
            rows.append({"key": c["key"], "label": c["label"], "ours": c["ours"], "target": c["target"],
                         "paper": c.get("paper") or "—", "mark": marks[decision][0], "cls": marks[decision][1],
                         "decision": decision, "definition": c["definition"]})
        near = data.get("near_duplicates") or {}
        identity = data.get("backbone_identity") or {}
        kernels = identity.get("cpu_kernels") or {}
        out.append({"benchmark": benchmark, "rows": rows, "met": data.get("met", 0), "total": len(rows),
                    "undecided": sum(r["decision"] == "undecided" for r in rows),
                    "n_test": data.get("n_test_images"), "plain_runs": len(data.get("plain_runs", [])),
                    "near_definition": near.get("definition")
                    or f"caption cosine ≥ {data.get('near_duplicate_cosine')}",
                    "near_test": near.get("test"), "near_train": near.get("train"),
                    "near_batches": near.get("micro_batches"), "weights": identity.get("weights"),
                    "kernels": kernels.get("setting"), "cpu": kernels.get("cpu"),
                    "release": identity.get("release")})
    return out


def _geometry_rows(name: str, geometry: Mapping) -> dict:
    """A geometry result with ``batches``: every batch size measured (a result written before sizes were
    listed is its one batch)."""
    batches = geometry.get("batches") or [{**geometry, "loss_batch": geometry.get("loss_batch", False)}]
    return {"name": name, **geometry, "batches": batches}


PAPER_BENCHMARKS = ("DOCCI", "DCI", "Long-DCI", "Urban-1K")


def _fewer_benchmarks(specs: Mapping, scale: str) -> str:
    """A note when the main table has fewer benchmarks than the paper's four, so counts over benchmarks
    (columns, directions) are not read against the paper's; "" otherwise."""
    main = specs.get("main")
    if not main:
        return ""
    groups = list(dict.fromkeys(c["group"] for c in main["cells"] if not c.get("zeroshot")))
    if len(groups) >= len(PAPER_BENCHMARKS):
        return ""
    stand_in = " standing in for the paper's" if scale == "toy" else ""
    return (f"this run's main table has {len(groups)} benchmark{'s' if len(groups) != 1 else ''} "
            f"({', '.join(map(str, groups))}){stand_in}, the paper's {len(PAPER_BENCHMARKS)} "
            f"({', '.join(PAPER_BENCHMARKS)}): counts over benchmarks (columns, directions, combinations) are "
            "marked not comparable in Paper vs ours, and a claim about all four is tested on these.")


def own_banner(specs: Mapping[str, Mapping], records: list[Mapping], provenance: list[Mapping]) -> tuple[str, str]:
    """(banner, sizes) of a report on your own data: every benchmark the specs evaluate, by its label, with its
    training pairs and test images (from the run summaries and evaluation records)."""
    cells = [c for spec in specs.values() for c in spec.get("cells", [])]
    sizes = data_sizes(cells, records, {str(s.get("run_dir")): s for s in provenance})
    labels = ", ".join(dict.fromkeys(c.get("group") or c["eval_benchmark"] for c in cells))
    return f"Results on your data: {labels}. Not the paper's benchmarks; no claim of the paper is judged.", sizes


def _embed_png(path: Path) -> str:
    data = Path(path).read_bytes()
    if not data.startswith(_PNG_MAGIC):
        raise ValueError(f"figure {path} is not a PNG file")
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _strip_suffix(path) -> str:
    path = Path(path)
    return str(path.with_suffix("")) if path.suffix in (".csv", ".html", ".md", ".tex") else str(path)


def _recipe_text(recipe: Mapping | None) -> str:
    """A run's effective optimisation recipe (``summary.json``'s ``recipe``) in one line."""
    if not recipe:
        return ""
    parts = [f"lr {recipe['lr']:g}"]
    if any(str(g.get("name", "")).startswith("module_") for g in recipe.get("groups", [])):
        parts.append(f"modules {recipe['module_lr']:g}")
    parts += [f"wd {recipe['weight_decay']:g}", f"warmup {recipe['warmup_steps']}", str(recipe["schedule"]),
              f"label smoothing {recipe['label_smoothing']:g}"]
    if recipe.get("grad_clip"):
        parts.append(f"clip {recipe['grad_clip']:g}")
    return ", ".join(parts)


def _hn_meanings(provenance: Iterable[Mapping]) -> list[dict]:
    """What "+HN" trained for each framework of the runs shown (the plug-in table's legend)."""
    meanings = {}
    for s in provenance:
        if s.get("framework") and s.get("hn_plugin"):
            meanings.setdefault(s["framework"], s["hn_plugin"])
    return [{"framework": k, "meaning": v} for k, v in meanings.items()]


def _precision_text(summary: Mapping) -> str:
    """The precision a run trained in: the summary's resolved ``precision``, or for a summary written before it
    was recorded, its config's, ``auto`` resolved as :func:`hnclip.training.runtime.resolve_runtime` does
    (bf16 on CUDA, fp32 elsewhere)."""
    if summary.get("precision"):
        return str(summary["precision"])
    configured = str((summary.get("config") or {}).get("precision") or "auto")
    if configured != "auto":
        return configured
    return "bf16" if summary.get("device_type") == "cuda" else "fp32"


def _skipped_text(summary: Mapping) -> str:
    """fp16's steps the gradient scaler skipped (``skipped_steps``, weights unchanged) of the run's steps; a
    dash for the precisions without a scaler, which skip none."""
    if summary.get("skipped_steps") is None:
        return "–"
    return f"{int(summary['skipped_steps'])} of {summary.get('steps', '?')}"


def _provenance_rows(provenance: Iterable[Mapping]) -> list[dict]:
    rows = []
    for s in provenance:
        run = s.get("run_dir") or s.get("run") or "?"
        rows.append({
            "run": paths.run_of_dir(run),
            "recipe": _recipe_text(s.get("recipe")),
            "config_hash": str(s.get("config_hash", "")),
            "git_commit": str(s.get("git_commit", "")),
            "seed": s.get("seed", ""),
            "steps": s.get("steps", ""),
            "wall_time": format_number(float(s["wall_time_s"])) + " s" if s.get("wall_time_s") is not None else "",
            "device": s.get("device", ""),
            "precision": _precision_text(s),
            "skipped_steps": _skipped_text(s),
            "checkpoint_sha256": str(s.get("checkpoint_sha256", "")),
        })
    return rows


def render_report(out_html, tables: Mapping[str, str], figures: Mapping[str, str], claims: list[dict],
                  provenance: list[Mapping], geometry: Mapping[str, Mapping] | None, scale: str, title: str,
                  published=DEFAULT_PUBLISHED, measured: Mapping[str, float] | None = None,
                  records: list[Mapping] | None = None, specs: Mapping[str, Mapping] | None = None,
                  template_dir=TEMPLATE_DIR, premise: Mapping | None = None, power: list[Mapping] | None = None,
                  power_reference: str = "", regime: Mapping[str, Mapping] | None = None,
                  backbone: str | None = None, tuning: Mapping | None = None,
                  own_results: Mapping | None = None,
                  collapsed: Mapping[str, Mapping] | None = None) -> Path:
    """Write the report to ``out_html``.

    ``power``: per benchmark, what its test split resolves (:func:`hnclip.analysis.claims.power_notes`).

    ``tables``: name -> table prefix (``prefix.html`` is embedded, ``prefix.csv`` feeds paper-vs-ours; a
    path with a .csv/.html suffix is accepted); ``figures``: name -> PNG path; ``claims``: verdicts from
    :func:`hnclip.analysis.claims.evaluate_claims`; ``provenance``: run summaries; ``geometry``: name ->
    :func:`hnclip.analysis.geometry.caption_geometry` result; ``published``: the paper's numbers (YAML);
    ``measured``: values the report compares directly (default: §2.4's gradient ratio, measured on the
    loss); ``records``/``specs``: evaluation records and experiment specs for counts and run settings;
    ``premise``: the §2.4 / appendix C measurements (``{kind: premise}`` comparisons read them);
    ``regime``: benchmark -> its regime conditions (:func:`hnclip.analysis.regime.regime_report`).
    ``backbone``: what the backbone was converted from (a report on your own data names it).
    ``tuning``: the tuning section (:func:`hnclip.tuning.rows.tuning_section`; None: no section).
    ``own_results``: on your own data, :func:`hnclip.analysis.own_results.own_results` (the summary's ``own``).
    ``collapsed``: the baselines at or below the zero-shot backbone (:func:`hnclip.analysis.claims.collapsed_rows`),
    listed on the first screen with the tuning record's flags.
    """
    label = scale_label(scale)
    tables = {name: _strip_suffix(prefix) for name, prefix in tables.items()}
    table_blocks = []
    for name, prefix in tables.items():
        fragment = Path(f"{prefix}.html")
        if not fragment.is_file():
            raise FileNotFoundError(f"table {name!r}: {fragment} does not exist (write it with write_table)")
        html = fragment.read_text(encoding="utf-8")
        if f'data-scale="{scale}"' not in html:
            raise ValueError(f"table {name!r} ({fragment}) is not labelled as a {label}")
        table_blocks.append({"name": name, "html": markupsafe.Markup(html)})
    figure_blocks = [{"name": name, "src": _embed_png(Path(path))} for name, path in figures.items()]
    if measured is None:
        from hnclip.analysis.margins import measure_gradient_ratio

        measured = {"gradient_ratio": measure_gradient_ratio()}
    context = {"tables": tables, "geometry": geometry or {}, "measured": measured, "records": records or [],
               "provenance": provenance, "specs": specs or {}, "claims": claims, "premise": premise or {},
               "scale": scale}
    own = scale == "own"
    comparisons, not_compared = (compare_published(load_published(published), context) if published and not own
                                 else ([], []))
    banner, own_data = own_banner(specs or {}, records or [], provenance) if own else (BANNERS[scale], "")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    try:
        template = env.get_template(TEMPLATE)
    except jinja2.TemplateNotFound:
        raise FileNotFoundError(f"report template {Path(template_dir) / TEMPLATE} does not exist") from None
    html = template.render(
        title=title, scale=scale, scale_label=label, banner=banner, own_data=own_data, backbone=backbone, claims=claims,
        verdict_counts={v: sum(c.get("verdict") == v for c in claims) for v in VERDICTS},
        verdict_class=VERDICT_CLASS,
        tables=table_blocks, figures=figure_blocks, comparisons=comparisons, not_compared=not_compared,
        provenance=_provenance_rows(provenance), hn_meanings=_hn_meanings(provenance),
        geometry=[_geometry_rows(n, g) for n, g in (geometry or {}).items()], paper_geometry=PAPER_GEOMETRY,
        fewer_benchmarks=_fewer_benchmarks(specs or {}, scale),
        premise_rows=_premise_rows(premise), regime=_regime_rows(regime), fmt=format_number, power=list(power or []), power_reference=power_reference,
        headline=_headline_rows(regime),
        confidence=next((c["confidence"] for c in claims if c.get("confidence")), 0.95), tuning=tuning,
        own_results=own_results or {},
        collapsed=_collapsed_rows(collapsed),
    )
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    out_html.write_text(html, encoding="utf-8")
    return out_html


def render_report_from_files(out_html, title: str, scale: str, specs: Mapping[str, Mapping],
                             tables: Iterable[Path], figures: Iterable[Path], geometry: Iterable[Path],
                             summaries: Iterable[Path], published=DEFAULT_PUBLISHED,
                             premise=None, regime: Iterable[Path] = (), claims=None,
                             evals: Iterable | None = None, backbone=None, tuning=None,
                             config: Mapping | None = None, own_summary=None) -> Path:
    """``hnclip report``: load everything the workflow produced and render the report.

    Tables and figures are named by their file stem. ``claims``: the verdicts and power notes to show,
    ``results/claims.json`` (``hnclip claims``, :mod:`hnclip.analysis.claims.files`) or its dict; None
    judges them here from the same files the same way (:func:`~hnclip.analysis.claims.files.judge_from_files`:
    the specs' evaluation records, the main runs' per-epoch logs, the reference method's dynamics logs).
    ``premise``: the §2.4 / appendix C measurements, a dict or a JSON file (None: no premise rows).
    ``regime``: ``results/regime/<benchmark>.json`` files (:mod:`hnclip.analysis.regime`). ``evals``: the
    evaluation records a rule declared (given, every record the specs read must be among them). ``backbone``: the
    backbone's model folder, named on your own data (scale ``own``, which judges no claim) by what it was
    converted from. ``tuning``: the tuning record (its section in the report), checked against ``config`` (the
    workflow config, whose rates should be the record's choices) where one is given. ``own_summary``: on your own
    data, ``results/summary.json`` (``hnclip summary --scale own``): HN-CLIP minus plain fine-tuning, the captions
    whose rank changed, each run's last-epoch rise.
    """
    from hnclip.analysis.claims.files import judge_from_files, load_claims, load_premise, spec_records
    from hnclip.analysis.records import load_summary
    from hnclip.analysis.regime import load_regime

    specs = {name: spec for name, spec in (specs or {}).items() if spec}
    _, records = spec_records(specs, declared=evals)
    premise = load_premise(premise)
    if scale == "own":
        if claims is not None:
            raise ValueError("a report on your own data (scale own) judges no claim of the paper; give no claims")
        judged = {"claims": [], "power": {"notes": [], "reference": ""}}
    elif claims is None:
        judged = judge_from_files(scale, specs, premise, evals=evals)
    elif isinstance(claims, Mapping):
        judged = claims
    else:
        judged = load_claims(claims)
    power = judged["power"]
    regime_results = {}
    for path in regime:
        data = load_regime(path)
        regime_results[data["benchmark"]] = data
    geometry_results = {}
    for path in geometry:
        geometry_results[Path(path).stem] = json.loads(Path(path).read_text())
    return render_report(
        out_html,
        tables={Path(p).stem: _strip_suffix(p) for p in tables},
        figures={Path(p).stem: Path(p) for p in figures},
        claims=list(judged["claims"]),
        provenance=[load_summary(p) for p in summaries],
        geometry=geometry_results,
        scale=scale,
        title=title,
        published=published,
        records=records,
        specs=specs,
        premise=premise,
        power=power["notes"],
        power_reference=power["reference"],
        regime=regime_results,
        backbone=_backbone_words(backbone),
        tuning=_tuning(tuning, specs, config),
        own_results=json.loads(Path(own_summary).read_text(encoding="utf-8"))["own"] if own_summary else None,
        collapsed=judged.get("collapsed"),
    )


def _headline_rows(regime: Mapping[str, Mapping] | None) -> list[dict]:
    """The first screen's comparisons, as ``results/summary.md`` states them (both read the regime files'
    ``comparisons``): HN-CLIP minus the strongest competitor chosen on val, then minus Long-CLIP FT."""
    rows = []
    for benchmark, data in (regime or {}).items():
        comparisons = data.get("comparisons") or {}
        for role in ("competitor", "baseline"):
            compared = comparisons.get(role)
            if not compared or compared.get("interval") is None:
                continue
            if role == "baseline" and rows and rows[-1]["benchmark"] == benchmark \
                    and rows[-1]["against"] == compared["against"]:
                continue
            low, high = compared["interval"]
            rows.append({"benchmark": benchmark, "role": role, "against": compared["against"],
                         "against_label": compared.get("against_label") or compared["against"],
                         "difference": compared["difference"], "ci_low": low, "ci_high": high,
                         "seeds": compared["seeds"]})
    return rows


def _collapsed_rows(collapsed: Mapping[str, Mapping] | None) -> list[str]:
    """Each baseline at or below the zero-shot backbone as "label (benchmark −x.x [low, high])"."""
    return [f"{label} (" + "; ".join(f"{bench} {d:+.1f} [{low:+.1f}, {high:+.1f}]" for bench, (d, low, high)
                                     in sorted(per.items())) + ")"
            for label, per in sorted((collapsed or {}).items())]


def _tuning(record_path, specs: Mapping[str, Mapping], config: Mapping | None) -> dict | None:
    """The tuning section from the record file, its methods labelled as the main table labels them. A record
    that is not one (:func:`hnclip.tuning.record.load_record`'s line) becomes the section's flag and a warning
    on stderr: the rest of the report stands without it, but never without saying so."""
    if record_path is None:
        return None
    from hnclip.tuning.record import config_disagreements, load_record
    from hnclip.tuning.rows import tuning_section

    try:
        record = load_record(record_path)
    except ValueError as error:
        print(f"hnclip report: warning: the tuning section is left out: {error}", file=sys.stderr)
        return {"error": str(error)}
    labels = {method: entry.get("label") or method for method, entry in (config or {}).get("methods", {}).items()}
    for cell in (specs.get("main") or {}).get("cells", []):  # the main table's rows, without a config
        if not cell.get("zeroshot"):
            labels.setdefault(cell["run"]["method"], cell["row"])
    return tuning_section(record, labels, config_disagreements(config, record) if config else [])


def _backbone_words(folder) -> str | None:
    """What a backbone folder was converted from, or its architecture name; None without a folder."""
    if folder is None:
        return None
    from hnclip.model_files import MODEL_JSON, describe_conversion

    described = describe_conversion(folder)
    if described:
        return described
    spec_path = Path(folder) / MODEL_JSON
    return json.loads(spec_path.read_text())["spec"].get("name") if spec_path.is_file() else None
