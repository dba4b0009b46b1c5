"""Write a table (see :mod:`hnclip.analysis.tables`) for machines (CSV) and people (HTML, Markdown, LaTeX).

The CSV is tidy, one line per cell with its header labels, mean, std, n, its 95 % interval (``ci_low``,
``ci_high``: the bootstrap of :mod:`hnclip.analysis.bootstrap`, empty where unknown), the runs behind the number
(``runs`` and ``run_*`` columns, when the table knows them), scale and experiment, so the report and other
scripts can select a number by name without knowing the table's layout, and reach its runs in one hop. The people's
formats show "mean [low, high]" where a cell has an interval (else "mean ± std" where it has several
seeds), a dash where the experiment has no such cell,
the best value of each ranked column in bold (ties all bold, compared at the printed precision; nothing
bold when every row prints the same), and the
scale ("toy-scale run" / "paper-scale run") in the caption.
"""

from __future__ import annotations

import html
import math
from pathlib import Path

import pandas as pd

from hnclip import paths
from hnclip.scales import SCALES, scale_label  # re-exported: the tables' readers import them from here

__all__ = ["SCALES", "format_number", "read_table_csv", "scale_label", "write_table"]

MISSING = "—"


def format_number(x: float, decimals: int | None = 1) -> str:
    """``decimals=None`` keeps about three significant digits (cost: minutes at toy scale, days at paper)."""
    if decimals is None:
        if x == 0 or not math.isfinite(x):
            decimals = 0 if x == 0 else 1
        else:
            decimals = max(0, 2 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{decimals}f}"


def _label(value) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


class _Cells:
    """The table's header labels, row labels and formatted cells, with the bold best per column."""

    def __init__(self, df: pd.DataFrame):
        if df.columns.nlevels < 2 or df.columns.names[-1] != "stat":
            raise ValueError("write_table expects a table from hnclip.analysis.tables (last column level 'stat')")
        self.columns = [c[:-1] for c in df.columns if c[-1] == "mean"]
        self.col_names = list(df.columns.names[:-1])
        self.row_names = [str(n) for n in df.index.names]
        self.rows = [r if isinstance(r, tuple) else (r,) for r in df.index]
        decimals = df.attrs.get("decimals", {})
        lower = set(map(tuple, df.attrs.get("lower_is_better", [])))
        unranked = set(map(tuple, df.attrs.get("unranked", [])))
        self.text: list[list[str]] = []
        self.bold: list[list[bool]] = []
        rounded: dict[tuple, list[float | None]] = {}
        for r, _ in enumerate(self.rows):
            texts = []
            for col in self.columns:
                line = df.iloc[r]
                mean, std, n = (line[col + (s,)] for s in ("mean", "std", "n"))
                low, high = (line.get(col + (s,), math.nan) for s in ("ci_low", "ci_high"))
                dec = decimals.get(col, 1)
                if not n or not math.isfinite(mean):
                    texts.append(MISSING)
                    rounded.setdefault(col, []).append(None)
                    continue
                text = format_number(mean, dec)
                rounded.setdefault(col, []).append(float(text))
                if math.isfinite(low) and math.isfinite(high):
                    text += f" [{format_number(low, dec)}, {format_number(high, dec)}]"
                elif n >= 2 and math.isfinite(std):
                    text += " ± " + format_number(std, dec)
                texts.append(text)
            self.text.append(texts)
        self.bold = [[False] * len(self.columns) for _ in self.rows]
        for j, col in enumerate(self.columns):
            values = [v for v in rounded.get(col, []) if v is not None]
            if col in unranked or len(values) < 2 or len(set(values)) == 1:
                continue  # all rows equal: bold on every row would say nothing
            best = min(values) if col in lower else max(values)
            for i, v in enumerate(rounded[col]):
                self.bold[i][j] = v == best

    def spans(self, level: int) -> list[tuple[str, int]]:
        """(label, width) runs of columns sharing the header prefix up to ``level``."""
        out: list[tuple[str, int]] = []
        prev = None
        for col in self.columns:
            prefix = col[: level + 1]
            if prefix == prev:
                out[-1] = (out[-1][0], out[-1][1] + 1)
            else:
                out.append((_label(col[level]), 1))
                prev = prefix
        return out


