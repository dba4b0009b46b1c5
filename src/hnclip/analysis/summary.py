"""What one run of the DAG shows, in one short file, and the same for two machines side by side.

``results/summary.json`` holds what a reader (and another machine) should compare: the machine (CPU, kernel
setting, torch, commit), the backbone's weights digest, every regime condition with its decision (met, not
met, undecided by its interval, or not measured: :mod:`hnclip.analysis.regime`), the main
comparison (HN-CLIP minus Long-CLIP FT, average R@1, with its interval) and every claim's verdict.
``results/summary.md`` is the same as a short Markdown table, the one the README shows.

:func:`compare_summaries` sets several machines' summaries side by side and says where they disagree: a
condition or claim whose verdict differs, or a main comparison whose point lies outside another machine's
interval. A claim whose verdict differs between machines is reported as such, never as either verdict.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

__all__ = ["VERDICTS", "build_summary", "compare_summaries", "render_summary_markdown"]

VERDICTS = ("holds", "does not hold", "inconclusive", "no data")
_MARK = {True: "met", False: "not met", None: "not measured"}


def _decision(condition: Mapping) -> str:
    """A condition's three-way decision; a regime file written before decisions has only ``met``."""
    return condition.get("decision") or _MARK[condition.get("met")]


def _main_comparison(regime: Mapping) -> dict | None:
    power = next((c for c in regime["conditions"] if c["key"] == "power"), None)
    if power is None or power["values"].get("difference") is None:
        return None
    return {"difference": power["values"]["difference"], "interval": power["intervals"].get("difference"),
            "seeds": power["values"]["seeds"], "half_width": power["values"]["half_width"]}


def build_summary(regimes: Sequence[Mapping], claims: Mapping, backbone: Mapping, machine: Mapping,
                  scale: str) -> dict:
    """The summary of one run: ``regimes`` (``results/regime/*.json``), ``claims`` (``results/claims.json``),
    ``backbone`` ({weights_sha256, release}) and ``machine`` ({cpu, cpu_kernels, torch, git_commit})."""
    verdicts = {c["id"]: c["verdict"] for c in claims.get("claims", [])}
    tally = Counter(verdicts.values())
    return {
        "scale": scale,
        "machine": dict(machine),
        "backbone": dict(backbone),
        "regime": {r["benchmark"]: {
            "met": r["met"], "of": len(r["conditions"]),
            "undecided": sum(_decision(c) == "undecided" for c in r["conditions"]),
            "conditions": {c["key"]: {"label": c["label"], "decision": _decision(c), "met": c["met"], "ours": c["ours"],
                                      "target": c["target"], "value": c["value"],
                                      "intervals": c.get("intervals") or {}, "chance": c.get("chance")}
                           for c in r["conditions"]}} for r in regimes},
        "main": {r["benchmark"]: _main_comparison(r) for r in regimes},
        "claims": {"tally": {v: tally.get(v, 0) for v in VERDICTS}, "verdicts": dict(sorted(verdicts.items()))},
    }


def _interval_text(main: Mapping | None) -> str:
    if not main:
        return "–"
    bounds = main.get("interval")
    inside = f" [{bounds[0]:+.2f}, {bounds[1]:+.2f}]" if bounds else ""
    return f"{main['difference']:+.2f}{inside} ({main['seeds']} seeds)"


