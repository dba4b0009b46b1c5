"""The verb of ``workflow/rules/tuning.smk``: the tuning protocol's search (:mod:`hnclip.tuning`)."""

from __future__ import annotations

import json
from pathlib import Path

from hnclip import paths
from hnclip.cli.common import add_verb


def add_tune(sub) -> None:
    p = add_verb(sub, "tune", cmd_tune,
                 "choose every main-table method's rate on the val split by one protocol (the tuning record)")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--configfile", type=Path, nargs="+", help="config file(s), layered as Snakemake does")
    source.add_argument("--effective-config", type=Path,
                        help=f"the workflow's effective config as Snakemake validated it ({paths.EFFECTIVE_CONFIG})")
    p.add_argument("--backbone", type=Path, required=True, help="the backbone's model folder")
    p.add_argument("--data", type=Path, required=True,
                   help="the tuning benchmark's prepared folder (train and val splits, framework products)")
    p.add_argument("--work", type=Path, required=True, help="folder for the grid points' runs and the log")
    p.add_argument("--out", type=Path, required=True, help="the record (JSON)")
    p.add_argument("--methods", nargs="+", default=None, help="tune only these (default: experiments.main's)")
    p.add_argument("--threads", type=int, default=1)


def cmd_tune(args) -> None:
    from hnclip.cli.common import workflow_config
    from hnclip.tuning.search import run_search

    config = workflow_config(args.configfile, args.effective_config)
    record = run_search(config, args.backbone, args.data, args.work, threads=args.threads, methods=args.methods,
                        progress=lambda line: print(line, flush=True))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    cost = record["provenance"]
    long = f" + {cost['long_budget_minutes']} min at the long budget" if "long_budget_minutes" in cost else ""
    print(f"tuning record: {args.out}: {cost['points']} points, {cost['minutes']} min of training{long} over all "
          f"sessions ({cost['session_minutes']} min this session); strongest competitor on "
          f"{record['protocol']['split']}: {record['competitor']}", flush=True)
