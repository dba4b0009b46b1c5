"""Which cells of a spec a reader draws: the runs of the gradient-dynamics figure and of the epochs table.
Below the plan's run settings and readers, which both ask it."""

from __future__ import annotations

from hnclip.plan.grid import _cell_run, is_zeroshot

__all__ = ["dynamics_figure_cells", "epoch_cells"]


def dynamics_figure_cells(spec: dict) -> dict[tuple[float, str], dict]:
    """The cells whose runs the gradient-dynamics figure draws (``hnclip figure dynamics``, a fractions
    spec): per (fraction, group), the first HN row's (gamma > 0) cell of the lowest seed."""
    hn_cells = [c for c in spec["cells"] if not is_zeroshot(c) and float(c["run"]["gamma"]) > 0]
    if not hn_cells:
        return {}
    row = hn_cells[0]["row"]
    chosen: dict[tuple[float, str], dict] = {}
    for cell in hn_cells:
        if cell["row"] != row:
            continue
        key = (float(cell["x"] if cell.get("x") is not None else cell["run"]["fraction"]), cell["group"])
        if key not in chosen or float(cell["run"]["seed"]) < float(chosen[key]["run"]["seed"]):
            chosen[key] = cell
    return chosen


def epoch_cells(spec: dict) -> list[dict]:
    """Cells with a run whose epochs.csv scores the cell's own benchmark (zero-shot cells have no run)."""
    cells = []
    for cell in spec["cells"]:
        if cell.get("zeroshot"):
            continue
        if not cell.get("run_dir"):
            raise ValueError(f"{spec['experiment']} spec: cell of run {_cell_run(cell).path} has no run_dir")
        if cell.get("epochs_benchmark", cell["eval_benchmark"]) != cell["eval_benchmark"]:
            continue
        cells.append(cell)
    return cells
