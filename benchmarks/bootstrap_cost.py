"""What an interval costs: the paired bootstrap of :mod:`hnclip.analysis.bootstrap` on rank arrays of the
paper's test sizes, printed as seconds per interval (no encoding pass: the ranks are stored).

    .venv/bin/python benchmarks/bootstrap_cost.py [--queries 5000] [--resamples 10000]
    .venv/bin/python benchmarks/bootstrap_cost.py --quick   # 200 queries, 2 seeds, 200 resamples: a smoke run
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from hnclip.analysis.bootstrap import BootstrapSettings, Estimate, Outcomes, Samples, interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=5000, help="test images (one caption each)")
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200 queries, 2 seeds, 200 resamples: a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.seeds, args.resamples = 200, 2, 200
    rng = np.random.default_rng(0)

    def cell(rate: float) -> Estimate:
        outcomes = [Outcomes(np.where(rng.random(args.queries) < rate, 0, 5), np.where(rng.random(args.queries) < rate, 0, 5),
                             np.arange(args.queries), "bench/test") for _ in range(args.seeds)]
        samples = Samples(tuple(str(s) for s in range(args.seeds)), tuple(outcomes))
        value = float(np.mean([o.value("i2t_r1") for o in outcomes]))
        return Estimate.of(samples, "i2t_r1", value)

    a, b = cell(0.73), cell(0.70)
    settings = BootstrapSettings(resamples=args.resamples)
    start = time.perf_counter()
    low, high = interval(a, settings)
    first = time.perf_counter() - start
    start = time.perf_counter()
    d_low, d_high = interval(a - b, settings)  # a's replicates are reused; b's are new
    paired = time.perf_counter() - start
    print(f"{args.queries} queries x {args.seeds} seeds, {args.resamples} resamples")
    print(f"one cell's interval: {first:.3f} s  [{low:.2f}, {high:.2f}]")
    print(f"a paired difference (one new cell): {paired:.3f} s  [{d_low:.2f}, {d_high:.2f}]")


if __name__ == "__main__":
    main()
