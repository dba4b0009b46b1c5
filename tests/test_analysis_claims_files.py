"""The claims rule: ``hnclip claims`` writes ``results/claims.json`` from the files it is given (and refuses
to read one it was not given), its verdicts are :func:`evaluate_claims`'s on the same inputs, and the report
renders the verdicts of that file without judging anything itself."""

from __future__ import annotations

import copy
import json
import math
from html import unescape
from pathlib import Path

import pytest
from test_analysis_claims import PREMISE
from test_report import _claim, _spec

from hnclip import plan
from hnclip.analysis.claims import CLAIMS, evaluate_claims, power_notes
from hnclip.analysis.claims.files import load_claims, run_costs, write_claims
from hnclip.analysis.records import load_dynamics
from hnclip.analysis.tables import build_epochs_table, build_table
from hnclip.cli import main as hnclip

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")


@pytest.fixture
def workflow_files(tmp_path, monkeypatch):
    """A results/ folder as the workflow leaves it, paths relative to the working directory like the rules':
    specs, evaluation records, run summaries, the main runs' epochs.csv, HN-CLIP's dynamics.csv, premise.json."""
    monkeypatch.chdir(tmp_path)
    root = Path(".")
    specs = {
        "main": _spec(root, "main", [("HN-CLIP", "DOCCI", None, "hnclip", 0.5, 42.0),
                                     ("Long-CLIP FT", "DOCCI", None, "longclip", 0.0, 40.0)]),
        "gamma_sweep": _spec(root, "gamma_sweep", [(f"gamma={g:g}", "DOCCI", g, "hnclip", g, 40.0 + 4 * g)
                                                   for g in (0.0, 0.5, 1.0)]),
    }
    specs["main"]["gamma"] = specs["gamma_sweep"]["gamma"] = 0.5  # the config's gamma: one dynamics log
    spec_files = []
    for name, spec in specs.items():
        path = Path("results/specs") / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(spec))
        spec_files.append(str(path))
    for cell in specs["main"]["cells"]:  # per-epoch retrieval: HN-CLIP leads after both epochs
        lead = 2 if cell["run"]["method"] == "hnclip" else 0
        lines = ["epoch,step," + ",".join(METRICS)] + [f"{e},{10 * e},{40 + lead + e},50,50,{39 + lead + e},50,50"
                                                      for e in (1, 2)]
        Path(cell["run_dir"], "epochs.csv").write_text("\n".join(lines) + "\n")
    hn_run = Path("results/runs/docci/hnclip/g0.5/f1/s0")
    (hn_run / "dynamics.csv").write_text("step,epoch,lr,logit_scale,loss,infonce,grad_ratio\n"
                                         "1,1,1e-4,14.3,2.0,2.0,12.0\n2,1,1e-4,14.3,1.9,1.9,\n"
                                         "3,2,1e-4,14.3,1.8,1.8,250.0\n")
    Path("results/premise.json").write_text(json.dumps(PREMISE))
    logs = plan.report_run_logs(specs)
    assert logs["dynamics"] == [f"{hn_run.as_posix()}/dynamics.csv"] and len(logs["epochs"]) == 2
    evals = sorted({c["eval_path"] for s in specs.values() for c in s["cells"]})
    run_logs = logs["epochs"] + logs["dynamics"] + logs["summaries"]
    return {"specs": specs, "spec_files": spec_files, "evals": evals, "run_logs": run_logs,
            "premise": "results/premise.json"}


def _claims_argv(files, out="results/claims.json", evals=None, run_logs=None):
    return ["claims", "--scale", "toy", "--specs", *files["spec_files"], "--evals", *(evals or files["evals"]),
            "--premise", files["premise"], "--run-logs", *(run_logs or files["run_logs"]), "--out", out]


def _comparable(value):
    """JSON's view of a value, NaN as a string (NaN != NaN would fail any equality)."""
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    return value


