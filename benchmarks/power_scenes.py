"""Would more test scenes narrow condition 7's interval? (issue 20, condition 7)

Condition 7 asks that the paired interval of HN-CLIP minus Long-CLIP FT be at most +-1.5 R@1 wide. That
interval resamples seeds and test scenes, so it narrows with more seeds or more scenes, whichever carries
its width. This script measures the scene side without retraining: it renders a larger test split of the
benchmark (the same slice and seed; scenes are drawn per index, so the first ``n_test`` of them are the
pipeline's own test scenes), evaluates the finished runs of the main comparison on the first N scenes for
each N asked, and prints condition 7 as ``hnclip.analysis.regime.power_condition`` computes it. The
number of seeds is the other side: ``snakemake --config 'seeds=[0,1,...]'`` adds seeds to the seeds
experiment (benchmarks/README.md, "Condition 7").

    .venv/bin/python benchmarks/power_scenes.py --results results --scenes 1024 4096 8192

R@1 against a larger gallery is lower (more near-duplicates to confuse), so the differences at each N are
of a harder test, not the pipeline's; the question here is only how the width moves.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from hnclip import plan  # noqa: E402
from hnclip.analysis.bootstrap import settings_from_config  # noqa: E402
from hnclip.analysis.regime import power_condition  # noqa: E402
from hnclip.config_loading import load_config  # noqa: E402


def hnclip(*args: str) -> None:
    """Run one hnclip verb; its progress bars are dropped, its log is shown if it fails."""
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    done = subprocess.run([sys.executable, "-m", "hnclip", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"hnclip {args[0]} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=REPO / "results")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml")
    parser.add_argument("--benchmark", default="synthetic")
    parser.add_argument("--scenes", type=int, nargs="+", default=[1024, 4096, 8192])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    config = load_config([args.config])
    bench = config["benchmarks"][args.benchmark]
    # the runs condition 7 reads, as the regime rule picks them (plan.main_comparison)
    main = plan.main_comparison(config, args.benchmark)
    if main is None:
        sys.exit(f"{args.config} compares {plan.REFERENCE_METHOD} with {plan.BASELINE_METHOD} on no experiment "
                 f"evaluated on {args.benchmark}")
    runs: dict[str, list[dict]] = {}
    for cell in main[1]:
        runs.setdefault(cell["run"]["method"], []).append(cell)
    def model_of(cell: dict) -> Path:  # run_dir is results/runs/...: the same place under --results
        return args.results / Path(cell["run_dir"]).relative_to("results") / "model"

    missing = [str(model_of(c)) for cells in runs.values() for c in cells if not model_of(c).exists()]
    if missing:
        sys.exit(f"runs not finished (no model): {', '.join(missing)}")
    image_size = str(config["backbone"]["image_size"])
    with tempfile.TemporaryDirectory(prefix="power_scenes-") as tmp:
        tmp = Path(tmp)
        settings = dict(bench, root=str(tmp / "files"))
        settings["synthetic"] = dict(bench["synthetic"], n_test=max(args.scenes))
        print(f"{args.benchmark}: {', '.join(f'{m} {len(r)} seeds' for m, r in runs.items())}; "
              f"rendering {max(args.scenes)} test scenes", flush=True)
        hnclip("fetch", "--benchmark", args.benchmark, "--adapter", bench["adapter"], "--root", settings["root"],
               "--settings", json.dumps(settings), "--out", str(tmp / "source.json"))
        hnclip("prepare", "--source", str(tmp / "source.json"), "--split", "test", "--image-size", image_size,
               "--manifest", str(tmp / "all.csv"), "--images", str(tmp / "images"))
        rows = (tmp / "all.csv").read_text(encoding="utf-8").splitlines(keepends=True)
        for n in sorted(args.scenes):
            manifest = tmp / f"test{n}.csv"
            manifest.write_text("".join(rows[:n + 1]), encoding="utf-8")
            records = {}
            for method, cells in runs.items():
                records[method] = []
                for cell in cells:
                    seed = plan.format_number(cell["run"]["seed"])
                    out = tmp / f"{method}_s{seed}_{n}.json"
                    hnclip("evaluate", "--model", str(model_of(cell)),
                           "--manifest", str(manifest), "--images", str(tmp / "images"),
                           "--eval-benchmark", args.benchmark, "--run-info", json.dumps(cell["run"]),
                           "--batch-size", str(config["evaluate"]["batch_size"]), "--threads", str(args.threads),
                           "--out", str(out))
                    records[method].append((seed, json.loads(out.read_text())))
            cond = power_condition(n, records, settings_from_config(config))
            print(f"  {cond['ours']}", flush=True)


if __name__ == "__main__":
    main()
