"""What a run on your own data (scale ``own``, config/finetune.yaml) shows, for its summary and its report.

Per benchmark of the main experiment: each row's average R@1 (the zero-shot backbone and every fine-tuned
method), HN-CLIP minus plain fine-tuning (the spec's ``roles``: ``reference`` minus ``baseline``, Long-CLIP FT,
i.e. the contrastive loss alone) with its paired bootstrap interval (the headline comparison's code,
:func:`hnclip.analysis.regime.conditions.seed_average_difference`), the captions whose rank changed most between
the two (on the first seed of each), and per run whether its score was still rising at the last epoch (the tuning search's test,
:func:`hnclip.analysis.epoch_rise.last_rise`, on the run's test-split ranks per epoch).

Where the main experiment does not train both (config/finetune.yaml trains only ``longclip`` unless ``hnclip`` is
added to ``experiments.main.methods``) the difference is None and ``missing`` says which method is absent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from hnclip.analysis.bootstrap import BootstrapSettings

__all__ = ["build_own_summary", "changed_captions", "own_results", "read_captions", "render_own_markdown", "run_rises"]

DIRECTIONS = ("i2t", "t2i")


def _average(records: Sequence[Mapping]) -> dict:
    """Mean over seeds of each direction's R@1 and their average."""
    out = {d: float(np.mean([r["metrics"][f"{d}_r1"] for r in records])) for d in DIRECTIONS}
    return {**out, "average": (out["i2t"] + out["t2i"]) / 2, "seeds": len(records)}


def changed_captions(hn: Mapping, plain: Mapping, captions: Sequence[str] | None, n: int = 5) -> list[dict]:
    """The ``n`` test captions whose text->image rank (0 = own image first) differs most between two evaluation
    records of one split, largest change first (ties: caption order): improvements and regressions alike."""
    a, b = np.asarray(hn["ranks"]["t2i"]), np.asarray(plain["ranks"]["t2i"])
    if a.shape != b.shape:
        raise ValueError(f"the two evaluations rank {a.size} and {b.size} captions: not the same split")
    change = b - a  # > 0: HN-CLIP ranks the caption's image higher (a smaller rank)
    order = np.argsort(-np.abs(change), kind="stable")[:n]
    return [{"caption_row": int(i), "caption": captions[i] if captions is not None else None,
             "rank_hn": int(a[i]) + 1, "rank_plain": int(b[i]) + 1, "change": int(change[i])}
            for i in order if change[i] != 0]


def run_rises(cells: Sequence[Mapping], settings: BootstrapSettings) -> list[dict]:
    """Per fine-tuned run with per-epoch ranks (``<run>/epoch_ranks.csv``): the last epoch's rise of mean R@1
    on the test split with its paired interval, ``still_improving`` when the interval lies above 0."""
    from hnclip.analysis.epoch_rise import last_rise

    out = []
    for cell in cells:
        ranks = Path(cell["run_dir"]) / "epoch_ranks.csv"
        rise = last_rise(ranks, settings) if ranks.is_file() else None
        if rise is not None:
            out.append({"row": cell["row"], "seed": cell["run"]["seed"], "epochs": rise["epochs"],
                        "rise": rise["value"], "interval": rise["interval"], "still_improving": rise["under_trained"]})
    return out


def _benchmark(spec: Mapping, group_cells: list[Mapping], records: Mapping[str, Mapping], settings,
               captions: Sequence[str] | None) -> dict:
    from hnclip.analysis.regime.conditions import seed_average_difference

    roles = spec.get("roles") or {}
    by_method: dict[str, list] = {}
    rows = []
    for cell in group_cells:
        record = records.get(cell["eval_path"])
        if record is None:
            continue
        method = cell["run"]["method"]
        if method not in by_method:
            rows.append({"row": cell["row"], "method": method})
        by_method.setdefault(method, []).append((str(cell["run"]["seed"]), record))
    for row in rows:
        row.update(_average([r for _, r in by_method[row["method"]]]))
    hn, plain = roles.get("reference"), roles.get("baseline")
    labels = {row["method"]: row["row"] for row in rows}
    missing = [m for m in (hn, plain) if m not in by_method]
    difference = None if missing else seed_average_difference(by_method, hn, plain, settings)
    if difference:
        difference.update(label=labels[hn], against_label=labels[plain])
    changed = [] if missing else changed_captions(by_method[hn][0][1], by_method[plain][0][1], captions)
    fine_tuned = [c for c in group_cells if not c.get("zeroshot") and c.get("run_dir")]
    return {"label": group_cells[0]["group"], "rows": rows, "difference": difference, "missing": missing,
            "changed": changed, "improving": run_rises(fine_tuned, settings)}


