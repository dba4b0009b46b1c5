"""The whole DAG end to end on the micro config, in a temporary folder (CPU, a few minutes)."""

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
METRICS = {"i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10"}


def snakemake(workdir: Path, *args: str, configfile: Path = REPO / "tests/e2e/micro.yaml") -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--configfile", str(configfile), "--cores", "2", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=1500)


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("micro")
    proc = snakemake(workdir, "--scheduler", "greedy")
    if proc.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in (workdir / "results/logs").rglob("*.log")
                         if p.stat().st_size)
        pytest.fail(f"snakemake failed:\n{proc.stderr[-4000:]}\n{logs[-8000:]}")
    return workdir


@pytest.mark.e2e
def test_micro_dag_produces_every_table_figure_and_the_report(micro_run):
    results = micro_run / "results"
    for experiment in ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds",
                       "epochs", "cost"):
        assert (results / "tables" / f"{experiment}.csv").stat().st_size > 0, experiment
    for figure in ("dynamics", "fractions", "gamma_sweep", "epochs", "gallery"):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 1000, figure
    html = (results / "report.html").read_text()
    assert "toy" in html.lower()
    evals = list((results / "evals").rglob("*.json"))
    assert len(evals) == 16  # 14 in-domain + 2 transfer
    for path in evals:
        record = json.loads(path.read_text())
        assert set(record["metrics"]) == METRICS
        assert all(0.0 <= v <= 100.0 for v in record["metrics"].values())


@pytest.mark.e2e
def test_micro_runs_log_gradient_dynamics_and_stretched_backbone(micro_run):
    runs = list((micro_run / "results/runs").rglob("summary.json"))
    assert len(runs) == 14
    dynamics = pd.read_csv(runs[0].parent / "dynamics.csv")
    assert len(dynamics) >= 1 and dynamics["infonce"].notna().all()
    spec = json.loads((micro_run / "results/backbone/model/model.json").read_text())["spec"]
    assert spec["context_length"] == 248 and spec["frozen_positions"] == 20


@pytest.mark.e2e
def test_micro_report_shows_every_table_and_figure_in_headless_chromium(micro_run, tmp_path):
    from test_report import CHROMIUM, _chromium

    assert CHROMIUM, "needs Debian's chromium: `bash workflow/scripts/setup.sh --dev` installs it"
    report = micro_run / "results" / "report.html"
    proc, console = _chromium(tmp_path, "dom", "--window-size=1200,900", "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == [], console
    tables = set(re.findall(r'<table[^>]* id="table-([^"]+)"', proc.stdout))
    assert {"main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds", "epochs", "cost",
            "geometry-summary", "paper-vs-ours", "provenance"} <= tables
    figures = set(re.findall(r'<figure id="figure-([^"]+)"', proc.stdout))
    assert {"dynamics", "fractions", "gamma_sweep", "epochs", "gallery", "geometry_synthetic",
            "geometry_synthetic_shift"} <= figures
    shot = tmp_path / "micro-report.png"
    proc, _ = _chromium(tmp_path, "shot", "--window-size=1200,3000", f"--screenshot={shot}", report.as_uri())
    assert proc.returncode == 0 and shot.stat().st_size > 10_000


@pytest.mark.e2e
def test_snakemake_native_report_of_the_micro_run(micro_run):
    proc = snakemake(micro_run, "--report", str(micro_run / "report.zip"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    with zipfile.ZipFile(micro_run / "report.zip") as archive:
        names = archive.namelist()
    assert any(n.endswith("main.html") for n in names) and any(n.endswith("gallery.png") for n in names)


@pytest.mark.e2e
def test_finished_runs_are_not_retrained_when_a_table_rule_reruns(micro_run):
    assert "Nothing to be done" in (snakemake(micro_run, "-n").stdout + snakemake(micro_run, "-n").stderr)
    proc = snakemake(micro_run, "-n", "--forcerun", "table", "report")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "table" in out and "\ntrain " not in out and "rule train:" not in out


@pytest.mark.e2e
def test_each_run_records_its_methods_recipe_and_what_hn_meant(micro_run):
    runs = micro_run / "results/runs/synthetic"
    longclip = json.loads((runs / "longclip/g0/f1/s0/summary.json").read_text())
    recipe = longclip["recipe"]  # micro.yaml: Long-CLIP's recipe for its family over the shared train section
    assert (recipe["lr"], recipe["weight_decay"], recipe["label_smoothing"]) == (0.0002, 0.01, 0.1)
    hnclip = json.loads((runs / "hnclip/g0.5/f1/s0/summary.json").read_text())
    assert (hnclip["recipe"]["lr"], hnclip["recipe"]["label_smoothing"]) == (0.0005, 0.0)  # the shared values
    finelip = json.loads((runs / "finelip/g0/f1/s0/summary.json").read_text())
    assert {g["lr"] for g in finelip["recipe"]["groups"] if g["name"].startswith("module_")} == {0.002}
    assert "adds the HN global term" in finelip["hn_plugin"]
    assert set(finelip["config"]["finelip"]) >= {"margin", "ramp", "hn"} and "lora" not in finelip["config"]


@pytest.mark.e2e
def test_a_finished_run_whose_config_changed_retrains_cleanly(micro_run, tmp_path):
    """Snakemake reruns the job on the params change and deletes its outputs; training starts over (it used
    to stop on the finished run's checkpoint of the old config)."""
    config = (REPO / "tests/e2e/micro.yaml").read_text()
    changed = tmp_path / "changed.yaml"
    changed.write_text(config.replace("{lr: 0.0002, weight_decay: 0.01, label_smoothing: 0.1}",
                                      "{lr: 0.0003, weight_decay: 0.01, label_smoothing: 0.1}"))
    target = "results/runs/synthetic/longclip/g0/f1/s0/summary.json"
    before = json.loads((micro_run / target).read_text())
    proc = snakemake(micro_run, target, configfile=changed)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    after = json.loads((micro_run / target).read_text())
    assert after["recipe"]["lr"] == 0.0003 and after["config_hash"] != before["config_hash"]
    assert after["steps"] == before["steps"] and after["checkpoint_sha256"] != before["checkpoint_sha256"]
