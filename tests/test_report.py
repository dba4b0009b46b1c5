"""The HTML report: rendered from hand-made pipeline outputs, self-contained, paper vs ours, and checked in
headless Chromium (every table and figure in the DOM, no console errors, no sideways scroll on a phone).

Chromium is Debian's ``chromium`` package (`workflow/scripts/setup.sh --dev` installs it); without it the browser test fails.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest
import yaml
from PIL import Image

from hnclip.analysis.claims import CLAIMS
from hnclip.analysis.geometry import caption_geometry
from hnclip.analysis.published import load_published
from hnclip.analysis.table_format import write_table
from hnclip.analysis.tables import build_table
from hnclip.report import DEFAULT_PUBLISHED, render_report, render_report_from_files

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _spec(root: Path, experiment: str, entries) -> dict:
    """Write eval records + run summaries for (row, group, x, method, gamma, r1) and return the spec."""
    cells = []
    for row, group, x, method, gamma, r1 in entries:
        run = {"train_set": "docci", "method": method, "gamma": gamma, "fraction": 1.0, "seed": 0}
        rel = f"docci/{method}/g{gamma:g}/f1/s0"
        eval_path = root / "results/evals" / rel / f"{group.lower()}.json"
        eval_path.parent.mkdir(parents=True, exist_ok=True)
        eval_path.write_text(json.dumps({"run": run, "eval_benchmark": group.lower(), "split": "test",
                                         "n_images": 5000, "n_texts": 5000,
                                         "metrics": dict.fromkeys(METRICS, r1), "wall_time_s": 2.0}))
        run_dir = root / "results/runs" / rel
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "summary.json").write_text(json.dumps({
            "config": {"micro_batch": 16, "accum_steps": 8, "epochs": 10, "gamma": gamma}, "config_hash": f"hash-{method}",
            "seed": 0, "steps": 40, "epochs": 10, "samples_seen": 5120, "wall_time_s": 12.5, "samples_per_s": 409.6,
            "peak_memory_mb": 900.0, "final_loss": 0.7, "device": "cpu", "checkpoint_sha256": "ab" * 32,
            "git_commit": "0123456789abcdef"}))
        cells.append({"row": row, "group": group, "variant": None, "x": x, "run": run,
                      "eval_benchmark": group.lower(), "eval_path": str(eval_path), "run_dir": str(run_dir)})
    return {"experiment": experiment, "scale": "toy", "cells": cells}


@pytest.fixture
def outputs(tmp_path):
    """Specs, written tables, PNG figures, a geometry JSON and run summaries, as the workflow leaves them."""
    specs = {
        "main": _spec(tmp_path, "main", [("HN-CLIP", "DOCCI", None, "hnclip", 0.5, 42.0),
                                         ("Long-CLIP FT", "DOCCI", None, "longclip", 0.0, 40.0)]),
        "gamma_sweep": _spec(tmp_path, "gamma_sweep", [(f"gamma={g:g}", "DOCCI", g, "hnclip", g, 40.0 + 4 * g)
                                                       for g in (0.0, 0.5, 1.0)]),
    }
    tables = []
    for name, spec in specs.items():
        df = build_table(spec, [json.loads(Path(c["eval_path"]).read_text()) for c in spec["cells"]])
        tables.append(write_table(df, tmp_path / "tables" / name, caption=name)["csv"])
    figures = []
    for name, color in (("epochs", "red"), ("gamma_sweep", "blue")):
        path = tmp_path / "figures" / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (640, 360), color).save(path)
        figures.append(path)
    geometry = tmp_path / "geometry" / "synthetic.json"
    geometry.parent.mkdir()
    angles = [0.0, 0.2, 0.3, 0.5]
    geo = caption_geometry([[math.cos(a), math.sin(a)] for a in angles], 4, 2, 0)
    geometry.write_text(json.dumps(geo))
    summaries = sorted(tmp_path.glob("results/runs/**/summary.json"))
    return {"root": tmp_path, "specs": specs, "tables": tables, "figures": figures, "geometry": [geometry],
            "summaries": summaries, "geo": geo}


def _render(outputs) -> tuple[Path, str]:
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="HN-CLIP toy report", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"])
    return out, out.read_text(encoding="utf-8")


def test_report_is_self_contained_with_every_table_figure_and_run(outputs):
    _, html = _render(outputs)
    assert "toy-scale results on a synthetic benchmark: not the paper's numbers" in unescape(html).lower()
    assert 'name="viewport"' in html and "overflow-x: auto" in html
    # offline: no scripts, no external stylesheets, no remote URLs, every image inline
    assert "<script" not in html and "<link" not in html
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html)
    srcs = re.findall(r'<img src="([^"]+)"', html)
    assert len(srcs) == 2 and all(s.startswith("data:image/png;base64,") for s in srcs)
    for name in ("main", "gamma_sweep"):
        assert f'id="table-{name}"' in html
    assert 'id="figure-epochs"' in html and 'id="figure-gamma_sweep"' in html
    assert html.count('class="provenance-run"') == 4  # 2 main runs + gamma 0 and 1 (gamma 0.5 is shared)
    assert html.count("hash-hnclip") == 3 and "0123456789abcdef" in html and "ab" * 32 in html
    assert html.count('class="claim ') == len(CLAIMS)


def test_provenance_shows_each_runs_precision_and_fp16_skipped_steps(outputs):
    """An fp16 run's precision and the steps its gradient scaler skipped (weights unchanged) are in the
    provenance table beside its device; a summary without a resolved precision reads its config's ``auto``
    as fp32 on the CPU, and a precision without a scaler shows no skipped steps."""
    fp16 = next(p for p in outputs["summaries"] if "/hnclip/" in p.as_posix())
    summary = json.loads(fp16.read_text())
    fp16.write_text(json.dumps({**summary, "precision": "fp16", "skipped_steps": 3, "grad_scale": 2048.0}))
    _, html = _render(outputs)
    header = re.search(r'<table id="table-provenance">.*?<thead>(.*?)</thead>', html, re.S).group(1)
    columns = re.findall(r"<th[^>]*>([^<]*)</th>", header)
    rows = re.findall(r'<tr class="provenance-run"><th scope="row" class="text">([^<]*)</th>(.*?)</tr>', html, re.S)
    assert len(rows) == 4
    for run, cells in rows:
        values = dict(zip(columns[1:], re.findall(r"<td[^>]*>([^<]*)</td>", cells), strict=True))
        if fp16.parent.as_posix().endswith(run.rsplit("results/runs/", 1)[-1]):
            assert (values["precision"], values["skipped steps"]) == ("fp16", "3 of 40"), run
        else:
            assert (values["precision"], values["skipped steps"]) == ("fp32", "–"), run


def _claim(html: str, key: str) -> tuple[str, str]:
    """(css class, verdict text) of one claim's list item."""
    item = re.search(rf'<li class="claim (\w+)" id="claim-{key}" data-verdict="([^"]+)">(.*?)</li>', html, re.S)
    assert item, f"no claim {key}"
    return item.group(1), item.group(2), unescape(re.sub(r"<[^>]+>", "", item.group(3)))


