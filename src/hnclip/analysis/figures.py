"""The paper's figures, each written as PNG (for the HTML report) and SVG (for people who zoom).

Plotting functions take data (tables from :mod:`hnclip.analysis.tables`, dynamics logs, geometry dicts)
and an output prefix; the ``plot_*(spec, out_prefix)`` wrappers at the bottom are what ``hnclip figure``
calls: they load what a spec points to and draw it. Matplotlib runs headless (Agg), so figures render
on cluster nodes without a display.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from hnclip import plan  # noqa: E402
from hnclip.analysis.records import load_dynamics, load_records, load_spec  # noqa: E402
from hnclip.analysis.tables import DIRECTION_LABELS, build_epochs_table, build_table  # noqa: E402
from hnclip.experiments import experiment_entry  # noqa: E402
from hnclip.scales import scale_label

__all__ = [
    "DYNAMICS_QUANTITIES",
    "HN_METHOD",
    "NO_EPOCHS",
    "plot_caption_geometry",
    "plot_convergence",
    "plot_dynamics",
    "plot_epoch_recall",
    "plot_epochs",
    "plot_error_vs_infonce",
    "plot_experiment",
    "plot_gradient_dynamics",
    "method_label",
    "plot_no_data",
    "plot_sweep",
    "save_figure",
]

# quantity -> (title, [(dynamics column, legend label)], y label, log y)
DYNAMICS_QUANTITIES: dict[str, tuple[str, list[tuple[str, str]], str, bool]] = {
    "loss": ("loss", [("infonce", "standard (InfoNCE)"), ("loss", "boosted (HN objective)")], "loss", False),
    "grad_norm": ("gradient norm", [("grad_norm_standard", "standard"), ("grad_norm_boosted", "boosted")],
                  "norm (log)", True),
    "grad_ratio": ("gradient-norm ratio", [("grad_ratio", "boosted / standard")], "ratio (log)", True),
    "grad_cosine": ("gradient cosine", [("grad_cosine", "cos(standard, boosted)")], "cosine", False),
    "saturated_fraction": ("InfoNCE saturation", [("saturated_fraction", "saturated rows")], "fraction", False),
}
# the paper's method by its config key (declared once, in hnclip.plan): figures and the gallery find its
# rows by the runs' method, so a renamed display label (methods.hnclip.label) changes what is shown, never
# what is found
HN_METHOD = plan.REFERENCE_METHOD
# why a per-epoch figure can be empty; the figure says so instead of failing after the runs are spent
NO_EPOCHS = ("no run of the main experiment logged retrieval after each epoch "
             "(train.eval_every_epoch is false, or each main benchmark is scored on another one's runs)")


def save_figure(fig, out_prefix) -> list[Path]:
    """Write ``prefix.png`` and ``prefix.svg`` and close the figure (pyplot keeps every open figure alive).

    The SVG's bytes depend on the figure alone: without a date (matplotlib writes the time of saving) and
    with its element ids salted by a constant (by default a random one per process), so a rebuilt figure
    has the same sha256.
    """
    prefix = Path(out_prefix)
    if prefix.suffix in (".png", ".svg"):
        prefix = prefix.with_suffix("")
    prefix.parent.mkdir(parents=True, exist_ok=True)
    paths = [prefix.with_name(prefix.name + ".png"), prefix.with_name(prefix.name + ".svg")]
    fig.savefig(paths[0], dpi=130)
    # the SVG keeps the PNG's layout: constrained layout, about half of a save, is not solved again
    if fig.get_layout_engine() is not None:
        fig.set_layout_engine("none")
    with matplotlib.rc_context({"svg.hashsalt": "hnclip"}):
        fig.savefig(paths[1], metadata={"Date": None})
    plt.close(fig)
    return paths


def plot_no_data(out_prefix, title: str, reason: str) -> list[Path]:
    """A placeholder figure that says why there is nothing to draw: a config may legitimately leave a
    figure without data (per-epoch evaluation off), and the report then shows the reason in its place."""
    import textwrap

    with plt.rc_context({"svg.fonttype": "none"}):  # the SVG keeps the reason as text, not glyph paths
        fig, ax = plt.subplots(figsize=(6, 2.2), layout="constrained")
        ax.axis("off")
        ax.set_title(title, fontsize=10)
        ax.text(0.5, 0.5, "\n".join(textwrap.wrap("No data: " + reason, 70)), ha="center", va="center",
                fontsize=9, transform=ax.transAxes, gid="no-data")
        return save_figure(fig, out_prefix)


def method_label(spec: Mapping, method: str | None = None) -> str | None:
    """The row (display label) of ``method``'s runs in a spec, or None when no cell trains it; without
    ``method``, the spec's reference method (``roles.reference``, HN-CLIP's key)."""
    method = method or spec.get("roles", {}).get("reference", HN_METHOD)
    return next((c["row"] for c in spec["cells"] if not c.get("zeroshot") and c["run"]["method"] == method), None)


def _style(n_points: int) -> dict:
    # toy runs log a handful of steps: markers keep single points visible
    return {"marker": "o", "markersize": 3} if n_points < 30 else {}


# -------------------------------------------------------------------------------------- gradient dynamics
def _draw_quantity(ax, dynamics: pd.DataFrame, quantity: str, where: str) -> None:
    title, series, ylabel, log_y = DYNAMICS_QUANTITIES[quantity]
    drawn = False
    for column, label in series:
        if column not in dynamics.columns:
            raise ValueError(f"dynamics of {where}: no column {column!r} (has {list(dynamics.columns)})")
        logged = dynamics[["step", column]].apply(pd.to_numeric, errors="coerce").dropna()
        if log_y:
            logged = logged[logged[column] > 0]
        if len(logged):
            ax.plot(logged["step"], logged[column], label=label, linewidth=1.2, **_style(len(logged)))
            drawn = True
    if not drawn:
        ax.text(0.5, 0.5, "not logged", ha="center", va="center", transform=ax.transAxes, color="0.4")
    if log_y and drawn:
        ax.set_yscale("log")
        # plain numbers: ratios and norms often span less than a decade, where 10^x labels are unreadable
        ax.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
        ax.yaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
    if quantity == "grad_ratio" and drawn:
        ax.axhline(1.0, color="0.5", linestyle=":", linewidth=1)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.tick_params(which="both", labelsize=7)
    ax.grid(alpha=0.3)


def plot_gradient_dynamics(panels: Mapping[tuple[float, str], pd.DataFrame], out_prefix,
                           quantities=tuple(DYNAMICS_QUANTITIES), per_quantity: bool = True) -> list[Path]:
    """Standard vs boosted gradients over training, per (data fraction, benchmark).

    ``panels`` maps (fraction, benchmark) to a run's dynamics log. Writes ``prefix`` (per benchmark a block
    of rows = fraction, columns = quantity) and, with ``per_quantity``, ``prefix_{quantity}`` laid out as
    the paper's appendix C (rows = fraction, columns = benchmark). Returns every written path.
    """
    if not panels:
        raise ValueError("gradient dynamics figure: no runs given")
    unknown = [q for q in quantities if q not in DYNAMICS_QUANTITIES]
    if unknown:
        raise ValueError(f"unknown dynamics quantity {unknown[0]!r}; known: {', '.join(DYNAMICS_QUANTITIES)}")
    fractions = sorted({float(f) for f, _ in panels})
    benchmarks = list(dict.fromkeys(b for _, b in panels))
    written = []

    fig = plt.figure(figsize=(2.9 * len(quantities) + 0.6, 2.1 * len(fractions) * len(benchmarks) + 0.8),
                     layout="constrained")
    subfigs = np.atleast_1d(fig.subfigures(len(benchmarks), 1))
    for sub, bench in zip(subfigs, benchmarks, strict=True):
        sub.suptitle(str(bench), fontsize=11, fontweight="bold")
        axes = np.atleast_2d(sub.subplots(len(fractions), len(quantities), squeeze=False))
        for i, f in enumerate(fractions):
            for j, q in enumerate(quantities):
                ax = axes[i, j]
                dyn = panels.get((f, bench))
                if dyn is None:
                    ax.text(0.5, 0.5, "no run", ha="center", va="center", transform=ax.transAxes, color="0.4")
                else:
                    _draw_quantity(ax, dyn, q, f"fraction {f:g}, {bench}")
                if i == 0:
                    ax.set_title(DYNAMICS_QUANTITIES[q][0], fontsize=9)
                if j == 0:
                    ax.annotate(f"fraction {f:g}", xy=(-0.42, 0.5), xycoords="axes fraction", rotation=90,
                                ha="center", va="center", fontsize=9)
                if i == len(fractions) - 1:
                    ax.set_xlabel("step", fontsize=8)
                if i == 0 and dyn is not None and len(DYNAMICS_QUANTITIES[q][1]) > 1:
                    ax.legend(fontsize=6)
    written += save_figure(fig, out_prefix)

    if per_quantity:
        for q in quantities:
            fig, axes = plt.subplots(len(fractions), len(benchmarks), squeeze=False, layout="constrained",
                                     figsize=(3.2 * len(benchmarks) + 0.6, 2.1 * len(fractions) + 0.6))
            fig.suptitle(DYNAMICS_QUANTITIES[q][0])
            for i, f in enumerate(fractions):
                for j, bench in enumerate(benchmarks):
                    ax = axes[i, j]
                    dyn = panels.get((f, bench))
                    if dyn is None:
                        ax.text(0.5, 0.5, "no run", ha="center", va="center", transform=ax.transAxes)
                    else:
                        _draw_quantity(ax, dyn, q, f"fraction {f:g}, {bench}")
                    if i == 0:
                        ax.set_title(str(bench), fontsize=9)
                    if j == 0:
                        ax.set_ylabel(f"fraction {f:g}\n{DYNAMICS_QUANTITIES[q][2]}", fontsize=8)
                    if i == len(fractions) - 1:
                        ax.set_xlabel("step", fontsize=8)
                    if i == 0 and j == 0 and dyn is not None and len(DYNAMICS_QUANTITIES[q][1]) > 1:
                        ax.legend(fontsize=6)
            written += save_figure(fig, f"{Path(out_prefix).with_suffix('')}_{q}")
    return written


# ------------------------------------------------------------------------------ curves from tables
def _rows_of(table, benchmark, method):
    """The per-epoch rows of one method on one benchmark (index levels ``benchmark``, ``method``, ``epoch``)."""
    index = table.index
    return table[(index.get_level_values("benchmark") == benchmark) & (index.get_level_values("method") == method)]


def _row_values(table: pd.DataFrame, col: tuple) -> tuple[np.ndarray, np.ndarray]:
    return table[col + ("mean",)].to_numpy(float), np.nan_to_num(table[col + ("std",)].to_numpy(float))


def plot_sweep(table: pd.DataFrame, x_level: str, out_prefix, log_x: bool = False,
               mark_x: float | None = None, title: str = "") -> list[Path]:
    """R@1 against a swept value (gamma, data fraction): rows = direction, columns = group, line per method.

    ``table`` is a fractions or gamma_sweep table (row level ``x_level``, other row levels name the line);
    error bars are the std over seeds where there are several.
    """
    if x_level not in table.index.names:
        raise ValueError(f"sweep figure: table rows have no level {x_level!r} (levels {table.index.names})")
    groups = list(dict.fromkeys(c[0] for c in table.columns))
    line_levels = [n for n in table.index.names if n != x_level]
    lines = (list(dict.fromkeys(table.index.droplevel(x_level))) if line_levels else [None])
    scale = table.attrs.get("scale")
    fig, axes = plt.subplots(len(DIRECTION_LABELS), len(groups), squeeze=False, layout="constrained",
                             figsize=(3.6 * len(groups) + 0.6, 5.4))
    for i, d in enumerate(DIRECTION_LABELS):
        for j, g in enumerate(groups):
            ax = axes[i, j]
            for line in lines:
                sub = table if line is None else table.xs(line, level=line_levels[0] if len(line_levels) == 1
                                                          else line_levels, drop_level=False)
                xs = sub.index.get_level_values(x_level).to_numpy(float)
                mean, std = _row_values(sub, (g, d, "R@1"))
                if str(line) == plan.ZEROSHOT_ROW:  # the backbone before fine-tuning: a reference level
                    if np.isfinite(mean).any():
                        ax.axhline(float(np.nanmean(mean)), color="0.4", linestyle="--", linewidth=1, label=line)
                    continue
                keep = np.isfinite(mean)
                order = np.argsort(xs[keep])
                ax.errorbar(xs[keep][order], mean[keep][order], yerr=std[keep][order], capsize=3,
                            label=None if line is None else str(line), **_style(len(xs)))
            if mark_x is not None:
                ax.axvline(mark_x, color="0.5", linestyle=":", linewidth=1)
            if log_x:
                ax.set_xscale("log")
            ax.set_title(f"{g}: {d.replace('->', '→')} R@1", fontsize=9)
            ax.set_xlabel(x_level if x_level != "gamma" else "γ", fontsize=8)
            ax.set_ylabel("R@1 (%)", fontsize=8)
            ax.grid(alpha=0.3)
            if lines != [None] and i == 0 and j == 0:
                ax.legend(fontsize=7)
    if title or scale:
        fig.suptitle(f"{title} ({scale_label(scale)})" if scale else title, fontsize=10)
    return save_figure(fig, out_prefix)


def plot_epoch_recall(table: pd.DataFrame, out_prefix, zero_shot: Mapping | None = None) -> list[Path]:
    """R@1 after each epoch per method (an epochs table): rows = benchmark, columns = direction. ``zero_shot``:
    (benchmark, direction label) -> the zero-shot backbone's R@1, drawn as a dotted horizontal line."""
    benchmarks = list(dict.fromkeys(table.index.get_level_values("benchmark")))
    methods = list(dict.fromkeys(table.index.get_level_values("method")))
    if not benchmarks:
        return plot_no_data(out_prefix, "R@1 per epoch", NO_EPOCHS)
    fig, axes = plt.subplots(len(benchmarks), len(DIRECTION_LABELS), squeeze=False, layout="constrained",
                             figsize=(8, 3.0 * len(benchmarks) + 0.6))
    for i, bench in enumerate(benchmarks):
        for j, d in enumerate(DIRECTION_LABELS):
            ax = axes[i, j]
            for method in methods:
                sub = _rows_of(table, bench, method)
                if sub.empty:
                    continue
                epochs = sub.index.get_level_values("epoch").to_numpy(float)
                mean, std = _row_values(sub, (d, "R@1"))
                ax.plot(epochs, mean, label=str(method), **_style(len(epochs)))
                ax.fill_between(epochs, mean - std, mean + std, alpha=0.15)
            if (zero_shot or {}).get((bench, d)) is not None:
                ax.axhline(zero_shot[(bench, d)], color="0.4", linestyle=":", linewidth=1.2, label="zero-shot")
            ax.set_title(f"{bench}: {d.replace('->', '→')} R@1", fontsize=9)
            ax.set_xlabel("epoch", fontsize=8)
            ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
            ax.set_ylabel("R@1 (%)", fontsize=8)
            ax.grid(alpha=0.3)
            if i == 0 and j == 0:
                ax.legend(fontsize=7)
    scale = table.attrs.get("scale")
    if scale:
        fig.suptitle(f"R@1 per epoch ({scale_label(scale)})", fontsize=10)
    return save_figure(fig, out_prefix)


