"""The whole DAG end to end on the micro config, in a temporary folder (CPU, a few minutes)."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
METRICS = {"i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10"}


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--configfile", str(REPO / "tests/e2e/micro.yaml"), "--cores", "2", *args]
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
def test_finished_runs_are_not_retrained_when_a_table_rule_reruns(micro_run):
    assert "Nothing to be done" in (snakemake(micro_run, "-n").stdout + snakemake(micro_run, "-n").stderr)
    proc = snakemake(micro_run, "-n", "--forcerun", "table", "report")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "table" in out and "\ntrain " not in out and "rule train:" not in out
