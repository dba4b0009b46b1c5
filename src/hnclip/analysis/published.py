"""The paper's published numbers beside ours: ``report/published_numbers.yaml`` read and checked, and each
entry's value(s) found in this run's outputs (a table cell, a measured value, a geometry field, an evaluation
record, a claim's measure, the regime premise) with its interval, its difference from the paper's and the
verdict of the claim behind it. :mod:`hnclip.report` renders the rows this returns."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from hnclip.analysis.table_format import read_table_csv

__all__ = ["COMPARE_KINDS", "compare_published", "format_number", "load_published"]


def load_published(path) -> list[dict]:
    """The paper's numbers (``report/published_numbers.yaml``), checked: each has a key and a source,
    and a value, a range, or an explicit null with a status saying why."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"published numbers file {path} does not exist") from None
    entries = (data or {}).get("numbers")
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a top-level 'numbers' list")
    keys = set()
    for i, entry in enumerate(entries):
        where = f"{path}: numbers[{i}] ({entry.get('key')!r})"
        for field in ("key", "what", "source"):
            if not entry.get(field):
                raise ValueError(f"{where}: no {field!r}")
        if entry["key"] in keys:
            raise ValueError(f"{where}: duplicate key")
        keys.add(entry["key"])
        has_range = entry.get("range") is not None
        if has_range and (len(entry["range"]) != 2 or entry["range"][0] > entry["range"][1]):
            raise ValueError(f"{where}: range must be [low, high], got {entry['range']!r}")
        if "value" not in entry and not has_range:
            raise ValueError(f"{where}: needs 'value' (null allowed) or 'range'")
        if entry.get("value") is None and not has_range and not entry.get("status"):
            raise ValueError(f"{where}: a null value needs a 'status' saying why")
        _check_compare(entry.get("compare"), where)
        over = entry.get("over_benchmarks")
        if over is not None and not (isinstance(over, Mapping) and over.get("experiment")
                                     and isinstance(over.get("paper"), int)):
            raise ValueError(f"{where}: over_benchmarks must be {{experiment: E, paper: N}}, got {over!r}")
    return entries


# compare kind -> the fields it needs (``published_numbers.yaml``'s header documents each)
COMPARE_KINDS = {
    "measured": ("key",),
    "geometry": ("field",),
    "table": ("table", "select"),
    "eval": ("benchmark", "field"),
    "provenance": (),
    "spec": ("experiment", "method", "field"),
    "claim": ("claim", "measure"),
    "premise": (),
}


def _check_compare(compare, where: str) -> None:
    """A ``compare`` block names a kind the report reads and the fields that kind needs."""
    if compare is None:
        return
    if not isinstance(compare, Mapping) or compare.get("kind") not in COMPARE_KINDS:
        kind = compare.get("kind") if isinstance(compare, Mapping) else compare
        raise ValueError(f"{where}: compare kind {kind!r} is not one the report reads; known: "
                         f"{', '.join(COMPARE_KINDS)}")
    kind = compare["kind"]
    missing = [f for f in COMPARE_KINDS[kind] if f not in compare]
    if kind == "provenance" and not ("product" in compare or "field" in compare):
        missing.append("product or field")
    if kind == "premise" and not ("field" in compare or "fields" in compare):
        missing.append("field or fields")
    if missing:
        raise ValueError(f"{where}: compare kind {kind!r} needs {missing}")
    if "claim" in compare:
        from hnclip.analysis.claims import CLAIMS

        if compare["claim"] not in CLAIMS:
            raise ValueError(f"{where}: compare names claim {compare['claim']!r}; known: {', '.join(CLAIMS)}")
    if kind == "premise":
        from hnclip.analysis.claims import PREMISE_KEYS

        fields = compare.get("fields") or [compare["field"]]
        unknown = [f for f in fields if f not in PREMISE_KEYS]
        if unknown:
            raise ValueError(f"{where}: premise field(s) {unknown} unknown; known: {', '.join(PREMISE_KEYS)}")