def test_report_judges_claims_from_the_records(outputs):
    _, html = _render(outputs)
    # HN-CLIP 42 vs Long-CLIP FT 40 in every DOCCI column: best everywhere, R@1 strictly
    cls, verdict, text = _claim(html, "a1_columns")
    assert (cls, verdict) == ("holds", "holds")
    assert "best result in 23 of 24 Table 1 columns" in text and "(§3.2 A1)" in text  # the paper's sentence
    assert "DOCCI I→T R@1: HN-CLIP minus the best other row = 2" in text
    # gamma 0.5 (42) and 1 (44) beat gamma 0 (40) on the in-domain DOCCI runs
    assert _claim(html, "a4_gamma")[:2] == ("holds", "holds")
    assert _claim(html, "a2_frameworks")[:2] == ("unknown", "no data")
    assert "no data: no plug-in table" in _claim(html, "a2_frameworks")[2]


def _comparison(html: str, key: str) -> list[str]:
    row = re.search(rf'<tr class="comparison" data-key="{re.escape(key)}">(.*?)</tr>', html, re.S)
    assert row, f"no paper-vs-ours row {key}"
    return [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row.group(1), re.S)]


def test_paper_vs_ours_shows_both_and_the_difference(outputs):
    _, html = _render(outputs)
    ratio = _comparison(html, "gradient_ratio")
    assert ratio[1] == "148.4 x" and ratio[3] == "148.4 toy"
    assert ratio[4] == f"{math.exp(5) - 148.4:+.3g}"  # e^5 measured on the loss vs the paper's 148.4
    batch = _comparison(html, "train.effective_batch")
    assert batch[1] == "128" and batch[3] == "128 toy" and batch[4] == "+0"
    offdiag = _comparison(html, "geometry.mean_offdiag")
    assert offdiag[1] == "0.84–0.88" and offdiag[3].startswith(f"{outputs['geo']['mean_offdiag']:.4g}")
    assert "above" in offdiag[4]  # the fixture's captions are 0.1-0.5 rad apart: mean cosine ~0.96 > 0.88
    table1 = _comparison(html, "table1/DOCCI/HN-CLIP/i2t_r1")
    assert table1[1] == "not available offline" and table1[3] == "42 toy" and table1[4] == ""
    docci = _comparison(html, "data.docci_test_images")
    assert docci[1] == "5,000" and docci[3] == "5,000 toy"
    assert "not reproduced in this run" in _comparison(html, "speed.goal")[3]