# ------------------------------------------------------------------------------------ caption geometry
def plot_caption_geometry(geometries: Mapping[str, Mapping], out_prefix) -> list[Path]:
    """Histogram of in-batch off-diagonal caption cosine per benchmark, with the mean and hardest marked."""
    if not geometries:
        raise ValueError("caption geometry figure: no geometry results given")
    fig, axes = plt.subplots(1, len(geometries), squeeze=False, layout="constrained",
                             figsize=(4.6 * len(geometries), 3.4))
    for ax, (name, geo) in zip(axes[0], geometries.items(), strict=True):
        counts = np.asarray(geo["histogram"]["counts"], dtype=float)
        edges = np.asarray(geo["histogram"]["bin_edges"], dtype=float)
        share = counts / max(counts.sum(), 1.0)
        ax.stairs(share, edges, fill=True, alpha=0.6, label="off-diagonal pairs")
        ax.axvline(geo["mean_offdiag"], color="C1", label=f"mean {geo['mean_offdiag']:.3f}")
        ax.axvline(geo["mean_hardest"], color="C3", linestyle="--", label=f"hardest {geo['mean_hardest']:.3f}")
        ax.axvspan(0.8, 1.0, color="0.85", zorder=0,
                   label=f"≥ 0.8: {100 * geo['frac_ge_0.8']:.0f} %, ≥ 0.9: {100 * geo['frac_ge_0.9']:.0f} %")
        nonzero = np.flatnonzero(counts)
        lo = edges[nonzero[0]] if nonzero.size else -1.0
        ax.set_xlim(max(-1.0, math.floor((lo - 0.05) * 10) / 10), 1.0)
        ax.set_title(f"{name} (batch {geo['batch_size']}, {geo['n_batches']} batches)", fontsize=9)
        ax.set_xlabel("caption-caption cosine", fontsize=8)
        ax.set_ylabel("share of pairs", fontsize=8)
        ax.legend(fontsize=7, loc="upper left")
    return save_figure(fig, out_prefix)