def _dotted(data: Mapping, path: str):
    for part in path.split("."):
        if not isinstance(data, Mapping) or part not in data:
            return None
        data = data[part]
    return data


def _distinct(values: Iterable) -> list:
    return list(dict.fromkeys(v for v in values if v is not None))


def _ours(entry: Mapping, context: Mapping) -> list[tuple[str, object, list | None]]:
    """Our value(s) for a published entry as (label, value, interval) triples, the interval [low, high]
    where ours has one (a table cell's bootstrap interval, a claim measure's, a counted share's Wilson
    interval) and None otherwise; empty when we have no value."""
    compare = entry.get("compare") or {}
    kind = compare.get("kind")
    if kind == "measured":
        value = (context.get("measured") or {}).get(compare["key"])
        return [("", value, None)] if value is not None else []
    if kind == "geometry":
        return [(name, geo[compare["field"]], None) for name, geo in (context.get("geometry") or {}).items()
                if compare["field"] in geo]
    if kind == "table":
        prefix = (context.get("tables") or {}).get(compare["table"])
        if prefix is None or not Path(f"{prefix}.csv").is_file():
            return []
        tidy = read_table_csv(f"{prefix}.csv")
        found = _table_cells(tidy, compare["select"], compare.get("over") or [])
        stand_in = compare.get("toy_stand_in")
        if not found and stand_in and context.get("scale") == "toy":
            # the synthetic benchmark stands in for the paper's: every group's value, each labelled
            select = {k: v for k, v in compare["select"].items() if k != stand_in}
            found = _table_cells(tidy, select, [stand_in, *(compare.get("over") or [])])
        return found
    if kind == "eval":
        records = context.get("records") or []
        if compare["benchmark"] == "*":  # every benchmark we evaluate, each labelled
            per_bench = {r["eval_benchmark"]: r.get(compare["field"]) for r in records
                         if r.get(compare["field"]) is not None}
            return [(k, v, None) for k, v in per_bench.items()]
        values = _distinct(r.get(compare["field"]) for r in records
                           if r.get("eval_benchmark") == compare["benchmark"])
        return [("", v, None) for v in values]
    if kind == "provenance":
        if "product" in compare:
            products = []
            for summary in context.get("provenance") or []:
                parts = [_dotted(summary, p) for p in compare["product"]]
                if all(isinstance(p, int | float) for p in parts):
                    products.append(math.prod(parts))
            return [("", v, None) for v in _distinct(products)]
        return [("", v, None) for v in _distinct(_dotted(s, compare["field"]) for s in context.get("provenance") or [])]
    if kind == "spec":
        spec = (context.get("specs") or {}).get(compare["experiment"]) or {}
        # the method's cells by its key (a renamed display label finds the same cells)
        return [("", v, None) for v in _distinct(c["run"].get(compare["field"]) for c in spec.get("cells", [])
                                                  if not c.get("zeroshot") and c["run"].get("method") == compare["method"])]
    if kind == "claim":
        verdict = _verdict_of(compare, context)
        if compare["measure"] == "verdict":  # a sentence the claim tests, not a number: its verdict
            return [("", verdict["verdict"], None)] if verdict and verdict["verdict"] != "no data" else []
        value = (verdict or {}).get("measures", {}).get(compare["measure"])
        bounds = ((verdict or {}).get("measure_intervals") or {}).get(compare["measure"])
        if value is None:
            return []
        if not isinstance(value, Mapping):
            return [("", value, bounds if isinstance(bounds, list) else None)]
        bounds = bounds if isinstance(bounds, Mapping) else {}
        items = [(str(label), v, bounds.get(str(label))) for label, v in value.items()]
        if "label" not in compare:
            return items
        hit = [(label, v, b) for label, v, b in items if label == compare["label"]]
        if hit:
            return [("", hit[0][1], hit[0][2])]
        return items if compare.get("toy_stand_in") and context.get("scale") == "toy" else []
    if kind == "premise":
        premise = context.get("premise") or {}
        fields = compare["fields"] if "fields" in compare else [compare["field"]]
        found = [(f if "fields" in compare else "", premise[f], _counted_interval(premise, f, context))
                 for f in fields if premise.get(f) is not None]
        return found
    return []


