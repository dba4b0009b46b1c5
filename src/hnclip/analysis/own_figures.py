"""The training curves of a run on your own data: the loss and the learning rate per optimizer step of each
fine-tuned run of the main experiment, from its ``dynamics.csv`` (``step``, ``loss``, ``lr``: logged every step).

The loss is the run's own objective (HN-CLIP's with its margin, plain fine-tuning's InfoNCE), so two methods'
curves show each one's convergence, not which is lower; the learning rate shows the warmup and the schedule.
"""

from __future__ import annotations

from pathlib import Path

from hnclip.analysis.figures import plot_no_data, plt, save_figure
from hnclip.analysis.records import load_dynamics, load_spec
from hnclip.scales import scale_label

__all__ = ["plot_training"]


def training_curves(spec) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Run label (row, seed) -> (steps, loss, lr) of each fine-tuned run of ``spec``, in the spec's order."""
    spec = load_spec(spec)
    curves, seen = {}, set()
    for cell in spec["cells"]:
        run_dir = cell.get("run_dir")
        if cell.get("zeroshot") or not run_dir or run_dir in seen:
            continue
        seen.add(run_dir)
        frame = load_dynamics(run_dir)
        label = f"{cell['row']} (seed {cell['run']['seed']})"
        curves[label] = (frame["step"].astype(float).tolist(), frame["loss"].astype(float).tolist(),
                         frame["lr"].astype(float).tolist())
    return curves


def plot_training(spec, out_prefix) -> list[Path]:
    """Loss (left) and learning rate (right) per step of each fine-tuned run of ``spec``."""
    curves = training_curves(spec)
    if not curves:
        return plot_no_data(out_prefix, "Loss and learning rate per step", "no fine-tuned run in the main experiment")
    fig, (loss_ax, lr_ax) = plt.subplots(1, 2, layout="constrained", figsize=(9, 3.4))
    for label, (steps, loss, lr) in curves.items():
        loss_ax.plot(steps, loss, label=label, linewidth=1)
        lr_ax.plot(steps, lr, label=label, linewidth=1)
    for ax, name in ((loss_ax, "training loss (each run's own objective)"), (lr_ax, "learning rate")):
        ax.set_xlabel("optimizer step", fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.grid(alpha=0.3)
    lr_ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 3))
    loss_ax.legend(fontsize=7)
    scale = load_spec(spec).get("scale")
    if scale:
        fig.suptitle(f"Loss and learning rate per step ({scale_label(scale)})", fontsize=10)
    return save_figure(fig, out_prefix)
