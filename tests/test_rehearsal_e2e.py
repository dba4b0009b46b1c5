"""The rehearsal end to end: the README's command on the paper config, in a temporary folder (CPU, about 11
minutes in its reduced form (2 + 2 blocks), 46 minutes in full on a quiet 2-core machine).

Deselected from the default run (pyproject addopts); `.ci/run` runs it with `pytest -m rehearsal` and
``HNCLIP_REHEARSAL_LAYERS=config/rehearsal-ci.yaml``, config files layered after config/rehearsal.yaml
(space-separated, relative to the repository), which must leave every rule and framework in the DAG.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hnclip.frameworks import framework_names
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]
PAPER, REHEARSAL = REPO / "config/paper.yaml", REPO / "config/rehearsal.yaml"
FRAMEWORKS = set(framework_names())  # every registered framework: config/paper.yaml trains each
# the README's command, `snakemake --cores all --configfile config/paper.yaml config/rehearsal.yaml`,
# pointed at the repository's Snakefile and run in a temporary folder (config/rehearsal.yaml gives the
# GPU-declared jobs, which the default profile runs one at a time, every core)
LAYERS = [str(REPO / p) for p in os.environ.get("HNCLIP_REHEARSAL_LAYERS", "").split()]
COMMAND = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--cores", "all",
           "--configfile", str(PAPER), str(REHEARSAL), *LAYERS]

pytestmark = pytest.mark.rehearsal


def _profile() -> list[str]:
    """The workflow's default profile, which Snakemake finds next to the Snakefile by itself; named here
    because it holds the GPU jobs to one at a time (a ViT-L training job holds 11-19 GB)."""
    profile = REPO / "profiles/default"
    assert yaml.safe_load((profile / "config.yaml").read_text())["resources"]["gpu"] == 1
    return ["--workflow-profile", str(profile)]


def _job_stats(text: str) -> dict[str, int]:
    """Rule -> job count from Snakemake's "Job stats" table."""
    block = text.split("Job stats:", 1)[1].split("\ntotal", 1)[0]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", block, re.M)}


@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("rehearsal")
    proc = subprocess.run([*COMMAND, "--directory", str(workdir), *_profile()], capture_output=True, text=True,
                          timeout=4 * 3600)
    try:
        if proc.returncode != 0:
            logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in (workdir / "results/logs").rglob("*.log")
                             if p.stat().st_size and "Error" in p.read_text())
            pytest.fail(f"the rehearsal failed:\n{proc.stderr[-4000:]}\n{logs[-8000:]}")
        yield workdir, proc.stdout + proc.stderr
    finally:
        # pytest keeps the last three temporary folders: without the ~20 GB of ViT-L weights (run models,
        # the converted backbone, the random checkpoint); logs, records and the report stay to be read
        for weights in [*workdir.rglob("*.safetensors"), *workdir.rglob("*.pt")]:
            weights.unlink()


def test_every_rule_of_the_paper_dag_ran(rehearsal, tmp_path):
    _, output = rehearsal
    paper = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "-n",
                            "--cores", "1", "--configfile", str(PAPER), "--directory", str(tmp_path)],
                           capture_output=True, text=True, timeout=300)
    assert paper.returncode == 0, paper.stderr[-2000:]
    assert set(_job_stats(output)) == set(_job_stats(paper.stdout + paper.stderr))


def test_every_framework_trains_and_evaluates_at_the_papers_shapes(rehearsal):
    workdir, _ = rehearsal
    config = yaml.safe_load(PAPER.read_text())
    framework_of = {m: spec["framework"] for m, spec in config["methods"].items()}
    summaries = list((workdir / "results/runs").rglob("summary.json"))
    evals = [p for p in (workdir / "results/evals").rglob("*.json") if "zeroshot" not in p.parts]
    trained = {p.relative_to(workdir / "results/runs").parts[1] for p in summaries}
    evaluated = {p.relative_to(workdir / "results/evals").parts[1] for p in evals}
    assert {framework_of[m] for m in trained} == {framework_of[m] for m in evaluated} == FRAMEWORKS
    assert set(config["experiments"]["main"]["methods"]) <= trained & evaluated  # HN-CLIP among them
    zeroshot = {p.stem for p in (workdir / "results/evals/zeroshot").glob("*.json")}
    # the main table's benchmarks, and the retention experiment's short-caption ones as the layered config
    # the command ran sets them (config/paper.yaml: coco and flickr30k; the CI layer: coco alone)
    layered = load_config([PAPER, REHEARSAL, *LAYERS])
    retention = set(layered["experiments"].get("retention", {}).get("benchmarks", []))
    assert zeroshot == {"docci", "dci", "long_dci", "urban1k"} | retention
    variants = {p.stem for p in (workdir / "results/protocols").rglob("*.json")}
    assert variants == {"test_goal", "test_all", "test_keep_empty"}
    assert not list((workdir / "results/checkpoints").rglob("*.pt"))  # keep_checkpoint: none
    spec = json.loads((workdir / "results/backbone/model/model.json").read_text())["spec"]
    assert spec["context_length"] == 248 and spec["frozen_positions"] == 20
    vision, text = spec["config"]["vision_cfg"], spec["config"]["text_cfg"]
    assert (vision["image_size"], vision["patch_size"], vision["width"], text["width"]) == (224, 14, 1024, 768)
    depth = layered["rehearsal"].get("layers")  # CI's layer stacks fewer blocks of the same shapes
    if depth is None:
        assert spec["name"] == "ViT-L-14-longclip" and (vision["layers"], text["layers"]) == (24, 12)
    else:
        assert (vision["layers"], text["layers"]) == (depth["vision"], depth["text"])
    summary = json.loads(summaries[0].read_text())
    assert summary["config"]["micro_batch"] == 2 and summary["config"]["accum_steps"] == 2
    for path in evals:
        metrics = json.loads(path.read_text())["metrics"]
        assert all(0.0 <= v <= 100.0 for v in metrics.values()), path


def test_benchmarks_came_through_the_fetch_lock_and_sam_through_transformers(rehearsal):
    workdir, _ = rehearsal
    for name in ("docci", "dci", "long_dci", "urban1k", "vg"):
        source = json.loads((workdir / f"results/data/{name}/source.json").read_text())
        assert source["origin"]["kind"] == "downloaded"
        assert json.loads(Path(source["origin"]["lock"]).read_text())["files"], name
    index = json.loads((workdir / "results/data/docci/train_segments/index.json").read_text())
    assert index["settings"]["sam_dir"].endswith("sam-tiny-random") and index["count"] == 8


def test_the_report_renders_labelled_as_a_rehearsal(rehearsal):
    workdir, _ = rehearsal
    html = (workdir / "results/report.html").read_text()
    assert "rehearsal-scale run" in html and "Rehearsal of the paper configuration" in html
    assert "paper-scale run" not in html
    for table in (workdir / "results/tables").glob("*.html"):
        assert 'data-scale="rehearsal"' in table.read_text(), table