def _verdict_of(compare: Mapping, context: Mapping) -> dict | None:
    return next((c for c in context.get("claims") or [] if c.get("id") == compare.get("claim")), None)


def _counted_interval(premise: Mapping, key: str, context: Mapping) -> list | None:
    """The Wilson interval of a premise share from its counts (``premise["counts"]``), at the claims'
    confidence; None for a figure that is not a counted share."""
    from hnclip.analysis.binomial import wilson_interval

    counts = (premise.get("counts") or {}).get(key)
    if not counts or not counts[1]:
        return None
    confidence = next((c["confidence"] for c in context.get("claims") or [] if c.get("confidence")), 0.95)
    return list(wilson_interval(int(counts[0]), int(counts[1]), confidence))


def _label_matches(value, labels: list[str]) -> bool:
    """Whether a tidy table's level value is one of ``labels``: as text, or as a number (a fraction read
    back as 1.0 is the label "1")."""
    if str(value) in labels:
        return True
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    for label in labels:
        try:
            if float(label) == number:
                return True
        except ValueError:
            continue
    return False


def _table_cells(tidy, select: Mapping, over: list) -> list[tuple[str, float]]:
    """Cells of a tidy table matching ``select`` (a label, or a list of labels, per level) as (label, mean,
    interval) triples. Without ``over`` exactly one cell must match; with it, one value per match, labelled
    by its ``over`` levels. The interval is the cell's bootstrap interval (None where it has none)."""
    mask = None
    for level, label in select.items():
        if level not in tidy.columns:
            return []
        labels = [str(x) for x in label] if isinstance(label, list) else [str(label)]
        hit = tidy[level].map(lambda v, labels=labels: _label_matches(v, labels))
        mask = hit if mask is None else mask & hit
    rows = tidy if mask is None else tidy[mask]

    def bounds(r) -> list | None:
        low, high = (float(r[c]) if c in r and r[c] == r[c] else math.nan for c in ("ci_low", "ci_high"))
        return [low, high] if math.isfinite(low) and math.isfinite(high) else None

    if not over:
        return [("", float(rows["mean"].iloc[0]), bounds(rows.iloc[0]))] if len(rows) == 1 else []
    if any(level not in tidy.columns for level in over):
        return []
    return [(" ".join(str(r[level]).replace("->", "→") for level in over), float(r["mean"]), bounds(r))
            for _, r in rows.iterrows()]


def format_number(value) -> str:
    """A number as the report prints it: ints with thousands separators, floats to four significant digits
    (thousands unseparated below a million, then in e-notation); anything else as its text."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if abs(value) >= 1e6:  # gradient ratios span decades: 1.5e+07, not 15,000,000
        return f"{value:.3g}"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _difference(entry: Mapping, ours) -> str:
    if not isinstance(ours, int | float) or isinstance(ours, bool):
        return ""
    if entry.get("range") is not None:
        low, high = entry["range"]
        if low <= ours <= high:
            return "within range"
        if low > 0 and high / low >= 100:  # a range over decades (gradient ratios): a factor, not a gap
            if ours <= 0:
                return "below the range"
            factor = ours / high if ours > high else ours / low
            return f"{factor:.2g}x the {'high' if ours > high else 'low'} end"
        gap = ours - high if ours > high else ours - low
        return f"{gap:+.3g} {'above' if gap > 0 else 'below'}"
    paper = entry.get("value")
    if not isinstance(paper, int | float) or isinstance(paper, bool):  # none, or a list of settings in words
        return ""
    return f"{ours - paper:+.3g}"


# the paper's benchmarks: a count over benchmarks (columns, directions, combinations) compares with ours
# only where our configuration has as many
def _benchmarks_here(over: Mapping, context: Mapping) -> int | None:
    """How many benchmarks our count of ``over`` (``{experiment, in_domain?}``) is taken over: the
    experiment's groups, or only its in-domain ones."""
    from hnclip.analysis.claims import in_domain_groups

    spec = (context.get("specs") or {}).get(over["experiment"])
    if not spec:
        return None
    if over.get("in_domain"):
        return len(in_domain_groups(spec))
    return len({c["group"] for c in spec["cells"] if not c.get("zeroshot")})


