"""``hnclip export`` and ``hnclip push`` (rule ``export``, ``workflow/rules/export.smk``): a model folder in
Long-CLIP's, open_clip's or transformers' format with a model card beside it, and a folder uploaded to a
Hugging Face Hub model repository (the token from ``HF_TOKEN`` only).
"""

from __future__ import annotations

from pathlib import Path

from hnclip import paths
from hnclip.cli.common import add_verb
from hnclip.model_files import EXPORT_FORMATS


def add_export(sub) -> None:
    p = add_verb(sub, "export", cmd_export, "write a model folder in Long-CLIP's, open_clip's or transformers' "
                                           "format, with a model card")
    p.add_argument("--model", required=True, help="model folder (model.json + model.safetensors)")
    p.add_argument("--format", choices=EXPORT_FORMATS, required=True)
    p.add_argument("--out", required=True, help="folder to write (must not exist or be empty)")
    p.add_argument("--run", default=None,
                   help="run folder whose summary.json the card reads (default: the model folder's parent)")
    p.add_argument("--evals", nargs="*", default=None,
                   help=f"evaluation records for the card's results (default: {paths.eval_path('<run>', '*')})")
    p.add_argument("--name", default=None, help="open_clip model name (default: hnclip-<run path>)")
    p.add_argument("--scale", default=None,
                   help="what the card says the numbers are (the workflow config's scale: toy, paper, rehearsal, ...)")
    p.add_argument("--encoder-only", action="store_true",
                   help="export a framework-scored model (FineLIP) as its encoder alone, the card saying so")
    # the rule passes the config's statistics section; by hand, BootstrapSettings' own defaults apply
    p.add_argument("--confidence", type=float, default=None, help="interval coverage (config statistics.confidence)")
    p.add_argument("--resamples", type=int, default=None, help="bootstrap resamples (config statistics.resamples)")
    p.add_argument("--bootstrap-seed", type=int, default=None, help="bootstrap seed (config statistics.seed)")


def cmd_export(args) -> None:
    """A model folder in Long-CLIP's, open_clip's or transformers' format, a model card beside it."""
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.export import ExportError, export_model
    from hnclip.models.weights_files import WeightsFileError

    given = {"confidence": args.confidence, "resamples": args.resamples, "seed": args.bootstrap_seed}
    settings = BootstrapSettings(**{k: v for k, v in given.items() if v is not None})
    try:
        export_model(Path(args.model), args.format, Path(args.out), run_dir=Path(args.run) if args.run else None,
                     eval_paths=[Path(p) for p in args.evals] if args.evals is not None else None,
                     settings=settings, name=args.name, encoder_only=args.encoder_only, scale=args.scale)
    except (ExportError, FileExistsError, FileNotFoundError, WeightsFileError) as error:
        raise SystemExit(f"hnclip export: {error}") from None


def add_push(sub) -> None:
    p = add_verb(sub, "push", cmd_push, "upload a folder to a Hugging Face Hub model repository (token: HF_TOKEN only)")
    p.add_argument("--repo", required=True, help="OWNER/NAME of the model repository (created if missing)")
    p.add_argument("--folder", required=True, help="folder to upload, e.g. an `hnclip export` folder")
    p.add_argument("--endpoint", default=None, help="Hub URL (default: huggingface_hub's, HF_ENDPOINT)")
    p.add_argument("--private", action="store_true", help="create the repository private")
    p.add_argument("--revision", default=None, help="branch to commit to (default: main)")
    p.add_argument("--message", default=None, help="commit message")


def cmd_push(args) -> None:
    """Upload a folder to a Hub model repository; the token comes from HF_TOKEN only."""
    from hnclip.export.push import PushError, push_folder

    try:
        push_folder(Path(args.folder), args.repo, endpoint=args.endpoint, private=args.private or None,
                    revision=args.revision, message=args.message)
    except (PushError, FileNotFoundError) as error:
        raise SystemExit(str(error)) from None
