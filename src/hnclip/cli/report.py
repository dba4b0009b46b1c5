"""The verb of ``workflow/rules/report.smk``: the self-contained HTML report."""

from __future__ import annotations

from pathlib import Path

from hnclip.cli.common import add_verb


def add_report(sub) -> None:
    p = add_verb(sub, "report", cmd_report, "render the self-contained HTML report")
    p.add_argument("--title", required=True)
    p.add_argument("--scale", choices=["toy", "paper", "rehearsal"], required=True)
    p.add_argument("--specs", type=Path, nargs="*", default=[], help="spec files of the experiments shown")
    p.add_argument("--tables", nargs="*", default=[])
    p.add_argument("--figures", nargs="*", default=[])
    p.add_argument("--geometry", nargs="*", default=[])
    p.add_argument("--summaries", nargs="*", default=[])
    p.add_argument("--premise", default=None,
                   help="JSON of the §2.4 / appendix C measurements (hnclip.analysis.claims.PREMISE_KEYS)")
    p.add_argument("--regime", nargs="*", default=[],
                   help="regime conditions per benchmark (results/regime/<benchmark>.json, hnclip regime)")
    p.add_argument("--out", required=True)


def cmd_report(args) -> None:
    from hnclip.analysis.records import load_spec
    from hnclip.report import render_report_from_files

    specs = {}
    for path in args.specs:
        spec = load_spec(path)
        if spec["experiment"] in specs:
            raise SystemExit(f"hnclip report: two specs of experiment {spec['experiment']!r} (second: {path})")
        specs[spec["experiment"]] = spec
    render_report_from_files(
        out_html=Path(args.out), title=args.title, scale=args.scale, specs=specs,
        tables=[Path(p) for p in args.tables], figures=[Path(p) for p in args.figures],
        geometry=[Path(p) for p in args.geometry], summaries=[Path(p) for p in args.summaries],
        premise=Path(args.premise) if args.premise else None,
        regime=[Path(p) for p in args.regime],
    )
