"""The verb of ``workflow/rules/train.smk`` (and of the backbone's training stages): one fine-tuning run."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import add_verb, set_threads, verify_stores


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
    p.add_argument("--eval-manifest", default=None, help="test split evaluated after each epoch")
    p.add_argument("--eval-images", default=None)
    p.add_argument("--out", required=True, help="run folder (summary, dynamics, model)")
    p.add_argument("--checkpoint-dir", required=True, help="resumable checkpoints (not a workflow output)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="TrainConfig field")
    p.add_argument("--product", action="append", default=[], metavar="NAME=PATH",
                   help="a cached preprocessing product the framework needs (segments, edges)")


def cmd_train(args) -> None:
    from hnclip.train import train
    from hnclip.train_config import TrainConfig

    set_threads(args.threads)
    cfg = TrainConfig.from_overrides(parse_sets(args.set))
    verify_stores(args.images, args.eval_images)
    train(
        cfg,
        init_model_dir=Path(args.init),
        train_manifest=Path(args.manifest),
        store_dir=Path(args.images),
        out_dir=Path(args.out),
        checkpoint_dir=Path(args.checkpoint_dir),
        subset_path=Path(args.subset) if args.subset else None,
        eval_manifest=Path(args.eval_manifest) if args.eval_manifest else None,
        eval_store_dir=Path(args.eval_images) if args.eval_images else None,
        products={name: Path(path) for name, path in parse_sets(args.product).items()},
    )