# ------------------------------------------------------------------------- spec wrappers (hnclip figure)
def _spec_table(spec) -> pd.DataFrame:
    spec = load_spec(spec)
    return build_table(spec, load_records(spec))


def plot_experiment(spec, out_prefix) -> list[Path]:
    """The figure an experiment's registration row declares (:class:`hnclip.experiments.FigureLayout`), drawn
    from its table: a "sweep" is R@1 against the table's swept value. ``hnclip figure <experiment>``."""
    spec = load_spec(spec)
    entry = experiment_entry(spec["experiment"])
    layout = entry.figure
    if layout is None:
        raise ValueError(f"experiment {entry.name!r} declares no figure (its registration row's figure is None)")
    # a marked value is the spec's (e.g. the config's gamma); a hand-made spec without it gets no mark
    mark = spec.get(layout.mark) if layout.mark else None
    return plot_sweep(_spec_table(spec), entry.table.swept, out_prefix, log_x=layout.log_x, mark_x=mark,
                      title=layout.title)


def plot_epochs(spec, out_prefix, zeroshot: bool = False) -> list[Path]:
    """The epochs figure of ``spec``; ``zeroshot``: its zero-shot rows' R@1 as lines (their records must exist)."""
    lines = {}
    if zeroshot:
        spec = load_spec(spec)
        for cell in spec["cells"]:
            if cell.get("zeroshot"):
                metrics = json.loads(Path(cell["eval_path"]).read_text(encoding="utf-8"))["metrics"]
                for label, key in zip(DIRECTION_LABELS, ("i2t_r1", "t2i_r1"), strict=True):
                    lines[(cell["group"], label)] = float(metrics[key])
    return plot_epoch_recall(build_epochs_table(spec), out_prefix, lines)