# ------------------------------------------------------------------------------------------------ CSV
# The runs behind a line: their names (results/runs/<name>), then each key's distinct values, and the
# config hash of each named run in the same order; several values are joined with ";".
RUN_COLUMNS = ("runs", "run_train_set", "run_method", "run_gamma", "run_fraction", "run_seeds", "run_config_hash")


def _run_columns(runs: list[dict]) -> list[str]:
    runs = sorted(runs, key=lambda r: (r["train_set"], r["method"], r["gamma"], r["fraction"], r["seed"]))

    def distinct(key):
        return ";".join(dict.fromkeys(str(r[key]) for r in runs))

    names = ";".join(paths.run_name(r, numbers=str) for r in runs)
    return [names, distinct("train_set"), distinct("method"), distinct("gamma"), distinct("fraction"),
            distinct("seed"), ";".join(str(r.get("config_hash") or "") for r in runs)]


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    lines = []
    names = [str(n) for n in df.index.names] + list(df.columns.names[:-1])
    runs = df.attrs.get("runs") or {}
    # cells read from one array by position: each df.loc would deep-copy df.attrs (the runs behind every
    # cell), seconds for a table of a few hundred cells
    values = df.to_numpy(dtype=object)
    column = {c: j for j, c in enumerate(df.columns)}
    for i, row in enumerate(df.index):
        row_t = row if isinstance(row, tuple) else (row,)
        for col in [c[:-1] for c in df.columns if c[-1] == "mean"]:
            mean, std, n = (values[i, column[col + (s,)]] for s in ("mean", "std", "n"))
            if not n:
                continue
            low, high = (values[i, column[col + (s,)]] if col + (s,) in column else math.nan
                         for s in ("ci_low", "ci_high"))
            behind = _run_columns(runs.get((row_t, col), [])) if runs else []
            lines.append(list(row_t) + list(col) + [mean, std, int(n), low, high] + behind)
    tidy = pd.DataFrame(lines, columns=names + ["mean", "std", "n", "ci_low", "ci_high"]
                        + (list(RUN_COLUMNS) if runs else []))
    tidy["scale"] = df.attrs.get("scale")
    tidy["experiment"] = df.attrs.get("experiment")
    tidy.to_csv(path, index=False)


def read_table_csv(path) -> pd.DataFrame:
    """A table's tidy CSV back as a DataFrame (one line per cell)."""
    return pd.read_csv(path, keep_default_na=False, na_values=[""])


# ----------------------------------------------------------------------------------------------- HTML
def _html_text(text: str) -> str:
    return html.escape(text).replace("-&gt;", "→")


def _html(cells: _Cells, caption: str, name: str, scale: str, experiment: str) -> str:
    levels = len(cells.col_names)
    out = [f'<table class="hnclip-table" id="table-{html.escape(name)}" data-experiment="{html.escape(experiment)}"'
           f' data-scale="{html.escape(scale)}">',
           f"<caption>{_html_text(caption)}</caption>", "<thead>"]
    for level in range(levels):
        out.append("<tr>")
        if level == 0:
            out += [f'<th scope="col" rowspan="{levels}">{_html_text(n)}</th>' for n in cells.row_names]
        for label, width in cells.spans(level):
            span = f' colspan="{width}"' if width > 1 else ""
            out.append(f'<th scope="col"{span}>{_html_text(label)}</th>')
        out.append("</tr>")
    out += ["</thead>", "<tbody>"]
    for row, texts, bolds in zip(cells.rows, cells.text, cells.bold, strict=True):
        out.append("<tr>" + "".join(f'<th scope="row">{_html_text(_label(v))}</th>' for v in row)
                   + "".join(f"<td><strong>{_html_text(t)}</strong></td>" if b else f"<td>{_html_text(t)}</td>"
                             for t, b in zip(texts, bolds, strict=True)) + "</tr>")
    out += ["</tbody>", "</table>"]
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------------------------------- Markdown
def _md_text(text: str) -> str:
    return text.replace("|", "\\|").replace("->", "→")


