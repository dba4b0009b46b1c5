"""The verbs of ``workflow/rules/report.smk``: the claims' verdicts, then the self-contained HTML report."""

from __future__ import annotations

import sys
from pathlib import Path

from hnclip import paths
from hnclip.cli.common import add_verb, workflow_config
from hnclip.scales import SCALES


def _load_specs(paths, verb: str) -> dict:
    from hnclip.analysis.records import load_spec

    specs = {}
    for path in paths:
        spec = load_spec(path)
        if spec["experiment"] in specs:
            raise SystemExit(f"hnclip {verb}: two specs of experiment {spec['experiment']!r} (second: {path})")
        specs[spec["experiment"]] = spec
    return specs


def add_claims(sub) -> None:
    p = add_verb(sub, "claims", cmd_claims,
                 f"judge the paper's claims on the runs' evaluations and logs ({paths.CLAIMS})")
    p.add_argument("--scale", choices=SCALES, required=True)
    p.add_argument("--specs", type=Path, nargs="*", default=[], help="spec files of the experiments judged")
    p.add_argument("--evals", nargs="*", default=[],
                   help="the evaluation records the specs' cells point to (each one the specs read must be here)")
    p.add_argument("--premise", default=None,
                   help="JSON of the §2.4 / appendix C measurements (hnclip.analysis.claims.PREMISE_KEYS)")
    p.add_argument("--run-logs", nargs="*", default=[],
                   help="the runs' epochs.csv / dynamics.csv / summary.json the claims read (hnclip.plan.report_run_logs)")
    p.add_argument("--out", required=True, help="claims.json: the verdicts and the power notes")


def cmd_claims(args) -> None:
    from hnclip.analysis.claims.files import judge_from_files, write_claims

    judged = judge_from_files(args.scale, _load_specs(args.specs, "claims"),
                              Path(args.premise) if args.premise else None,
                              evals=args.evals, run_logs=args.run_logs)
    write_claims(args.out, judged)


def add_report(sub) -> None:
    p = add_verb(sub, "report", cmd_report, "render the self-contained HTML report")
    p.add_argument("--title", required=True)
    p.add_argument("--scale", choices=SCALES, required=True)
    p.add_argument("--specs", type=Path, nargs="*", default=[], help="spec files of the experiments shown")
    p.add_argument("--evals", nargs="*", default=[],
                   help="the evaluation records the specs' cells point to (run counts, paper vs ours)")
    p.add_argument("--claims", default=None,
                   help="claims.json of hnclip claims: the verdicts shown (required except on your own data, scale own, "
                        "which judges none)")
    p.add_argument("--tables", nargs="*", default=[])
    p.add_argument("--figures", nargs="*", default=[])
    p.add_argument("--geometry", nargs="*", default=[])
    p.add_argument("--summaries", nargs="*", default=[])
    p.add_argument("--premise", default=None,
                   help="JSON of the §2.4 / appendix C measurements (hnclip.analysis.claims.PREMISE_KEYS)")
    p.add_argument("--regime", nargs="*", default=[],
                   help=f"regime conditions per benchmark ({paths.regime_path('<benchmark>')}, hnclip regime)")
    p.add_argument("--backbone", default=None, help="the backbone's model folder (named in a report on your own data)")
    p.add_argument("--own-summary", default=None,
                   help=f"on your own data: {paths.SUMMARY_JSON} (hnclip summary --scale own), HN-CLIP minus "
                        "plain fine-tuning, changed captions, last-epoch rises")
    p.add_argument("--tuning", default=None, help="the tuning record (config tuning.record): the report's tuning section")
    p.add_argument("--effective-config", type=Path, default=None,
                   help=f"the workflow's effective config ({paths.EFFECTIVE_CONFIG}), whose rates the tuning section "
                   "checks against the record")
    p.add_argument("--out", required=True)


def cmd_report(args) -> None:
    from hnclip.report import render_report_from_files

    if args.claims is None and args.scale != "own":
        raise SystemExit(f"hnclip report: --claims is required at scale {args.scale} (only a run on your own data, "
                         "scale own, judges no claim)")
    render_report_from_files(
        out_html=Path(args.out), title=args.title, scale=args.scale, specs=_load_specs(args.specs, "report"),
        tables=[Path(p) for p in args.tables], figures=[Path(p) for p in args.figures],
        geometry=[Path(p) for p in args.geometry], summaries=[Path(p) for p in args.summaries],
        premise=Path(args.premise) if args.premise else None,
        regime=[Path(p) for p in args.regime], claims=Path(args.claims) if args.claims else None, evals=args.evals,
        backbone=args.backbone, tuning=args.tuning, own_summary=args.own_summary,
        config=workflow_config([], args.effective_config) if args.effective_config else None,
    )