def _not_comparable(entry: Mapping, context: Mapping) -> str:
    """Why a count cannot be compared with the paper's, or "" when it can: it is taken over fewer (or
    more) benchmarks here (``over_benchmarks`` in published_numbers.yaml)."""
    over = entry.get("over_benchmarks")
    if not over:
        return ""
    here = _benchmarks_here(over, context)
    if here is None or here == over["paper"]:
        return ""
    return (f"not comparable: counted over {here} benchmark{'s' if here != 1 else ''} here, "
            f"{over['paper']} in the paper")


def _with_interval(value, bounds) -> str:
    text = format_number(value)
    if bounds is not None and isinstance(value, int | float) and not isinstance(value, bool):
        text += f" [{format_number(bounds[0])}, {format_number(bounds[1])}]"
    return text


def compare_published(published: list[dict], context: Mapping) -> tuple[list[dict], list[dict]]:
    """Paper-vs-ours rows for the report, and the entries with neither a paper value nor ours.

    ``context``: tables (name -> prefix), geometry, measured, records, provenance, specs, claims, premise.
    Ours carries its interval where it has one. A number a claim measures says the claim's verdict, and
    only a claim that holds gets a difference: a count of point-value wins under an inconclusive claim is
    no reproduction. A count over benchmarks (``over_benchmarks``) taken over another number of benchmarks
    than the paper's says so instead of a difference.
    """
    rows, neither = [], []
    for entry in published:
        ours = _ours(entry, context)
        has_paper = entry.get("value") is not None or entry.get("range") is not None
        if not has_paper and not ours:
            neither.append(entry)
            continue
        if entry.get("range") is not None:
            paper = f"{format_number(entry['range'][0])}–{format_number(entry['range'][1])}"
        elif entry.get("value") is not None:
            paper = format_number(entry["value"])
        else:
            paper = entry.get("status", "not available")
        if has_paper and entry.get("unit") in ("x", "%"):
            paper += " " + entry["unit"]
        absent = ("not reproduced in this run" if entry.get("compare")
                  else f"not measured by our runs{': ' + entry['status'] if entry.get('status') else ''}")
        compare = entry.get("compare") or {}
        verdict = _verdict_of(compare, context) if compare.get("claim") else None
        judged = verdict["verdict"] if verdict and compare.get("measure") != "verdict" else None
        unlike = _not_comparable(entry, context)
        for label, value, bounds in ours or [("", None, None)]:
            if value is None:
                difference = ""
            elif unlike:
                difference = unlike
            elif judged is not None and judged != "holds":
                difference = f"claim {compare['claim']} {judged}: not a reproduction"
            else:
                difference = _difference(entry, value)
            rows.append({
                "key": entry["key"], "what": entry["what"] + (f" [{label}]" if label else ""),
                "paper": paper, "paper_scale": entry.get("scale", ""), "unit": entry.get("unit", ""),
                "source": entry["source"], "note": entry.get("note", ""),
                "ours": absent if value is None else _with_interval(value, bounds),
                "has_ours": value is not None, "difference": difference,
                "verdict": judged, "claim": compare.get("claim") if judged is not None else None,
            })
    return rows, neither
