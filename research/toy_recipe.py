"""Choose the embedded default's learning rate on the validation split, never on the test split.

One rule for every method (issue 20, condition 8): plain Long-CLIP fine-tuning is trained at each rate
of a grid, with the embedded default's every other setting, and scored on the synthetic benchmark's
``val`` split (held out from ``test``, rendered from streams of its own) after each epoch; the rate
with the best mean of i2t and t2i R@1 at the last epoch is the toy's Long-CLIP rate. Every other
method keeps its ratio to Long-CLIP's rate in ``config/paper.yaml`` (the authors' recipes: GOAL and
StructXLIP 5x, the adapters 100x, FineLIP's aggregators 200x), so no method is tuned on its own and
none toward HN; a method whose val R@1 after the budget at that rate is below the zero-shot backbone's
(it diverged) steps its rate down 10x until it is not (``--method`` trains another method's run at the
given rates to check it). The printed table is what ``config/config.yaml``'s comments on ``train.lr`` record.

Needs a results folder with the backbone and the prepared train and val splits, e.g. after

    .venv/bin/snakemake --cores all results/backbone/model results/data/synthetic/val.csv

    .venv/bin/python research/toy_recipe.py --results results --lrs 3e-5 1e-4 3e-4 1e-3

Runs one training job per rate, one after the other (each ~1-2 min on 2 cores); their folders go to
``--out`` (default: a temporary folder), never into the checkout's results.
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from hnclip import cpu_kernels, plan  # noqa: E402
from hnclip.config.loading import load_config  # noqa: E402
from hnclip.frameworks.registry import framework_entry  # noqa: E402


def overrides_at(config: dict, benchmark: str, lr: float, method: str = "longclip") -> list[str]:
    """The --set items of the embedded default's ``method`` run (seed of the first), its rate replaced."""
    run = plan.Run(benchmark, method, plan.format_number(0.0), "1", config["seeds"][0])
    items = [item for item in plan.train_overrides(config, run) if not item.startswith("lr=")]
    return items + [f"lr={lr!r}", "eval_every_epoch=true"]


def last_epoch_scores(epochs_csv: Path) -> list[dict]:
    with open(epochs_csv, newline="") as f:
        return [{k: float(v) for k, v in row.items() if k != "benchmark"} for row in csv.DictReader(f)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--results", type=Path, default=REPO / "results")
    parser.add_argument("--config", nargs="+", default=[str(REPO / "config" / "config.yaml")])
    parser.add_argument("--benchmark", default="synthetic")
    parser.add_argument("--lrs", type=float, nargs="+", default=[3e-5, 1e-4, 3e-4, 1e-3])
    parser.add_argument(
        "--method",
        default="longclip",
        help="the method whose run is trained at each rate (default: plain Long-CLIP FT, whose best "
        "rate sets the others'; another method to check its rate at its ratio on val)",
    )
    parser.add_argument(
        "--out", type=Path, default=None, help="folder for the runs (default: a temporary one)"
    )
    args = parser.parse_args(argv)
    config = load_config(args.config)
    data = args.results / "data" / args.benchmark
    for name in ("train.csv", "train_images", "val.csv", "val_images"):
        if not (data / name).exists():
            sys.exit(f"toy_recipe: {data / name} is missing; build it first (see this script's docstring)")
    out = args.out or Path(tempfile.mkdtemp(prefix="hnclip-recipe-"))
    rows = []
    for lr in args.lrs:
        run_dir = out / f"lr{lr:g}"
        command = [
            sys.executable,
            "-m",
            "hnclip",
            "train",
            "--init",
            str(args.results / "backbone" / "model"),
            "--manifest",
            str(data / "train.csv"),
            "--images",
            str(data / "train_images"),
            "--eval-manifest",
            str(data / "val.csv"),
            "--eval-images",
            str(data / "val_images"),
            "--out",
            str(run_dir),
            "--checkpoint-dir",
            str(out / "checkpoints" / f"lr{lr:g}"),
            "--threads",
            "2",
        ]
        framework = config["methods"][args.method]["framework"]
        for product in framework_entry(framework).products:  # GOAL's segments, StructXLIP's edges too
            command += ["--product", f"{product}={data / f'train_{product}'}"]
        for item in overrides_at(config, args.benchmark, lr, args.method):
            command += ["--set", item]
        print(f"lr {lr:g}: training ({run_dir})", flush=True)
        # the config's kernel pin, as the workflow's jobs get it (hnclip.cpu_kernels)
        env = {**os.environ, cpu_kernels.ENV_SETTING: config["cpu_kernels"]}
        subprocess.run(command, check=True, stderr=subprocess.DEVNULL, env=env)
        epochs = last_epoch_scores(run_dir / "epochs.csv")
        rows.append((lr, epochs))
    print(
        f"\nval R@1 of {args.method} ({args.benchmark} val split, {config['train']['epochs']} epochs; "
        "mean of i2t and t2i per epoch):"
    )
    print(f"{'lr':>8s}  " + "  ".join(f"epoch {e['epoch']:.0f}" for e in rows[0][1]))
    for lr, epochs in rows:
        print(f"{lr:8.0e}  " + "  ".join(f"{(e['i2t_r1'] + e['t2i_r1']) / 2:7.1f}" for e in epochs))
    best = max(rows, key=lambda r: (r[1][-1]["i2t_r1"] + r[1][-1]["t2i_r1"]) / 2)
    print(f"chosen: lr {best[0]:g} (best last-epoch val R@1)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
