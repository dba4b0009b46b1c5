"""The table verb of ``workflow/rules/protocols.smk`` (its splits and evaluations are ``hnclip prepare`` and
``hnclip evaluate --split``)."""

from __future__ import annotations

from pathlib import Path

from hnclip import paths
from hnclip.cli.common import add_verb, scale_words


def add_table_protocols(sub) -> None:
    p = add_verb(sub, "table-protocols", cmd_table_protocols,
                 "the main models under every published evaluation protocol")
    p.add_argument("--spec", type=Path, required=True,
                   help=f"protocol spec file ({paths.spec_path('protocols')}, written by hnclip.protocols.write_protocol_spec)")
    p.add_argument("--out-prefix", required=True)


def cmd_table_protocols(args) -> None:
    from hnclip.analysis.records import load_protocol_spec
    from hnclip.analysis.tables import build_protocols_table, load_protocol_summaries, write_table

    spec = load_protocol_spec(args.spec)
    variants = {f"{c['split']} ({c['benchmark']})": c["split_description"] for c in spec["cells"]
                if c["split"] != "test"}
    caption = ("evaluation protocols side by side: R@1/5/10 are the paper's cut-offs, R@1/5/25/50 GOAL's "
               "(one ranking serves both); split 'test' is the paper's protocol"
               + "".join(f"; {name}: {text}" for name, text in variants.items()))
    table = build_protocols_table(spec, summaries=load_protocol_summaries(spec))
    write_table(table, args.out_prefix, caption=f"{caption} ({scale_words(spec)})")