def own_results(spec: Mapping, records: Mapping[str, Mapping], settings: BootstrapSettings | None = None,
                captions: Mapping[str, Sequence[str]] | None = None) -> dict[str, dict]:
    """Benchmark -> its rows, HN-CLIP minus plain fine-tuning, changed captions and last-epoch rises, from the
    main ``spec`` and its evaluation ``records`` (eval path -> record); ``captions``: benchmark -> its test
    captions in the evaluation's order (the test manifest's rows), for the changed captions' text."""
    settings = settings or BootstrapSettings()
    groups: dict[str, list] = {}
    for cell in spec["cells"]:
        groups.setdefault(cell["eval_benchmark"], []).append(cell)
    return {bench: _benchmark(spec, cells, records, settings, (captions or {}).get(bench))
            for bench, cells in groups.items()}


def _interval(difference: Mapping) -> str:
    bounds = difference.get("interval")
    inside = f" [{bounds[0]:+.2f}, {bounds[1]:+.2f}]" if bounds else " (no interval: ranks not stored)"
    return f"{difference['difference']:+.2f}{inside} ({difference['seeds']} seed{'s' if difference['seeds'] != 1 else ''})"


def render_own_markdown(summary: Mapping) -> str:
    """``results/summary.md`` of a run on your own data: rows, the paired difference, changed captions, rises."""
    m, b = summary["machine"], summary["backbone"]
    lines = [f"Your data (scale own) on {m.get('cpu', '?')} (torch {m.get('torch', '?')}), commit "
             f"`{(m.get('git_commit') or '?')[:12]}`, {m.get('date', '?')}; backbone weights sha256 "
             f"`{(b.get('weights_sha256') or '?')[:16]}`. No claim of the paper is judged.", ""]
    for result in summary["own"].values():
        lines += [f"**{result['label']}**", "", "| | I->T R@1 | T->I R@1 | average R@1 |", "|---|---|---|---|"]
        lines += [f"| {r['row']} ({r['seeds']} seed{'s' if r['seeds'] != 1 else ''}) | {r['i2t']:.2f} | "
                  f"{r['t2i']:.2f} | {r['average']:.2f} |" for r in result["rows"]]
        diff = result["difference"]
        if diff:
            lines += ["", f"{diff['label']} − {diff['against_label']} (plain fine-tuning), average R@1, 95 % paired "
                      f"bootstrap interval over test images: {_interval(diff)}"]
        else:
            lines += ["", f"HN-CLIP − plain fine-tuning: not measured (the main experiment trains no "
                      f"{' and no '.join(map(repr, result['missing']))}; add it to experiments.main.methods)"]
        if result["changed"]:
            lines += ["", "Captions whose rank changed most (rank of their own image, 1 = first; plain fine-tuning "
                      "-> HN-CLIP, first seed of each):", ""]
            lines += [f"- {c['caption'] or 'caption ' + str(c['caption_row'])!r}: {c['rank_plain']} -> {c['rank_hn']}"
                      for c in result["changed"]]
        if result["improving"]:
            lines += ["", "Last epoch's change of average R@1 on the test split, 95 % paired interval:", ""]
        for rise in result["improving"]:
            flag = "still improving" if rise["still_improving"] else "not rising beyond noise"
            lines.append(f"- {rise['row']} (seed {rise['seed']}): epoch {rise['epochs'][0]} -> {rise['epochs'][1]} "
                         f"{rise['rise']:+.2f} [{rise['interval'][0]:+.2f}, {rise['interval'][1]:+.2f}]: {flag}")
        lines.append("")
    return "\n".join(lines)


def read_captions(manifest) -> list[str]:
    """The captions of a prepared test split (``results/data/<benchmark>/test.csv``) in row order, the order its
    evaluation ranks them."""
    import csv

    with open(manifest, newline="", encoding="utf-8") as f:
        return [row["caption"] for row in csv.DictReader(f)]


def build_own_summary(results: Mapping[str, Mapping], backbone: Mapping, machine: Mapping) -> dict:
    """``results/summary.json`` on your own data: :func:`own_results` under ``own``, and the keys
    ``hnclip summary --compare`` reads (``main``: HN-CLIP minus plain fine-tuning per benchmark; no regime, no
    claims), so two machines' own-data summaries compare as the toy's do."""
    main = {}
    for bench, result in results.items():
        diff = result["difference"]
        if diff:
            bounds = diff.get("interval")
            main[bench] = {**diff, "half_width": (bounds[1] - bounds[0]) / 2 if bounds else None}
        else:
            main[bench] = None
    return {"scale": "own", "machine": dict(machine), "backbone": dict(backbone), "own": dict(results),
            "regime": {}, "main": main, "baseline": {}, "claims": {"tally": {}, "verdicts": {}}}