def dynamics_panels(spec) -> dict[tuple[float, str], pd.DataFrame]:
    """The HN runs' dynamics logs of a (fractions) spec, keyed (fraction, group): first HN row, lowest seed.

    The standard-vs-boosted comparison is logged on the HN run's own batches, so InfoNCE-only runs are
    not needed here. The choice is :func:`hnclip.plan.dynamics_figure_cells`, which also makes these
    runs probe (``train.probe_runs: read``).
    """
    from hnclip.plan import dynamics_figure_cells

    spec = load_spec(spec)
    chosen = dynamics_figure_cells(spec)
    if not chosen:
        raise ValueError(f"{spec['experiment']} spec has no HN run (gamma > 0) to draw gradient dynamics from")
    return {key: load_dynamics(cell["run_dir"]) for key, cell in chosen.items()}


def plot_dynamics(spec, out_prefix) -> list[Path]:
    return plot_gradient_dynamics(dynamics_panels(spec), out_prefix)


# ------------------------------------------------------------------------ error beside InfoNCE per epoch
def plot_error_vs_infonce(table: pd.DataFrame, out_prefix, highlight: str | None = None) -> list[Path]:
    """Retrieval error (100 - R@1) per epoch and direction beside the epoch's mean standard InfoNCE.

    ``table`` is a convergence table (:func:`hnclip.analysis.tables.build_convergence_table`): one row of
    panels per benchmark; left, error per epoch (solid I→T, dashed T→I) per method; right, each run's
    standard InfoNCE averaged over the epoch's steps (log scale: it falls by decades when it saturates).
    The paper's §2.4 reads these side by side: error keeps falling after InfoNCE has flattened.
    ``highlight``: the row drawn thicker (the spec wrapper passes HN-CLIP's, found by method key).
    """
    benchmarks = list(dict.fromkeys(table.index.get_level_values("benchmark")))
    methods = list(dict.fromkeys(table.index.get_level_values("method")))
    if not benchmarks:
        return plot_no_data(out_prefix, "Retrieval error beside standard InfoNCE", NO_EPOCHS)
    fig, axes = plt.subplots(len(benchmarks), 2, squeeze=False, layout="constrained",
                             figsize=(9, 3.1 * len(benchmarks) + 0.6))
    for i, bench in enumerate(benchmarks):
        ax_err, ax_loss = axes[i]
        for j, method in enumerate(methods):
            sub = _rows_of(table, bench, method)
            if sub.empty:
                continue
            epochs = sub.index.get_level_values("epoch").to_numpy(float)
            width = 2.2 if method == highlight else 1.0
            for d, style in zip(DIRECTION_LABELS, ("-", "--"), strict=True):
                ax_err.plot(epochs, sub[(d, "error", "mean")].to_numpy(float), linestyle=style, color=f"C{j}",
                            linewidth=width, label=f"{method} {d.replace('->', '→')}", **_style(len(epochs)))
            loss = sub[("both", "InfoNCE", "mean")].to_numpy(float)
            keep = np.isfinite(loss) & (loss > 0)
            if keep.any():
                ax_loss.plot(epochs[keep], loss[keep], color=f"C{j}", linewidth=width, label=str(method),
                             **_style(len(epochs)))
        ax_err.set_title(f"{bench}: retrieval error (100 − R@1)", fontsize=9)
        ax_err.set_ylabel("error (%)", fontsize=8)
        ax_loss.set_title(f"{bench}: standard InfoNCE, epoch mean", fontsize=9)
        ax_loss.set_ylabel("InfoNCE (log)", fontsize=8)
        if ax_loss.lines:
            ax_loss.set_yscale("log")
            # plain numbers: an InfoNCE that has not saturated spans less than a decade (1e-4 when it has)
            ax_loss.yaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
            ax_loss.yaxis.set_minor_formatter(ticker.LogFormatter(labelOnlyBase=False, minor_thresholds=(1, 0.5)))
        for ax in (ax_err, ax_loss):
            ax.set_xlabel("epoch", fontsize=8)
            ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))
            ax.tick_params(which="both", labelsize=7)
            ax.grid(alpha=0.3)
        if i == 0:
            ax_err.legend(fontsize=6, ncol=2)
            if ax_loss.lines:
                ax_loss.legend(fontsize=6)
    scale = table.attrs.get("scale")
    fig.suptitle("Retrieval error beside standard InfoNCE" + (f" ({scale_label(scale)})" if scale else ""),
                 fontsize=10)
    return save_figure(fig, out_prefix)


def plot_convergence(spec, out_prefix) -> list[Path]:
    from hnclip.analysis.tables import build_convergence_table

    spec = load_spec(spec)
    return plot_error_vs_infonce(build_convergence_table(spec), out_prefix, highlight=method_label(spec))