def render_summary_markdown(summary: Mapping) -> str:
    """The run's summary as the short Markdown table the README quotes (generated, never edited by hand)."""
    m, b = summary["machine"], summary["backbone"]
    lines = [f"Measured at {summary['scale']} scale on {m.get('cpu', '?')} (CPU kernels `{m.get('cpu_kernels', '?')}`, "
             f"torch {m.get('torch', '?')}), commit `{(m.get('git_commit') or '?')[:12]}`, {m.get('date', '?')}; "
             f"backbone weights sha256 `{(b.get('weights_sha256') or '?')[:16]}`"
             + (f" ({b['release']})" if b.get("release") else "") + ".", ""]
    lines += ["| | ours | target |", "|---|---|---|"]
    for bench, regime in summary["regime"].items():
        for c in regime["conditions"].values():
            lines.append(f"| {bench}: {c['label']} ({_decision(c)}) | {c['ours']} | {c['target']} |")
        lines.append(f"| {bench}: conditions met | {regime['met']} of {regime['of']}, {regime.get('undecided', 0)} "
                     f"undecided | all |")
        lines.append(f"| {bench}: HN-CLIP − Long-CLIP FT, average R@1 | {_interval_text(summary['main'].get(bench))} "
                     f"| paper: +2.4 to +4.3 over the strongest competitor |")
    tally = summary["claims"]["tally"]
    lines.append(f"| claims of the paper | {', '.join(f'{n} {v}' for v, n in tally.items())} | |")
    return "\n".join(lines) + "\n"


def machine_record(git_commit: str | None) -> dict:
    """This machine as a summary names it: CPU, kernel setting, torch, commit and date."""
    import os

    from hnclip import cpu_kernels

    try:
        import torch

        version = torch.__version__
    except ImportError:  # the report environment has no torch
        version = None
    return {"cpu": cpu_kernels.cpu_name(), "cpu_kernels": os.environ.get(cpu_kernels.ENV_SETTING) or "native",
            "torch": version, "git_commit": git_commit, "date": _dt.date.today().isoformat()}


def load_summaries(paths: Iterable) -> list[tuple[str, dict]]:
    return [(str(p), json.loads(Path(p).read_text(encoding="utf-8"))) for p in paths]


def compare_summaries(summaries: Sequence[tuple[str, Mapping]]) -> tuple[str, int]:
    """Several summaries side by side, as text, and the number of disagreements.

    A disagreement: a regime condition or a claim whose verdict differs, or a main comparison whose point
    lies outside another summary's interval (two machines' numbers should agree within their noise)."""
    names = [s["machine"].get("cpu", path) for path, s in summaries]
    width = 34
    col = max(24, *(len(n) for n in names))
    out = [f"{'':{width}}" + "".join(f"{n[:col]:>{col + 2}}" for n in names)]
    disagreements = 0

    def row(label: str, values: list[str], differs: bool) -> None:
        nonlocal disagreements
        disagreements += int(differs)
        out.append(f"{label[:width - 1]:{width}}" + "".join(f"{v[:col]:>{col + 2}}" for v in values)
                   + ("   <- differs" if differs else ""))

    digests = [(s["backbone"].get("weights_sha256") or "–")[:16] for _, s in summaries]
    row("backbone weights", digests, len(set(digests)) > 1)
    benches = sorted({b for _, s in summaries for b in s["regime"]})
    for bench in benches:
        keys = list(dict.fromkeys(k for _, s in summaries for k in s["regime"].get(bench, {}).get("conditions", {})))
        for key in keys:
            marks = [_decision(s["regime"].get(bench, {}).get("conditions", {}).get(key, {}))
                     for _, s in summaries]
            row(f"{bench}: {key}", marks, len(set(marks)) > 1)
        mains = [s["main"].get(bench) for _, s in summaries]
        outside = any(a and b and b.get("interval") and not b["interval"][0] <= a["difference"] <= b["interval"][1]
                      for a in mains for b in mains)
        row(f"{bench}: HN-CLIP − Long-CLIP FT", [_interval_text(m) for m in mains], outside)
    ids = sorted({i for _, s in summaries for i in s["claims"]["verdicts"]})
    for claim in ids:
        verdicts = [s["claims"]["verdicts"].get(claim, "–") for _, s in summaries]
        row(claim, verdicts, len(set(verdicts)) > 1)
    out.append(f"{disagreements} disagreement(s) between {len(summaries)} summaries")
    return "\n".join(out), disagreements
