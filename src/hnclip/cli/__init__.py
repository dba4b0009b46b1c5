"""The ``hnclip`` command: one verb per workflow step, so every Snakemake rule is a single call.

One module per file of ``workflow/rules/`` (:mod:`.data`, :mod:`.backbone`, :mod:`.train`,
:mod:`.evaluate`, :mod:`.analysis`, :mod:`.convergence`, :mod:`.protocols`, :mod:`.report` (claims and report),
:mod:`.rehearsal`, :mod:`.export`; what several share in :mod:`.common`), plus :mod:`.plan`, the verb run before
submitting. Each verb's arguments (``add_<verb>``) sit beside its command (``cmd_<verb>``).

Verbs import their modules lazily: ``hnclip table`` must not pay for importing torch, and a rule's conda
environment only carries the extras its verb needs.
"""

from __future__ import annotations

import argparse
import logging
import sys

from hnclip.cli import (
    analysis,
    backbone,
    convergence,
    data,
    evaluate,
    export,
    plan,
    protocols,
    rehearsal,
    report,
    train,
    tuning,
)

__all__ = ["HEARTBEAT_SECONDS", "build_parser", "main"]

# every verb but these prints a line on stdout every HEARTBEAT_SECONDS while it runs (Snakemake's console
# shows a job's stdout; hnclip.progress): train prints its own (train.progress_every), plan's
# stdout is the plan itself
HEARTBEAT_SECONDS = 30.0
OWN_STDOUT = ("train", "plan", "tune")

# the verbs in the order `hnclip --help` lists them: roughly the pipeline's
VERBS = (
    data.add_fetch, data.add_prepare, data.add_store, data.add_verify_store, data.add_subset,
    backbone.add_pool, backbone.add_init_model, backbone.add_convert_checkpoint, backbone.add_install_backbone,
    backbone.add_stretch, backbone.add_backbone_figures, backbone.add_release_backbone,
    data.add_segments, data.add_edges,
    train.add_train,
    tuning.add_tune,
    evaluate.add_evaluate,
    analysis.add_geometry, analysis.add_table, analysis.add_table_epochs,
    convergence.add_table_convergence,
    protocols.add_table_protocols,
    analysis.add_table_cost, analysis.add_figure, analysis.add_gallery, analysis.add_premise, analysis.add_regime,
    report.add_claims, report.add_report, report.add_summary,
    rehearsal.add_rehearsal_files,
    export.add_export, export.add_push,
    plan.add_plan,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="hnclip", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    for add in VERBS:
        add(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    from hnclip.config.validation import ConfigError
    from hnclip.progress import Terminated, close_progress_bars, stop_on_sigterm

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        with stop_on_sigterm(), _heartbeat(args):
            args.func(args)
    except ConfigError as error:  # `hnclip plan` on a bad config: the key and the problem, no traceback
        print(f"hnclip {args.verb}: {error}", file=sys.stderr)
        return 2
    except Terminated as stop:  # its last line (the log's, which onerror shows) says so, not a half-drawn bar
        close_progress_bars()
        print(f"hnclip {args.verb}: terminated by SIGTERM{stop.where} (kill, a time limit or a cancelled job)",
              file=sys.stderr)
        return stop.code
    return 0


def _heartbeat(args):
    """The verb's progress lines: ``hnclip VERB [--out]: running, 1m30s elapsed`` (none for OWN_STDOUT)."""
    from hnclip.progress import Progress

    out = getattr(args, "out", None)
    name = f"hnclip {args.verb}" + (f" {out}" if isinstance(out, str) else "")
    return Progress(name, 0 if args.verb in OWN_STDOUT else HEARTBEAT_SECONDS, phase="running")
