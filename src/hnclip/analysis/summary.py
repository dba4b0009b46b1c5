"""What one run of the DAG shows, in one short file, and the same for two machines side by side.

``results/summary.json`` holds what a reader (and another machine) should compare: the machine (CPU, kernel
setting, torch, commit), the backbone's weights digest, every regime condition with its decision (met, not
met, undecided by its interval, or not measured: :mod:`hnclip.analysis.regime`), the main
comparison (HN-CLIP minus the strongest competitor, chosen on val, average R@1, with its interval; HN-CLIP
minus Long-CLIP FT beside it) and every claim's verdict.
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

__all__ = ["VERDICTS", "SummaryFileError", "build_summary", "compare_summaries", "load_summaries",
           "render_summary_markdown"]

VERDICTS = ("holds", "does not hold", "inconclusive", "no data", "against a collapsed row")
_MARK = {True: "met", False: "not met", None: "not measured"}


def _decision(condition: Mapping) -> str:
    """A condition's three-way decision; a regime file written before decisions has only ``met``."""
    return condition.get("decision") or _MARK[condition.get("met")]


def _comparison(regime: Mapping, role: str) -> dict | None:
    """HN-CLIP minus the ``role``'s method (``competitor``: the strongest competitor on val; ``baseline``:
    Long-CLIP FT) from the regime file's ``comparisons``, with the half-width of its interval."""
    compared = (regime.get("comparisons") or {}).get(role)
    if not compared or compared.get("difference") is None:
        return None
    bounds = compared.get("interval")
    return {"difference": compared["difference"], "interval": bounds, "seeds": compared["seeds"],
            "half_width": (bounds[1] - bounds[0]) / 2 if bounds else None, "against": compared["against"],
            "against_label": compared.get("against_label") or compared["against"]}


def _headline(regime: Mapping) -> dict | None:
    """The summary's main comparison: HN-CLIP minus the strongest competitor where the config names one (the
    paper's comparison), else minus Long-CLIP FT."""
    return _comparison(regime, "competitor") or _comparison(regime, "baseline")


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
        "main": {r["benchmark"]: _headline(r) for r in regimes},
        "baseline": {r["benchmark"]: _comparison(r, "baseline") for r in regimes},
        "claims": {"tally": {v: tally.get(v, 0) for v in VERDICTS}, "verdicts": dict(sorted(verdicts.items()))},
    }


def _interval_text(main: Mapping | None) -> str:
    if not main:
        return "–"
    bounds = main.get("interval")
    inside = f" [{bounds[0]:+.2f}, {bounds[1]:+.2f}]" if bounds else ""
    return f"{main['difference']:+.2f}{inside} ({main['seeds']} seeds)"


def _against(main: Mapping | None) -> str:
    """Who HN-CLIP is compared with in ``main`` (a summary without ``against`` compared with Long-CLIP FT)."""
    return (main or {}).get("against_label") or "Long-CLIP FT"


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
        main, baseline = summary["main"].get(bench), (summary.get("baseline") or {}).get(bench)
        if main and baseline and main["against"] != baseline["against"]:
            lines.append(f"| {bench}: HN-CLIP − {main['against_label']} (the strongest competitor, chosen on val), "
                         f"average R@1 | {_interval_text(main)} | paper: +2.4 to +4.3 over the strongest competitor |")
            lines.append(f"| {bench}: HN-CLIP − {baseline['against_label']} (plain fine-tuning), average R@1 "
                         f"| {_interval_text(baseline)} | – |")
        else:
            lines.append(f"| {bench}: HN-CLIP − {_against(main)}, average R@1 | {_interval_text(main)} | – |")
    if summary.get("tuning"):
        lines.append(_tuning_line(summary["tuning"]))
    tally = summary["claims"]["tally"]
    lines.append(f"| claims of the paper | {', '.join(f'{n} {v}' for v, n in tally.items())} | |")
    return "\n".join(lines) + "\n"