def test_a_table_of_another_scale_is_refused(outputs, tmp_path):
    csv = outputs["tables"][0]
    fragment = csv.with_suffix(".html")
    fragment.write_text(fragment.read_text().replace('data-scale="toy"', 'data-scale="paper"'))
    with pytest.raises(ValueError, match="is not labelled as a toy-scale run"):
        render_report(tmp_path / "r.html", {"main": csv}, {}, [], [], None, "toy", "t", measured={})


def test_published_numbers_carry_sources_and_the_quoted_values():
    entries = load_published(DEFAULT_PUBLISHED)
    by_key = {e["key"]: e for e in entries}
    assert all(e["source"] for e in entries)
    assert by_key["gradient_ratio"]["value"] == pytest.approx(math.exp(5), abs=0.05)
    assert by_key["geometry.mean_offdiag"]["range"] == [0.84, 0.88]
    assert by_key["geometry.mean_hardest"]["range"] == [0.92, 0.94]
    assert by_key["geometry.frac_ge_0.8"]["range"] == [0.86, 0.99]
    assert (by_key["speed.goal"]["value"], by_key["speed.structxlip"]["value"]) == (2.4, 5.4)
    assert by_key["data.docci_test_images"]["value"] == 5000 and "5,100" in by_key["data.docci_test_images"]["note"]
    assert by_key["data.long_dci_records"]["value"] == 7805 and by_key["data.urban1k_pairs"]["value"] == 1000
    assert (by_key["train.effective_batch"]["value"], by_key["train.epochs"]["value"],
            by_key["train.gamma"]["value"]) == (128, 10, 0.5)
    table1 = [e for e in entries if e["key"].startswith("table1/")]
    assert len(table1) >= 24 and all(e["value"] is None and e["status"] == "not available offline" for e in table1)


def test_published_null_without_status_is_rejected(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"numbers": [{"key": "x", "what": "x", "source": "Table 1", "value": None}]}))
    with pytest.raises(ValueError, match=r"numbers\[0\] \('x'\): a null value needs a 'status'"):
        load_published(bad)


CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--enable-logging=stderr", "--v=0"]
# an appended probe: the page's width as laid out in a phone-sized window, written into the DOM
WIDTH_PROBE = ("<script>document.body.setAttribute('data-widths', [document.documentElement.clientWidth, "
               "document.documentElement.scrollWidth].join(','))</script></body>")


def _chromium(tmp_path, name, *args):
    proc = subprocess.run([CHROMIUM, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / ('profile-' + name)}", *args],
                          capture_output=True, text=True, timeout=60)
    console = [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]
    return proc, console


