"""The verb of ``workflow/rules/train.smk`` (and of the backbone's training stages): one fine-tuning run."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import add_verb, json_arg, set_threads, verify_stores

# the options that evaluate the saved run on a test split in the same process (all or none)
OWN_TEST_OPTIONS = ("test_manifest", "test_images", "test_benchmark", "test_out", "test_batch_size")


def parse_sets(items: list[str]) -> dict[str, str]:
    overrides = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"hnclip: expected key=value, got {item!r}")
        overrides[key.strip()] = value.strip()
    return overrides


def add_train(sub) -> None:
    p = add_verb(sub, "train", cmd_train, "fine-tune a model folder on a prepared training split")
    p.add_argument("--init", required=True, help="model folder to start from")
    p.add_argument("--manifest", required=True)
    p.add_argument("--images", required=True, help="image store folder of the manifest")
    p.add_argument("--subset", default=None, help="file of image ids to train on (default: all)")
    p.add_argument("--eval-manifest", action="append", default=[],
                   help="test split evaluated after each epoch (repeat for several)")
    p.add_argument("--eval-images", action="append", default=[], help="image store of each --eval-manifest")
    p.add_argument("--eval-benchmark", action="append", default=[],
                   help="benchmark name of each --eval-manifest, written on its rows of epochs.csv")
    p.add_argument("--out", required=True, help="run folder (summary, dynamics, model)")
    p.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints (not a workflow output)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="TrainConfig field")
    p.add_argument("--product", action="append", default=[], metavar="NAME=PATH",
                   help="a cached preprocessing product the framework needs (segments, edges)")
    own = p.add_argument_group(
        "the run's own test split", "evaluated once the model is saved, as `hnclip evaluate` on the saved "
        "folder would (the same record), in this process: the imports and the model load paid once")
    own.add_argument("--test-manifest", default=None)
    own.add_argument("--test-images", default=None, help="image store folder of --test-manifest")
    own.add_argument("--test-benchmark", default=None, help="benchmark name recorded in the result")
    own.add_argument("--test-out", default=None, help="evaluation record (JSON) to write")
    own.add_argument("--test-batch-size", type=int, default=None, help="evaluate.batch_size")
    own.add_argument("--run-info", type=json_arg, default={}, help="the run's record (train_set, method, ...)")


def cmd_train(args) -> None:
    from hnclip.config.train import TrainConfig
    from hnclip.train import train
    from hnclip.training.distributed import read_launch_env

    given = [name for name in OWN_TEST_OPTIONS if getattr(args, name) is not None]
    if given and len(given) != len(OWN_TEST_OPTIONS):
        missing = ", ".join("--" + n.replace("_", "-") for n in OWN_TEST_OPTIONS if n not in given)
        raise SystemExit(f"hnclip train: evaluating the run's own test split also needs {missing}")
    set_threads(args.threads)
    cfg = TrainConfig.from_overrides(parse_sets(args.set))
    if len(args.eval_images) != len(args.eval_manifest) or len(args.eval_benchmark) not in (0, len(args.eval_manifest)):
        raise SystemExit("hnclip train: give one --eval-images (and, if any, one --eval-benchmark) per --eval-manifest")
    verify_stores(args.images, *args.eval_images, args.test_images)
    train(
        cfg,
        init_model_dir=Path(args.init),
        train_manifest=Path(args.manifest),
        store_dir=Path(args.images),
        out_dir=Path(args.out),
        checkpoint_dir=Path(args.checkpoint_dir),
        subset_path=Path(args.subset) if args.subset else None,
        eval_manifest=[Path(p) for p in args.eval_manifest],
        eval_store_dir=[Path(p) for p in args.eval_images],
        eval_benchmark=list(args.eval_benchmark) or [None] * len(args.eval_manifest),
        products={name: Path(path) for name, path in parse_sets(args.product).items()},
    )
    if given and read_launch_env().is_main:  # under torchrun, rank 0 alone (the one that saved the model)
        from hnclip.evaluate import RECORDED_KS, evaluate_checkpoint

        evaluate_checkpoint(Path(args.out) / "model", Path(args.test_manifest), Path(args.test_images),
                            Path(args.test_out), run_info=args.run_info, eval_benchmark=args.test_benchmark,
                            batch_size=args.test_batch_size, ks=RECORDED_KS)