def _tuning_line(tuning: Mapping) -> str:
    """The rates against the tuning record (:func:`hnclip.tuning.record.record_check`): its choices, or what
    differs, or why the record could not be read; and HN-CLIP minus the competitor at both budgets when the
    record trained the long budget."""
    if tuning.get("error"):
        return f"| tuning record | not read: {tuning['error']} | |"
    # what the record says of its split's resolution and of the long budget, when it has them
    # (hnclip.tuning.resolution.resolution_sentence, hnclip.tuning.long_budget.sentence)
    budget = "".join(f"; {tuning[k]}" for k in ("resolution", "long_budget") if tuning.get(k))
    if tuning["problems"]:
        return (f"| tuning record `{tuning['record']}` | **this run's rates are not the record's**: "
                f"{'; '.join(tuning['problems'])}{budget} | its choices on {tuning['split']} |")
    return (f"| tuning record `{tuning['record']}` | every rate and the competitor are its choices on "
            f"{tuning['split']}{budget} | |")


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


# the keys compare_summaries reads, each with the type build_summary gives it
_SUMMARY_KEYS = {"machine": dict, "backbone": dict, "regime": dict, "main": dict, "claims": dict}


class SummaryFileError(ValueError):
    """A file given to ``--compare`` is not a summary.json; the message names the file and what is wrong."""


def load_summary(path) -> dict:
    """The summary in ``path``, or a :class:`SummaryFileError` naming the file and what is wrong with it.

    ``--compare`` takes files from other machines, copied by hand: a truncated copy, another tool's JSON or a
    binary file should say which file and why in one line, not as a traceback from deep inside the table.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise SummaryFileError(f"{path}: not a text file (byte {error.object[error.start]:#04x} at offset "
                               f"{error.start} is not UTF-8); expected a summary.json") from None
    except OSError as error:
        raise SummaryFileError(f"{path}: cannot be read ({error.strerror})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SummaryFileError(f"{path}: not valid JSON ({error.msg} at line {error.lineno}, column {error.colno}"
                               f"{'; the file may be truncated' if error.pos >= len(text.rstrip()) else ''})") from None
    if not isinstance(data, dict):
        raise SummaryFileError(f"{path}: a JSON {type(data).__name__}, not a summary (an object with the keys "
                               f"{', '.join(_SUMMARY_KEYS)})")
    missing = [key for key in _SUMMARY_KEYS if key not in data]
    wrong = [f"{key} is a {type(data[key]).__name__}" for key, kind in _SUMMARY_KEYS.items()
             if key in data and not isinstance(data[key], kind)]
    if not missing and not wrong and not isinstance(data["claims"].get("verdicts"), dict):
        wrong.append("claims.verdicts is missing or not an object")
    if missing or wrong:
        what = ([f"missing key(s) {', '.join(missing)}"] if missing else []) + wrong
        raise SummaryFileError(f"{path}: not a summary.json written by hnclip summary ({'; '.join(what)})")
    return data


def load_summaries(paths: Iterable) -> list[tuple[str, dict]]:
    return [(str(p), load_summary(p)) for p in paths]


def compare_summaries(summaries: Sequence[tuple[str, Mapping]]) -> tuple[str, int]:
    """Several summaries side by side, as text, and the number of disagreements.

    A disagreement: a regime condition or a claim whose verdict differs, or a main comparison whose point
    lies outside another summary's interval (two machines' numbers should agree within their noise)."""
    names = [s["machine"].get("cpu", path) for path, s in summaries]
    width = 44
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
        for part in ("main", "baseline"):
            mains = [(s.get(part) or {}).get(bench) for _, s in summaries]
            headlines = [(s.get("main") or {}).get(bench) for _, s in summaries]
            if part == "baseline" and all(not m or _against(m) == _against(h) for m, h in zip(mains, headlines, strict=True)):
                continue  # the headline already is HN-CLIP minus Long-CLIP FT
            pairs = {_against(m) for m in mains if m}
            outside = len(pairs) > 1 or any(
                a and b and b.get("interval") and not b["interval"][0] <= a["difference"] <= b["interval"][1]
                for a in mains for b in mains)
            row(f"{bench}: HN-CLIP − {' / '.join(sorted(pairs)) or '–'}", [_interval_text(m) for m in mains], outside)
    ids = sorted({i for _, s in summaries for i in s["claims"]["verdicts"]})
    for claim in ids:
        verdicts = [s["claims"]["verdicts"].get(claim, "–") for _, s in summaries]
        row(claim, verdicts, len(set(verdicts)) > 1)
    out.append(f"{disagreements} disagreement(s) between {len(summaries)} summaries")
    return "\n".join(out), disagreements