def test_report_renders_in_headless_chromium_on_a_phone(outputs, tmp_path):
    assert CHROMIUM, "needs Debian's chromium: `bash workflow/scripts/setup.sh --dev` installs it"
    out, html = _render(outputs)
    probe = out.with_name("probe.html")
    probe.write_text(html.replace("</body>", WIDTH_PROBE), encoding="utf-8")
    proc, console = _chromium(tmp_path, "dom", "--window-size=390,844", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert console == [], console  # the probe itself logs nothing; anything here is a page error
    tables = set(re.findall(r'<table[^>]* id="(table-[^"]+)"', dom))
    assert tables == {"table-main", "table-gamma_sweep", "table-geometry-summary", "table-paper-vs-ours",
                      "table-provenance"}
    assert set(re.findall(r'<figure id="(figure-[^"]+)"', dom)) == {"figure-epochs", "figure-gamma_sweep"}
    assert len(re.findall(r'<img src="data:image/png;base64,', dom)) == 2
    # headless Chromium's window is at least 500 px wide whatever --window-size says: compare the page's
    # laid-out width with its viewport, so a wide table that does not scroll inside its box fails here
    viewport, page = map(int, re.search(r'data-widths="(\d+),(\d+)"', dom).groups())
    assert viewport <= 500 and page <= viewport, f"page is {page}px wide in a {viewport}px viewport"

    shot = tmp_path / "report-phone.png"
    proc, console = _chromium(tmp_path, "shot", "--window-size=390,2400", "--hide-scrollbars",
                              f"--screenshot={shot}", out.as_uri())
    assert proc.returncode == 0 and console == []
    with Image.open(shot) as im:
        assert im.size == (390, 2400)
        assert len(set(im.convert("L").resize((39, 240)).tobytes())) > 5  # rendered content, not blank


def test_every_published_number_is_well_formed_with_a_compare_kind_the_report_reads():
    from hnclip.analysis.published import COMPARE_KINDS

    entries = load_published(DEFAULT_PUBLISHED)
    by_key = {e["key"]: e for e in entries}
    for e in entries:
        assert e["source"] and e["what"] and e.get("scale"), e["key"]
        assert e.get("compare") is None or e["compare"]["kind"] in COMPARE_KINDS, e["key"]
        assert e.get("compare") or e.get("status"), f"{e['key']}: neither a comparison nor a status saying why"
    # a sample of the summary's numbers, each at its section
    expected = {"a1.first_epoch_docci": (84.3, "§3.2 A1"), "a1.second_epoch_docci": (86.1, "§3.2 A1"),
                "a1.gain.docci.i2t": (3.52, "§3.2 A1"), "a1.gain.urban1k.t2i": (2.40, "§3.2 A1"),
                "a3.dci_to_docci.i2t": (85.00, "§3.4 A3"), "a3.dci_to_docci.t2i": (83.14, "§3.4 A3"),
                "dynamics.docci_error_t2i_first": (20.5, "§2.4"), "dynamics.docci_error_i2t_last": (17.1, "§2.4"),
                "a3.small_data_margin": (7.3, "§3.4 A3"), "e1.largest_gain": (23.87, "E.1"),
                "e1.urban1k.finelip.t2i": (15.7, "E.1"), "e1.urban1k.goal.i2t": (-0.6, "E.1"),
                "e1.per_direction_improved": (35, "E.1"), "e1.in_domain_combinations": (18, "E.1"),
                "a1.columns_best": (23, "§3.2 A1"), "e3.seed_largest_hnclip_change": (1.44, "E.3"),
                "e3.seed_largest_r1_change": (1.28, "E.3"), "e3.seed_mean_change": (0.4, "E.3"),
                "abstract.saturated_share": (0.80, "abstract; §1"), "abstract.exact_zero_fp32": (0.47, "abstract; §1"),
                "dynamics.active_share": (0.26, "§2.4"), "c.grad_cosine_median": (0.58, "C"),
                "c.grad_cosine_positive": (0.98, "C")}
    for key, (value, source) in expected.items():
        assert by_key[key]["value"] == pytest.approx(value) and by_key[key]["source"] == source, key
    ranges = {"abstract.gain_over_strongest": [2.4, 4.3], "a2.lora_dora_long_dci": [3.7, 4.8],
              "b2.default_minus_frozen": [3.80, 6.80], "e1.urban1k.others": [-6.1, -0.2],
              "dynamics.ratio_median": [1e2, 1e6], "dynamics.ratio_peak": [1e5, 1e8], "d1.caption_words": [107, 134],
              "geometry.near_duplicate_examples": [0.93, 0.97], "f.baseline_ranks": [18, 52]}
    for key, bounds in ranges.items():
        assert by_key[key]["range"] == pytest.approx(bounds), key


@pytest.mark.parametrize("compare, message", [
    ({"kind": "guess"}, "compare kind 'guess' is not one the report reads"),
    ({"kind": "claim", "claim": "a1_columns"}, r"needs \['measure'\]"),
    ({"kind": "claim", "claim": "main", "measure": "x"}, "names claim 'main'"),
    ({"kind": "premise", "field": "saturation"}, r"premise field\(s\) \['saturation'\] unknown"),
])
def test_a_published_number_with_an_unreadable_comparison_is_rejected(tmp_path, compare, message):
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"numbers": [{"key": "x", "what": "x", "source": "§1", "value": 1,
                                                "compare": compare}]}))
    with pytest.raises(ValueError, match=message):
        load_published(bad)


def test_claim_and_premise_numbers_sit_beside_the_papers_with_their_labels(outputs):
    from test_analysis_claims import PREMISE

    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], premise=PREMISE | {"saturated_share_epoch1": 0.9})
    html = out.read_text(encoding="utf-8")
    assert _comparison(html, "abstract.saturated_share")[1:5] == ["0.8", "dense captions, Long-CLIP-L", "0.9 toy",
                                                                  "+0.1"]
    # HN-CLIP 42 vs Long-CLIP FT 40 in each direction: a 2-point gain, 1.52 below the paper's 3.52
    assert _comparison(html, "a1.gain.docci.i2t")[3:5] == ["2 toy", "-1.52"]
    ranged = re.findall(r'data-key="abstract.gain_over_strongest"><th[^>]*>([^<]*)', html)
    assert ranged == [f"R@1 gain of HN-CLIP over the strongest competitor, per benchmark and direction [DOCCI {d}]"
                      for d in ("I→T", "T→I")]
    assert _comparison(html, "a1.columns")[3] == "6 toy"  # one benchmark: 2 directions x R@1/5/10
    assert _comparison(html, "geometry.near_duplicate_examples")[3].startswith("not measured by our runs: hand-picked")
    assert _claim(html, "premise_saturation")[:2] == ("holds", "holds")


