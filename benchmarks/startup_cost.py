"""What a job of the embedded default pays before it does any work: the imports of a fresh process.

Every rule runs ``python -m hnclip VERB`` in a new process, so each of the ~60 jobs of the embedded default
that load a model (training, evaluation, geometry, the regime, the gallery) imports torch, torchvision and
open_clip again. This measures, in one run on this machine, rounds of fresh processes
(each round runs every row once, in a rotated order, so that load from elsewhere falls on all alike):

- ``python``: the bare interpreter (``-c pass``);
- ``torch``, ``torch+torchvision`` (torchvision's ``ops`` import ``torch._dynamo``), ``open_clip`` (its
  package imports torchvision, timm and transformers);
- ``hnclip.models``: the models package, which imports open_clip without timm and transformers
  (hnclip.models.open_clip_import);
- ``hnclip evaluate's imports``: ``hnclip.evaluate`` and ``hnclip.models``, what the evaluate verb loads;
  ``hnclip train's imports``: ``hnclip.train``;
- with ``--results DIR`` (a finished run of the embedded default): ``evaluate job``, the whole
  ``python -m hnclip evaluate`` of the run's seed-0 Long-CLIP FT model on its test split, as the rule runs
  it (one thread), writing to a temporary folder.

It prints the median seconds per row and, with ``--results``, the share of the evaluate job spent in its
imports (the ratio of two medians of the same run): what merging evaluation into the training job, or
any other way of paying the imports once, could save per job.

    .venv/bin/python benchmarks/startup_cost.py --results results            # 5 rounds
    .venv/bin/python benchmarks/startup_cost.py --rounds 3                    # imports only
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from hnclip.cpu_kernels import ENV_SETTING  # noqa: E402  (light: no torch)

IMPORT_ROWS = {
    "python": "pass",
    "torch": "import torch",
    "torch+torchvision": "import torch, torchvision",
    "open_clip": "import open_clip",
    "hnclip.models (lean open_clip)": "import hnclip.models",
    "hnclip evaluate's imports": "import hnclip.evaluate, hnclip.models",
    "hnclip train's imports": "import hnclip.train",
}


def _environment() -> dict[str, str]:
    """The rule's environment: the checkout's src/ on PYTHONPATH, one thread, AVX2 kernels."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault(ENV_SETTING, "avx2")  # the embedded default's cpu_kernels
    return env


def evaluate_command(results: Path, out_dir: Path) -> list[str]:
    """The evaluate rule's command for the seed-0 Long-CLIP FT run of ``results`` (the embedded default)."""
    model = results / "runs/synthetic/longclip/g0/f1/s0/model"
    manifest = results / "data/synthetic/test.csv"
    for path in (model, manifest):
        if not path.exists():
            raise SystemExit(f"startup_cost.py: {path} is missing: --results must be a finished run of "
                             "the embedded default (the README's first command)")
    run_info = {"train_set": "synthetic", "method": "longclip", "gamma": 0.0, "fraction": 1.0, "seed": 0}
    return [sys.executable, "-m", "hnclip", "evaluate", "--model", str(model), "--manifest", str(manifest),
            "--images", str(results / "data/synthetic/test_images"), "--eval-benchmark", "synthetic",
            "--run-info", json.dumps(run_info), "--batch-size", "128", "--threads", "1",
            "--out", str(out_dir / "eval.json")]


def timed(command: list[str], env: dict[str, str]) -> float:
    """Wall seconds of one fresh process; a failing one stops the script with its output."""
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"startup_cost.py: {' '.join(command[:4])} ... failed ({done.returncode}):\n"
                         f"{done.stderr[-2000:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path, default=None,
                        help="a finished run of the embedded default: also time a whole evaluate job")
    parser.add_argument("--quick", action="store_true",
                        help="1 round of the bare interpreter and hnclip's evaluate imports: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds = 1
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    env = _environment()
    rows = {k: IMPORT_ROWS[k] for k in ("python", "hnclip evaluate's imports")} if args.quick else IMPORT_ROWS
    commands = {name: [sys.executable, "-c", code] for name, code in rows.items()}
    with tempfile.TemporaryDirectory(prefix="hnclip-startup-") as tmp:
        if args.results is not None:
            commands["evaluate job"] = evaluate_command(args.results.resolve(), Path(tmp))
        names = list(commands)
        seconds: dict[str, list[float]] = {name: [] for name in names}
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                seconds[name].append(timed(commands[name], env))
            print(f"round {round_index + 1}/{args.rounds} done", file=sys.stderr)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    print(f"{'fresh process':<30} {'median s':>9} {'min s':>7} {'max s':>7}   ({args.rounds} rounds, "
          f"load average {os.getloadavg()[0]:.2f} at the end)")
    for name in names:
        print(f"{name:<30} {medians[name]:>9.2f} {min(seconds[name]):>7.2f} {max(seconds[name]):>7.2f}")
    if "evaluate job" in medians:
        imports, job = medians["hnclip evaluate's imports"], medians["evaluate job"]
        print(f"imports / whole evaluate job: {imports / job:.2f} ({imports:.2f} s of {job:.2f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
