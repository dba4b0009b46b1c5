"""The table verb of ``workflow/rules/convergence.smk`` (its figure is ``hnclip figure convergence``)."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import SPEC_HELP, add_verb, caption


def add_table_convergence(sub) -> None:
    p = add_verb(sub, "table-convergence", cmd_table_convergence,
                 "R@1 and error per epoch and direction beside InfoNCE (main runs)")
    p.add_argument("--spec", type=Path, required=True, help=SPEC_HELP)
    p.add_argument("--out-prefix", required=True)


def cmd_table_convergence(args) -> None:
    from hnclip.analysis.records import load_run_summaries, load_spec
    from hnclip.analysis.tables import build_convergence_table, write_table

    spec = load_spec(args.spec)
    write_table(build_convergence_table(spec, summaries=load_run_summaries(spec)), args.out_prefix,
                caption="R@1 and retrieval error per epoch and direction, beside the epoch's standard InfoNCE: "
                + caption(spec))