def test_the_regime_section_shows_each_figure_beside_the_papers_with_its_definition(outputs):
    from test_analysis_claims import PREMISE

    premise = PREMISE | {"grad_cosine_median": None, "sources": {"saturated_share_epoch1": ["a", "b"]}}
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], premise=premise)
    html = out.read_text(encoding="utf-8")
    row = re.search(r'<tr id="premise-saturated_share_epoch1">(.*?)</tr>', html, re.S).group(1)
    cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row, re.S)]
    assert cells[:4] == ["saturated_share_epoch1", "0.85", "0.8", "2"]
    assert "standard InfoNCE &lt; 1e-3" in cells[4] or "standard InfoNCE < 1e-3" in cells[4]
    row = re.search(r'<tr id="premise-exact_zero-param_grad-fp32">(.*?)</tr>', html, re.S).group(1)
    assert ">0.5<" in row and ">0.47<" in row and "torch norm is 0.0" in row
    row = re.search(r'<tr id="premise-grad_cosine_median">(.*?)</tr>', html, re.S).group(1)
    assert "<td>—</td><td>0.58</td>" in row  # not measured beside the paper's figure
    assert "paper (A.2, Long-CLIP-L, four benchmarks)" in html and "0.84–0.88" in html


def test_the_regime_section_tables_each_condition_beside_its_target(outputs):
    from hnclip.analysis.regime import CONDITION_KEYS, TARGETS, condition

    pattern = (False, True, False, "undecided", None, False, False, False, False)  # one met, one undecided
    met = dict(zip(CONDITION_KEYS, pattern[:len(CONDITION_KEYS)], strict=True))
    conditions = [condition(k, 0.5, {"x": 0.5}, met[k], f"ours of {k} [0.1, 0.9]", ["results/runs/a"])
                  for k in CONDITION_KEYS]
    regime = outputs["root"] / "regime" / "synthetic.json"
    regime.parent.mkdir()
    regime.write_text(json.dumps({"benchmark": "synthetic", "near_duplicate_cosine": 0.9, "n_test_images": 256,
                                  "plain_runs": ["a", "b", "c"], "met": 1, "conditions": conditions}))
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], regime=[regime])
    html = unescape(out.read_text(encoding="utf-8"))
    assert f"Conditions of the paper's regime, synthetic: 1 of {len(CONDITION_KEYS)} met, 1 undecided (256 test" in html
    marks = {True: "✓ met", False: "✗ not met", None: "– not measured", "undecided": "? undecided"}
    for key in CONDITION_KEYS:
        row = re.search(rf'<tr id="regime-synthetic-{key}" class="(\w+)">(.*?)</tr>', html, re.S)
        cells = [re.sub(r"<[^>]+>", " ", c).strip() for c in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row.group(2), re.S)]
        assert cells[1:3] == [f"ours of {key} [0.1, 0.9]", TARGETS[key]]
        assert cells[4] == marks[met[key]]
    geometry_row = re.search(r'<tr id="regime-synthetic-geometry"[^>]*>(.*?)</tr>', html, re.S).group(1)
    assert "86–99 % of negatives ≥ 0.8" in geometry_row  # the paper's figure where one exists
    assert 'id="regime-backbone-synthetic"' not in html  # a regime file without the backbone's identity


def test_the_regime_section_names_the_backbone_and_the_cpu_that_pretrained_it(outputs):
    from hnclip.analysis.regime import CONDITION_KEYS, condition

    conditions = [condition(k, 0.5, {"x": 0.5}, True, "ours", ["results/runs/a"]) for k in CONDITION_KEYS]
    regime = outputs["root"] / "regime" / "synthetic.json"
    regime.parent.mkdir()
    identity = {"weights": "4faedf9e0582b301",
                "cpu_kernels": {"setting": "avx2", "cpu": "Intel(R) Xeon(R) Processor (AVX512, AVX2)"}}
    regime.write_text(json.dumps({"benchmark": "synthetic", "near_duplicate_cosine": 0.9, "n_test_images": 256,
                                  "plain_runs": ["a"], "met": len(conditions), "conditions": conditions,
                                  "backbone_identity": identity}))
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], regime=[regime])
    html = unescape(out.read_text(encoding="utf-8"))
    paragraph = re.search(r'<p class="backbone-identity" id="regime-backbone-synthetic">(.*?)</p>', html, re.S).group(1)
    text = " ".join(re.sub(r"<[^>]+>", "", paragraph).split())
    assert text.startswith("Measured on the backbone with weight digest 4faedf9e0582b301, built under "
                           "cpu_kernels: avx2 on Intel(R) Xeon(R) Processor (AVX512, AVX2).")


def _judged(a2_verdict="inconclusive"):
    """claims.json as `hnclip claims` writes it: every claim no data but a2_frameworks (6 frameworks whose
    point values improved) and a1_columns, and a power note of the main comparison with its interval."""
    from hnclip.analysis.claims import evaluate_claims

    claims = evaluate_claims({}, "toy")
    for c in claims:
        if c["id"] == "a2_frameworks":
            c.update(verdict=a2_verdict, holds=None, missing=None,
                     measures={"frameworks": 6, "frameworks improved on every in-domain benchmark": 6})
        if c["id"] == "a1_columns":
            c.update(verdict="holds", holds=True, missing=None,
                     measures={"columns": 6, "R@1 gain over the strongest competitor": {"DOCCI I→T": 2.0}},
                     measure_intervals={"R@1 gain over the strongest competitor": {"DOCCI I→T": [0.5, 3.5]}})
    note = {"benchmark": "DOCCI", "images": 5000, "seeds": 3, "margin": 2.0, "ci_low": 0.5, "ci_high": 3.5,
            "half_width": 1.5, "resolution": 2.1, "versus": "Long-CLIP FT"}
    return {"claims": claims, "power": {"notes": [note], "reference": "HN-CLIP minus the strongest competitor "
                                                                       "(Long-CLIP FT)"}}