def test_the_claims_verb_writes_evaluate_claims_verdicts_on_the_same_inputs(workflow_files):
    assert hnclip(_claims_argv(workflow_files)) == 0
    written = load_claims("results/claims.json")

    # the same inputs handed to evaluate_claims directly
    specs = workflow_files["specs"]
    records = {name: [json.loads(Path(c["eval_path"]).read_text()) for c in spec["cells"]]
               for name, spec in specs.items()}
    tables = {name: build_table(spec, records[name]) for name, spec in specs.items()}
    tables["epochs"] = build_epochs_table(specs["main"])
    unique = list({json.dumps([r["run"], r["eval_benchmark"]], sort_keys=True): r
                   for rs in records.values() for r in rs}.values())
    expected = evaluate_claims(tables, "toy", specs=specs, records=unique, premise=PREMISE,
                               dynamics={"docci/hnclip/g0.5/f1/s0": load_dynamics("results/runs/docci/hnclip/g0.5/f1/s0")},
                               costs=run_costs([specs["main"], specs.get("seeds")]))  # tests/test_analysis_claims.py pins run_costs
    notes, reference = power_notes(tables["main"], specs["main"])

    assert [c["id"] for c in written["claims"]] == list(CLAIMS)
    assert _comparable(written["claims"]) == _comparable(json.loads(json.dumps(expected)))
    assert written["power"] == json.loads(json.dumps({"notes": notes, "reference": reference}))
    verdicts = {c["id"]: c for c in written["claims"]}
    # the inputs were read: the tables (A1), the epochs logs, the dynamics log's peak, the premise
    assert verdicts["a1_columns"]["verdict"] == "holds"
    assert verdicts["a1_first_epoch"]["verdict"] != "no data"
    assert verdicts["premise_ratio"]["measures"]["peak gradient ratio per run"] == {"docci/hnclip/g0.5/f1/s0": 250.0}
    assert verdicts["premise_saturation"]["verdict"] == "holds"
    # strict JSON apart from non-finite numbers, which Python's json reads back
    json.loads(Path("results/claims.json").read_text())


@pytest.mark.parametrize("dropped", ["evals", "run_logs"])
def test_the_claims_verb_refuses_to_read_a_file_it_was_not_given(workflow_files, dropped):
    given = {k: list(workflow_files[k]) for k in ("evals", "run_logs")}
    missing = given[dropped].pop(0)
    with pytest.raises(ValueError, match="not passed as inputs") as error:
        hnclip(_claims_argv(workflow_files, **given))
    assert missing in str(error.value)
    assert not Path("results/claims.json").exists()


def test_non_finite_numbers_and_numpy_scalars_survive_the_file(tmp_path):
    import numpy as np

    path = write_claims(tmp_path / "claims.json", {"claims": [{"id": "x", "holds": np.bool_(True),
                                                               "measures": {"n": np.int64(3), "r": math.inf,
                                                                            "m": np.float64("nan"), "t": (1, 2)}}],
                                                   "power": {"notes": [], "reference": ""}})
    back = load_claims(path)["claims"][0]
    assert back["holds"] is True and back["measures"]["n"] == 3 and back["measures"]["r"] == math.inf
    assert math.isnan(back["measures"]["m"]) and back["measures"]["t"] == [1, 2]
    with pytest.raises(ValueError, match="not a claims file"):
        (tmp_path / "bad.json").write_text("[]")
        load_claims(tmp_path / "bad.json")


def test_the_report_renders_the_verdicts_of_claims_json_and_judges_nothing(workflow_files):
    assert hnclip(_claims_argv(workflow_files)) == 0
    judged = load_claims("results/claims.json")
    # one hand-written verdict: a1_columns turned around, with evidence no evaluation would write
    verdict = copy.deepcopy(next(c for c in judged["claims"] if c["id"] == "a1_columns"))
    verdict.update(verdict="does not hold", holds=False, evidence={"hand-written evidence": 123.5})
    power = {"notes": [{"benchmark": "Handmade", "images": 77, "seeds": 1, "margin": 1.0, "ci_low": -1.0,
                        "ci_high": 3.0, "half_width": 2.0, "resolution": 2.8, "versus": "Long-CLIP FT"}],
             "reference": "HN-CLIP minus the strongest competitor (Long-CLIP FT)"}
    write_claims("hand.json", {"claims": [verdict], "power": power})
    summaries = sorted(str(p) for p in Path("results/runs").glob("**/summary.json"))
    assert hnclip(["report", "--title", "t", "--scale", "toy", "--specs", *workflow_files["spec_files"],
                   "--evals", *workflow_files["evals"], "--claims", "hand.json", "--summaries", *summaries,
                   "--premise", workflow_files["premise"], "--out", "report.html"]) == 0
    html = Path("report.html").read_text(encoding="utf-8")
    assert html.count('class="claim ') == 1  # only the file's verdict, no claim judged here
    cls, shown, text = _claim(html, "a1_columns")
    assert (cls, shown) == ("fails", "does not hold") and "hand-written evidence = 123.5" in text
    assert "Handmade (77 test images, 1 seed)" in unescape(html)


def test_rendering_from_claims_json_equals_judging_in_the_report(workflow_files):
    from hnclip.report import render_report_from_files

    assert hnclip(_claims_argv(workflow_files)) == 0
    common = {"title": "t", "scale": "toy", "specs": workflow_files["specs"], "tables": [], "figures": [],
              "geometry": [], "summaries": sorted(Path("results/runs").glob("**/summary.json")),
              "premise": workflow_files["premise"], "evals": workflow_files["evals"]}
    from_file = render_report_from_files(out_html="a.html", claims="results/claims.json", **common)
    judged_here = render_report_from_files(out_html="b.html", claims=None, **common)
    assert from_file.read_text(encoding="utf-8") == judged_here.read_text(encoding="utf-8")
