"""The verb of ``workflow/rules/evaluate.smk`` (and of protocols.smk's evaluations): retrieval Recall@K."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import add_verb, json_arg, set_threads, verify_stores


def add_evaluate(sub) -> None:
    p = add_verb(sub, "evaluate", cmd_evaluate, "retrieval Recall@K of a model folder on a prepared test split")
    p.add_argument("--model", required=True)
    p.add_argument("--manifest", required=True)
    p.add_argument("--images", required=True)
    p.add_argument("--eval-benchmark", required=True)
    p.add_argument("--run-info", type=json_arg, default={})
    p.add_argument("--batch-size", type=int, required=True, help="images and captions per batch (evaluate.batch_size)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--ks", type=int, nargs="+", default=[1, 5, 10, 25, 50],
                   help="Recall@K cut-offs (default: the paper's 1/5/10 and GOAL's 25/50, from one ranking)")
    p.add_argument("--split", default="test",
                   help="protocol split the manifest holds, recorded in the result (test, or a test variant)")
    p.add_argument("--out", required=True)


def cmd_evaluate(args) -> None:
    from hnclip.evaluate import evaluate_checkpoint

    set_threads(args.threads)
    verify_stores(args.images)
    evaluate_checkpoint(Path(args.model), Path(args.manifest), Path(args.images), Path(args.out),
                        run_info=args.run_info, eval_benchmark=args.eval_benchmark,
                        batch_size=args.batch_size, ks=args.ks, split=args.split)
