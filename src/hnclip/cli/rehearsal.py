"""The verb of ``workflow/rules/rehearsal.smk`` (called by its onstart handler, not by a rule)."""

from __future__ import annotations

from hnclip.cli.common import add_verb, json_arg


def add_rehearsal_files(sub) -> None:
    p = add_verb(sub, "rehearsal-files", cmd_rehearsal_files,
                 "make the rehearsal's stand-in checkpoint, SAM and benchmark files (config with a rehearsal section)")
    p.add_argument("--config", type=json_arg, required=True,
                   help="the workflow config (JSON): benchmarks, backbone.checkpoint, preprocess.sam_model, rehearsal, "
                        "models")


def cmd_rehearsal_files(args) -> None:
    """The rehearsal's stand-ins (checkpoint, SAM, benchmark files, offline Hub cache), made once."""
    from hnclip.rehearsal.make import make_rehearsal_files

    config = args.config
    make_rehearsal_files(config["benchmarks"], checkpoint=config["backbone"]["checkpoint"],
                         sam_model=config["preprocess"]["sam_model"], folder=config["rehearsal"]["folder"],
                         seed=config["rehearsal"]["seed"], sam_image_size=config["rehearsal"]["sam_image_size"],
                         layers=config["rehearsal"].get("layers"), models=config.get("models"))