def test_paper_vs_ours_gives_our_intervals_and_no_reproduction_a_claim_does_not_support(outputs):
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], claims=_judged(),
        premise={**__import__("test_analysis_claims").PREMISE, "counts": {"saturated_share_epoch1": [85, 100]}})
    html = out.read_text(encoding="utf-8")
    # a claim measure with its interval; a counted share with its Wilson interval (85 of 100: [0.767, 0.907])
    assert _comparison(html, "a1.gain.docci.i2t")[3] == "2 [0.5, 3.5] toy"
    assert _comparison(html, "abstract.saturated_share")[3] == "0.85 [0.7672, 0.9069] toy"
    # six frameworks improved on point values under an inconclusive claim: no "+0" that reads as reproduced
    improved = _comparison(html, "abstract.frameworks_improved")
    assert improved[3] == "6 toy" and improved[4] == "claim a2_frameworks inconclusive: not a reproduction"
    # 6 columns of one benchmark against the paper's 24 of four: not a difference of -18
    assert _comparison(html, "a1.columns")[4] == "not comparable: counted over 1 benchmark here, 4 in the paper"
    held = render_report_from_files(
        out_html=outputs["root"] / "held.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], claims=_judged("holds")).read_text(encoding="utf-8")
    assert _comparison(held, "abstract.frameworks_improved")[4] == "+0"


def test_a_range_over_decades_is_compared_as_a_factor():
    from hnclip.analysis.published import _difference

    entry = {"range": [1e5, 1e8]}
    assert _difference(entry, 250.0) == "0.0025x the low end"  # not "-1e+05 below"
    assert _difference(entry, 3e8) == "3x the high end" and _difference(entry, 1e6) == "within range"
    assert _difference({"range": [2.4, 4.3]}, 1.4) == "-1 below"


TOP_PROBE = ("<script>var r = document.getElementById('result').getBoundingClientRect();"
             "var t = document.getElementById('table-main').getBoundingClientRect();"
             "var c = document.querySelector('li.claim').getBoundingClientRect();"
             "document.body.setAttribute('data-tops', [r.top, t.top, c.top].join(','))</script></body>")


def test_the_first_screen_says_the_result_before_any_claim_card(outputs, tmp_path):
    assert CHROMIUM, "needs Debian's chromium: `bash workflow/scripts/setup.sh --dev` installs it"
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], claims=_judged())
    html = out.read_text(encoding="utf-8")
    result = unescape(re.sub(r"<[^>]+>", "", re.search(r'<section class="result" id="result">(.*?)</section>',
                                                       html, re.S).group(1)))
    result = " ".join(result.split())
    assert "1 holds" in result and "1 inconclusive" in result
    assert "DOCCI 2 [0.5, 3.5] (5,000 test images, 3 seeds; HN-CLIP ahead)" in result
    assert "main table has 1 benchmark (DOCCI)" in result
    probe = out.with_name("tops.html")
    probe.write_text(html.replace("</body>", TOP_PROBE), encoding="utf-8")
    proc, console = _chromium(tmp_path, "tops", "--window-size=1280,900", "--dump-dom", probe.as_uri())
    assert proc.returncode == 0 and console == [], proc.stderr[-2000:]
    result_top, table_top, claim_top = map(float, re.search(r'data-tops="([^"]+)"', proc.stdout).group(1).split(","))
    # the result and the main table on the first screen (900 px), both above the first claim card
    assert result_top < 900 and table_top < 900 and result_top < table_top < claim_top


def _render_with_record(outputs, path: Path) -> Path:
    return render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], tuning=path)


