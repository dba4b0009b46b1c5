"""`--use-conda` through Snakemake's own conda code, with a stand-in for conda (its channels are unreachable
here; see tests/conda_standin.py for what the stand-in checks and what it cannot).

In a copy of the checkout, Snakemake creates every rule's environment from the file it copied to
.snakemake/conda/<hash>.yaml; the stand-in resolves each requirement from there and builds the
environment from the pinned distributions and their dependencies only. Then jobs of the data env
(fetch, subset) and of the train env (prepare, init-model) run in their environments and import hnclip
from the workflow's src/, which no environment installs. ~1 min on 2 cores (torch imports).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import REPO, copy_checkout, user_env

from hnclip import paths

TARGETS = [paths.subset_path("synthetic", "0.5", "0"), "results/pretrain/init"]
# what the report env's verbs import (table, table-epochs, table-cost, figure, claims, report): checked
# directly, since running them needs trained runs
REPORT_IMPORTS = ("import hnclip.cli, hnclip.analysis.tables, hnclip.analysis.figures, hnclip.analysis.claims.files, "
                  "hnclip.report")


@pytest.fixture(scope="module")
def conda_workdir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("conda")
    work = copy_checkout(tmp / "checkout")
    fake_bin = tmp / "bin"
    fake_bin.mkdir()
    conda = fake_bin / "conda"
    conda.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{REPO / "tests/conda_standin.py"}" "$@"\n')
    conda.chmod(0o755)
    env = user_env(HNCLIP_CONDA_BASE=str(tmp / "conda-base"), HNCLIP_CONDA_RECORD=str(tmp / "conda-calls.jsonl"))
    env["PATH"] = f"{fake_bin}:{env['PATH']}"
    return {"work": work, "env": env, "record": tmp / "conda-calls.jsonl"}


def snakemake(ctx, *args) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--use-conda", "--cores", "2", "--configfile",
           "tests/e2e/micro.yaml", *args]
    return subprocess.run(cmd, cwd=ctx["work"], env=ctx["env"], capture_output=True, text=True, timeout=1200)


def calls(ctx) -> list[dict]:
    return [json.loads(line) for line in ctx["record"].read_text().splitlines()]


def kind_of(created: dict) -> str:
    """data, train or report: the env file of envs/ whose content conda was handed."""
    return next((kind for kind in ("data", "train", "report")
                 if (REPO / "envs" / f"{kind}.yaml").read_text() == created["content"]), "?")


@pytest.mark.e2e
def test_every_rule_environment_is_created_from_the_copied_env_file_with_pins_only(conda_workdir):
    proc = snakemake(conda_workdir, "--conda-create-envs-only")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    created = [c for c in calls(conda_workdir) if c["call"] == "env create"]
    assert not [c for c in calls(conda_workdir) if "error" in c], calls(conda_workdir)
    conda_dir = conda_workdir["work"] / ".snakemake/conda"
    assert sorted(kind_of(c) for c in created) == ["data", "report", "train"]
    for c in created:
        # Snakemake handed conda its own copy, next to the environment it asked for
        assert Path(c["file"]).parent == conda_dir and Path(c["prefix"]).parent == conda_dir
        kind = kind_of(c)
        pip = next(d["pip"] for d in yaml.safe_load(c["content"])["dependencies"] if isinstance(d, dict))
        assert sorted(p.lower() for p in c["pins"]) == sorted(p.lower() for p in pip), kind
        assert "hnclip" not in c["installed"], kind
        python = Path(c["prefix"]) / "bin/python"
        # the environment alone cannot import the project: only the workflow's src/ on PYTHONPATH can
        bare = subprocess.run([str(python), "-c", "import hnclip"], env=user_env(), capture_output=True, text=True)
        assert bare.returncode != 0 and "No module named 'hnclip'" in bare.stderr, kind
    report_env = next(Path(c["prefix"]) for c in created if kind_of(c) == "report")
    imports = subprocess.run([str(report_env / "bin/python"), "-c", REPORT_IMPORTS], capture_output=True, text=True,
                             env=user_env(PYTHONPATH=str(conda_workdir["work"] / "src")))
    assert imports.returncode == 0, imports.stderr[-2000:]


@pytest.mark.e2e
def test_data_and_train_jobs_run_in_their_environments_importing_hnclip_from_the_workflow_src(conda_workdir):
    proc = snakemake(conda_workdir, "--printshellcmds", *TARGETS)
    output = proc.stdout + proc.stderr
    logs = "\n".join(p.read_text()[-800:] for p in (conda_workdir["work"] / "results/logs").rglob("*.log"))
    assert proc.returncode == 0, output[-4000:] + logs[-4000:]
    work = conda_workdir["work"]
    assert (work / TARGETS[0]).read_text().strip()
    assert (work / "results/pretrain/init/model.json").is_file()
    # the jobs ran in the environments the stand-in built (one activation per job: fetch, prepare,
    # subset, init-model; prepare in the train env, whose tokenizer counts cut captions), whose python has
    # no hnclip: it came from the workflow's src/
    kinds = {c["prefix"]: kind_of(c) for c in calls(conda_workdir) if c["call"] == "env create"}
    activated = [kinds[c["prefix"]] for c in calls(conda_workdir) if c["call"] == "activate"]
    assert sorted(activated) == ["data", "data", "train", "train"], activated
    assert not [c for c in calls(conda_workdir) if "error" in c]