def _markdown(cells: _Cells, caption: str) -> str:
    header = cells.row_names + [" ".join(_label(v) for v in col) for col in cells.columns]
    out = [f"*{_md_text(caption)}*", "", "| " + " | ".join(_md_text(h) for h in header) + " |",
           "|" + "|".join(["---"] * len(cells.row_names) + ["---:"] * len(cells.columns)) + "|"]
    for row, texts, bolds in zip(cells.rows, cells.text, cells.bold, strict=True):
        body = [_md_text(_label(v)) for v in row]
        body += [f"**{_md_text(t)}**" if b else _md_text(t) for t, b in zip(texts, bolds, strict=True)]
        out.append("| " + " | ".join(body) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- LaTeX
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                "±": r"$\pm$", "Δ": r"$\Delta$", "−": r"$-$", "—": "--", "γ": r"$\gamma$", "×": r"$\times$"}


def _tex_text(text: str) -> str:
    escaped = "".join(_TEX_ESCAPES.get(ch, ch) for ch in text)
    return escaped.replace("->", r"$\to$")


def _latex(cells: _Cells, caption: str, name: str) -> str:
    n_rows = len(cells.row_names)
    levels = len(cells.col_names)
    out = ["% needs \\usepackage{booktabs,graphicx}", r"\begin{table}[t]", r"\centering",
           rf"\caption{{{_tex_text(caption)}}}", rf"\label{{tab:{name}}}", r"\resizebox{\linewidth}{!}{%",
           r"\begin{tabular}{" + "l" * n_rows + "r" * len(cells.columns) + "}", r"\toprule"]
    for level in range(levels):
        lead = [_tex_text(n) for n in cells.row_names] if level == levels - 1 else [""] * n_rows
        parts, rules, start = [], [], n_rows + 1
        for label, width in cells.spans(level):
            parts.append(rf"\multicolumn{{{width}}}{{c}}{{{_tex_text(label)}}}" if width > 1 else _tex_text(label))
            if level < levels - 1:
                rules.append(rf"\cmidrule(lr){{{start}-{start + width - 1}}}")
            start += width
        out.append(" & ".join(lead + parts) + r" \\")
        if rules:
            out.append(" ".join(rules))
    out.append(r"\midrule")
    for row, texts, bolds in zip(cells.rows, cells.text, cells.bold, strict=True):
        body = [_tex_text(_label(v)) for v in row]
        body += [rf"\textbf{{{_tex_text(t)}}}" if b else _tex_text(t) for t, b in zip(texts, bolds, strict=True)]
        out.append(" & ".join(body) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}}", r"\end{table}"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------- write
def write_table(df: pd.DataFrame, prefix, caption: str, scale: str | None = None) -> dict[str, Path]:
    """Write ``prefix.csv``, ``.html`` (a ``<table>`` fragment), ``.md`` and ``.tex``; returns the paths.

    ``scale`` defaults to the table's own (``df.attrs['scale']``), else to the one scale the caption names
    ("toy-scale ..."); the caption gains "(toy-scale run)" or "(paper-scale run)" unless it already says so. A table of unknown scale is refused, since an unlabelled
    toy number read as the paper's is the one mistake this report must not allow.
    """
    scale = scale or df.attrs.get("scale")
    if scale is None:  # a caption that names exactly one scale labels the table well enough
        named = [s for s in SCALES if f"{s}-scale" in caption]
        scale = named[0] if len(named) == 1 else None
    if scale is None:
        raise ValueError(f"table {prefix}: unknown scale; pass scale= one of {', '.join(SCALES)}")
    label = scale_label(scale)
    if label not in caption:
        caption = f"{caption} ({label})"
    df.attrs["scale"] = scale
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    cells = _Cells(df)
    experiment = str(df.attrs.get("experiment", ""))
    paths = {ext: prefix.with_name(prefix.name + "." + ext) for ext in ("csv", "html", "md", "tex")}
    _write_csv(df, paths["csv"])
    paths["html"].write_text(_html(cells, caption, prefix.name, scale, experiment), encoding="utf-8")
    paths["md"].write_text(_markdown(cells, caption), encoding="utf-8")
    paths["tex"].write_text(_latex(cells, caption, prefix.name), encoding="utf-8")
    return paths