def _tuning_record(path: Path) -> Path:
    """A hand-made record: HN-CLIP tuned at its centre; Long-CLIP FT's best one step below its centre and still
    rising; StructXLIP's every rate below the zero-shot backbone (92.0)."""
    def point(rate, step, curve, rise=None):
        epochs = [{"epoch": i + 1, "i2t_r1": v, "t2i_r1": v, "mean": v} for i, v in enumerate(curve)]
        return {"rate": rate, "step": step, "epochs": epochs, "score": curve[-1], "rise": rise, "minutes": 0.5}

    rising = {"epochs": [1, 2], "value": 3.0, "interval": [1.5, 4.5], "under_trained": True}
    record = {
        "protocol": {"benchmark": "synthetic", "split": "val", "score": "mean of i2t and t2i R@1",
                     "grid": "half-decade steps", "steps": 1, "max_extensions": 1, "base_lr": 1e-4,
                     "ratios_from": "config/paper.yaml", "seed": 0,
                     "budget": {"epochs": 2, "micro_batch": 16, "accum_steps": 2, "warmup_steps": 5,
                                "schedule": "cosine"}},
        "zeroshot": {"i2t_r1": 92.0, "t2i_r1": 92.0, "mean": 92.0},
        "methods": {
            "hnclip": {"key": "lr", "paper_ratio": 1.0, "paper_rate": 1e-4, "chosen": 1e-4, "score": 97.0,
                       "above_zeroshot": True, "under_trained": False,
                       "points": [point(3e-5, -1, [93.0, 94.0]), point(1e-4, 0, [95.0, 97.0]),
                                  point(3e-4, 1, [90.0, 96.0])]},
            "longclip": {"key": "lr", "paper_ratio": 1.0, "paper_rate": 1e-4, "chosen": 3e-5, "score": 96.0,
                         "above_zeroshot": True, "under_trained": True,
                         "points": [point(1e-5, -2, [92.5, 93.0]), point(3e-5, -1, [93.0, 96.0], rising),
                                    point(1e-4, 0, [94.0, 95.5]), point(3e-4, 1, [80.0, 90.0])]},
            "structxlip": {"key": "lr", "paper_ratio": 5.0, "paper_rate": 5e-4, "chosen": 5e-4, "score": 90.5,
                           "above_zeroshot": False, "under_trained": False,
                           "points": [point(2e-4, -1, [88.0, 90.0]), point(5e-4, 0, [86.0, 90.5]),
                                      point(2e-3, 1, [40.0, 80.0])]}},
        "competitor": "longclip",
        "provenance": {"cpu": "AMD EPYC", "git_commit": "c0ffee" * 4, "date": "2026-12-06", "minutes": 3.0}}
    path.write_text(json.dumps(record))
    return path


def test_the_tuning_section_shows_each_methods_paper_ratio_and_tuned_rate_and_the_flags(outputs):
    record = _tuning_record(outputs["root"] / "record.json")
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], tuning=record)
    html = unescape(out.read_text(encoding="utf-8"))
    section = html[html.index('<h2 id="tuning">'):html.index('<h2 id="tables">')]
    assert "val split of synthetic (never test)" in section and "Zero-shot backbone: val R@1 92.0" in section
    assert "The strongest competitor, chosen on val: <strong>Long-CLIP FT</strong>" in section
    rows = {r.split("</td>")[0].split("<td>")[-1]: r for r in section.split("<tr>")[2:]}
    # Long-CLIP FT: paper-ratio 1e-4 at 95.5, tuned 3e-05 at 96.0 (+0.5), still rising: under-trained
    longclip = rows["Long-CLIP FT"]
    assert "<td>0.0001</td>" in longclip and "<td>95.5</td>" in longclip and "<td>3e-05</td>" in longclip
    assert "93.0 → 96.0" in longclip and "+3.0 [+1.5, +4.5]" in longclip and "under-trained" in longclip
    assert "+0.5" in longclip
    # StructXLIP: named as the method no rate of its grid lifts above the backbone
    # StructXLIP, not in the main spec: named by its key
    assert "no rate of its grid (0.0002, 0.0005, 0.002) lifts it above the zero-shot backbone" in rows["structxlip"]
    assert "No rate lifts above the zero-shot backbone: structxlip." in section
    assert "under-trained" not in rows["HN-CLIP"] and "lifts" not in rows["HN-CLIP"]


def test_the_tuning_section_shows_the_long_budget_curves_and_both_differences_in_one_sentence(outputs):
    path = _tuning_record(outputs["root"] / "record.json")
    record = json.loads(path.read_text())

    def curve(values):
        return [{"epoch": i + 1, "i2t_r1": v, "t2i_r1": v, "mean": v} for i, v in enumerate(values)]

    record["long_budget"] = {
        "epochs": 3,
        "methods": {"hnclip": {"key": "lr", "rate": 1e-4, "curve": curve([95.0, 97.0, 98.3]), "minutes": 1.5},
                    "longclip": {"key": "lr", "rate": 3e-5, "curve": curve([93.0, 96.0, 96.5]), "minutes": 1.25}},
        "differences": [
            {"method": "hnclip", "against": "longclip", "budget_epochs": 2, "value": 1.0, "interval": [-0.5, 2.5]},
            {"method": "hnclip", "against": "longclip", "budget_epochs": 3, "value": 1.7, "interval": [0.3, 3.3]}]}
    record["provenance"]["long_budget_minutes"] = 2.8
    record["resolution"] = {"competitor": "longclip", "runner_up": "structxlip", "value": 4.35,
                            "interval": [3.6, 5.13], "resolved": True}
    path.write_text(json.dumps(record))
    out = _render_with_record(outputs, path)
    html = unescape(out.read_text(encoding="utf-8"))
    section = html[html.index('<h3 id="tuning-long-budget">'):html.index('<h2 id="tables">')]
    assert "The paper's budget: 3 epochs at the chosen rates" in section and "(2.8 minutes of training" in section
    assert ("<strong>HN-CLIP minus Long-CLIP FT on val: +1.0 [-0.5, +2.5] at 2 epochs, "
            "+1.7 [+0.3, +3.3] at 3 epochs</strong>") in section
    assert "<td>HN-CLIP</td><td>lr</td><td>0.0001</td>\n<td>95.0 → 97.0 → 98.3</td>" in section
    assert "<td>Long-CLIP FT</td><td>lr</td><td>3e-05</td>\n<td>93.0 → 96.0 → 96.5</td>" in section
    assert "<td>HN-CLIP − Long-CLIP FT</td><td>3</td>\n<td>+1.7 [+0.3, +3.3]</td>" in section
    # (this run's specs label no StructXLIP row: the method's key stands in)
    assert ("The split's resolution: val resolves the competitor's choice: Long-CLIP FT minus structxlip +4.35 "
            "[+3.60, +5.13]") in html
    # a record without the section: no long-budget part
    del record["long_budget"]
    path.write_text(json.dumps(record))
    out = _render_with_record(outputs, path)
    assert "tuning-long-budget" not in out.read_text(encoding="utf-8")