def add_summary(sub) -> None:
    p = add_verb(sub, "summary", cmd_summary,
                 f"what the run shows in one short file ({paths.SUMMARY_MD}, .json), or several machines' "
                 "summaries side by side (--compare)")
    p.add_argument("--compare", nargs="+", default=None, metavar="SUMMARY_JSON",
                   help="print these summaries side by side with their disagreements (exit 1 if any, 2 if a "
                        "file is not a summary.json) and stop")
    p.add_argument("--scale", choices=SCALES)
    p.add_argument("--regime", nargs="*", default=[], help=f"{paths.regime_path('<benchmark>')} files")
    p.add_argument("--claims", help=paths.CLAIMS)
    p.add_argument("--backbone", help="the backbone's model folder (its weights' sha256)")
    p.add_argument("--release", default=None, help="the released backbone's name, when it is one")
    p.add_argument("--tuning", default=None, help="the tuning record (config tuning.record): the summary's tuning line")
    p.add_argument("--effective-config", default=None,
                   help=f"the workflow's effective config ({paths.EFFECTIVE_CONFIG}), whose rates the tuning line "
                        "checks against the record")
    p.add_argument("--out-json")
    p.add_argument("--out-md")
    # scale own (your data): the main experiment's spec and records instead of regime and claims
    p.add_argument("--spec", default=None, help=f"scale own: the main experiment's spec ({paths.spec_path('main')})")
    p.add_argument("--evals", nargs="*", default=[], help="scale own: the evaluation records the spec's cells read")
    p.add_argument("--test-manifests", nargs="*", default=[],
                   help=f"scale own: the benchmarks' prepared test splits ({paths.manifest_path('<benchmark>', 'test')}), "
                        "whose captions name the examples")


def cmd_summary(args) -> None:
    import json

    from hnclip.analysis.summary import (
        SummaryFileError,
        build_summary,
        compare_summaries,
        load_summaries,
        machine_record,
        render_summary_markdown,
    )
    from hnclip.fileio import write_json_atomic, write_text_atomic
    from hnclip.hashing import sha256_file
    from hnclip.model_files import MODEL_WEIGHTS
    from hnclip.provenance import git_commit

    if args.compare:
        try:
            summaries = load_summaries(args.compare)
        except SummaryFileError as error:  # exit 2: not a disagreement (1), a file that cannot be compared
            print(f"hnclip summary --compare: {error}", file=sys.stderr)
            raise SystemExit(2) from None
        text, disagreements = compare_summaries(summaries)
        print(text)
        raise SystemExit(1 if disagreements else 0)
    if args.scale == "own":
        return _own_summary(args)
    missing = [f"--{k.replace('_', '-')}" for k in ("scale", "claims", "backbone", "out_json", "out_md")
               if getattr(args, k) is None]
    if missing:
        raise SystemExit(f"hnclip summary: {', '.join(missing)} required (or --compare)")
    summary = build_summary(
        [json.loads(Path(p).read_text()) for p in args.regime], json.loads(Path(args.claims).read_text()),
        {"weights_sha256": sha256_file(Path(args.backbone) / MODEL_WEIGHTS), "release": args.release},
        machine_record(git_commit()), args.scale)
    if args.tuning:
        from hnclip.tuning.record import record_check

        config = json.loads(Path(args.effective_config).read_text()) if args.effective_config else {"methods": {}}
        summary["tuning"] = record_check(config, args.tuning)
    write_json_atomic(Path(args.out_json), summary, sort_keys=True)
    write_text_atomic(Path(args.out_md), render_summary_markdown(summary))
    print(render_summary_markdown(summary))


def _own_summary(args) -> None:
    """``hnclip summary --scale own``: the summary of a run on your own data (:mod:`hnclip.analysis.own_results`),
    from the main spec and its records; no regime, no claims."""
    import json

    from hnclip.analysis.bootstrap import settings_from_config
    from hnclip.analysis.own_results import build_own_summary, own_results, read_captions, render_own_markdown
    from hnclip.analysis.records import load_spec
    from hnclip.analysis.summary import machine_record
    from hnclip.fileio import write_json_atomic, write_text_atomic
    from hnclip.hashing import sha256_file
    from hnclip.model_files import MODEL_WEIGHTS
    from hnclip.provenance import git_commit

    missing = [f"--{k.replace('_', '-')}" for k in ("spec", "backbone", "out_json", "out_md") if getattr(args, k) is None]
    if missing:
        raise SystemExit(f"hnclip summary --scale own: {', '.join(missing)} required")
    spec = load_spec(args.spec)
    # the records the spec's cells point to (--evals declares them to Snakemake); an absent one drops its row
    records = {c["eval_path"]: json.loads(Path(c["eval_path"]).read_text(encoding="utf-8")) for c in spec["cells"]
               if Path(c["eval_path"]).is_file()}
    captions = {Path(p).parent.name: read_captions(p) for p in args.test_manifests}
    results = own_results(spec, records, settings_from_config({"statistics": spec.get("statistics")}), captions)
    summary = build_own_summary(results, {"weights_sha256": sha256_file(Path(args.backbone) / MODEL_WEIGHTS)},
                                machine_record(git_commit()))
    write_json_atomic(Path(args.out_json), summary, sort_keys=True)
    write_text_atomic(Path(args.out_md), render_own_markdown(summary))
    print(render_own_markdown(summary))
