"""Is any scene of the enlarged benchmarks a scene of the released backbone's pretraining pool?

The pool (``pretrain.pool``: 60,000 scenes from 16 narrow slices of each family, seeds 1000+) was drawn when
the benchmarks had 512 val and 1,024 test scenes, excluding those; the splits now hold 5,000 each. This redraws
the pool's scenes with the released recipe (no exclusions: an excluded collision only ever resamples a pool
scene) and counts the benchmark scenes (every split of every fetched synthetic benchmark) among them.

Usage, after the benchmarks are fetched (``snakemake --cores all`` or ``hnclip fetch``), about a minute:

    PYTHONPATH=$PWD/src .venv/bin/python research/pool_overlap.py [resources/synthetic resources/synthetic_shift]
"""

from __future__ import annotations

import sys

from hnclip.data.pool import benchmark_signatures
from hnclip.data.synthetic.scenes import PoolSlices, sample_pool
from hnclip.workflow_config import load_config


def main() -> None:
    pool = load_config(["config/config.yaml"])["pretrain"]["pool"]
    roots = sys.argv[1:] or ["resources/synthetic", "resources/synthetic_shift"]
    benchmarks = {}
    for root in roots:
        family, signatures = benchmark_signatures(root)
        benchmarks[family] = (signatures, root)
    slices = PoolSlices(count=pool["slices"]["count"], inventory=pool["slices"]["inventory"],
                        objects=tuple(pool["slices"]["objects"]), backgrounds=pool["slices"]["backgrounds"])
    scenes = sample_pool(dict(pool["shares"]), pool["size"], pool["seed"], set(), slices)
    drawn = {scene.signature() for scene in scenes}
    for family, (signatures, root) in benchmarks.items():
        print(f"{root} ({family}): {len(signatures):,} scenes, {len(drawn & signatures)} of them in the "
              f"{len(drawn):,}-scene pool")


if __name__ == "__main__":
    main()