def test_a_tuning_record_whose_choice_is_none_of_its_points_is_a_visible_flag_not_a_crash(outputs, capsys):
    path = _tuning_record(outputs["root"] / "record.json")
    record = json.loads(path.read_text())
    record["methods"]["longclip"]["chosen"] = 5e-3  # none of its grid's points
    path.write_text(json.dumps(record))
    out = _render_with_record(outputs, path)
    html = unescape(out.read_text(encoding="utf-8"))
    section = html[html.index('<h2 id="tuning">'):html.index('<h2 id="tables">')]
    assert "tuning section left out, its record is not valid:" in section
    assert f"tuning record {path}: methods.longclip chose lr 0.005, which is none of its grid's points" in section
    assert f"warning: the tuning section is left out: tuning record {path}: methods.longclip" in capsys.readouterr().err


def test_the_first_screen_lists_collapsed_baselines_and_the_tuning_flags_and_flags_come_second(outputs):
    record = _tuning_record(outputs["root"] / "record.json")
    collapsed = {"StructXLIP": {"Synthetic": [-3.0, -4.1, -1.9]}, "GOAL": {"Synthetic": [1.1, -0.2, 2.4]}}
    out = render_report_from_files(
        out_html=outputs["root"] / "report.html", title="t", scale="toy", specs=outputs["specs"],
        tables=outputs["tables"], figures=outputs["figures"], geometry=outputs["geometry"],
        summaries=outputs["summaries"], tuning=record,
        claims={"claims": [], "power": {"notes": [], "reference": ""}, "collapsed": collapsed})
    html = unescape(out.read_text(encoding="utf-8"))
    first = " ".join(html[html.index('<section class="result"'):html.index('<h2 id="claims">')].split())
    assert "baselines at or below the zero-shot backbone:" in first
    assert "GOAL (Synthetic +1.1 [-0.2, +2.4]); StructXLIP (Synthetic -3.0 [-4.1, -1.9])" in first
    assert "under-trained at the shared budget (val R@1 still rising in the last epoch): Long-CLIP FT" in first
    assert "lifts it above the zero-shot backbone on val: structxlip" in first
    # the tuning table's flags column is second, beside the method's name (visible without scrolling)
    section = html[html.index('<h2 id="tuning">'):html.index('<h2 id="tables">')]
    assert section.index("<th>method</th><th>flags</th>") > 0


def test_a_report_without_a_tuning_record_has_no_tuning_section(outputs):
    _, html = _render(outputs)
    assert 'id="tuning"' not in html and 'href="#tuning"' not in html


def test_the_first_screen_states_the_summarys_comparisons_competitor_first():
    from hnclip.report import _headline_rows

    regime = {"synthetic": {"comparisons": {
        "competitor": {"method": "hnclip", "against": "finelip", "against_label": "FineLIP", "difference": 1.06,
                       "interval": [0.46, 1.71], "seeds": 3},
        "baseline": {"method": "hnclip", "against": "longclip", "against_label": "Long-CLIP FT", "difference": 2.51,
                     "interval": [1.45, 3.66], "seeds": 3}}}}
    rows = _headline_rows(regime)
    assert [(r["role"], r["against_label"], r["difference"], r["ci_low"], r["seeds"]) for r in rows] == [
        ("competitor", "FineLIP", 1.06, 0.46, 3), ("baseline", "Long-CLIP FT", 2.51, 1.45, 3)]
    # no competitor named: Long-CLIP FT's row alone
    regime["synthetic"]["comparisons"]["competitor"] = None
    assert [r["role"] for r in _headline_rows(regime)] == ["baseline"]
