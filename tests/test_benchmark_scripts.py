"""Every script in benchmarks/ runs in its --quick mode (seconds, tiny sizes, on the CPU), from a temporary
folder: a script whose code drifted from hnclip's fails here rather than when its numbers are wanted. A new
script without --quick fails too; a shared helper (no ``__main__`` block) must be imported by a script."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHMARKS = REPO / "benchmarks"
# --quick still runs a whole Snakemake DAG (config/finetune.yaml) beside open_clip_train: minutes, not seconds
SLOW = {"finetune_vs_open_clip.py"}
ALL = sorted(BENCHMARKS.glob("*.py"))
# each script's whole --quick run is a subprocess of 5-40 s: marker slow (.ci/run), the DAG one e2e too; its
# shape (a --quick mode, or a helper a script imports) is checked in the default suite


def _is_script(path: Path) -> bool:
    return re.search(r'^if __name__ == "__main__":', path.read_text(), re.M) is not None


SCRIPTS = [pytest.param(p, id=p.name, marks=[pytest.mark.slow, pytest.mark.e2e] if p.name in SLOW else [pytest.mark.slow])
           for p in ALL if _is_script(p)]


@pytest.mark.parametrize("script", ALL, ids=[p.name for p in ALL])
def test_every_script_has_a_quick_mode_and_every_helper_a_script_that_imports_it(script):
    if not _is_script(script):
        users = [p.name for p in BENCHMARKS.glob("*.py")
                 if p != script and re.search(rf"\b{script.stem}\b", p.read_text())]
        assert users, f"{script.name} has no __main__ block and no script in benchmarks/ imports it"
    else:
        assert "--quick" in script.read_text(), f"{script.name} has no --quick mode"


@pytest.mark.parametrize("script", SCRIPTS)
def test_benchmark_script_runs_quick(script, tmp_path):
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}  # the CPU, one thread: a smoke run anywhere
    proc = subprocess.run([sys.executable, str(script), "--quick"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900 if script.name in SLOW else 600)
    assert proc.returncode == 0, f"{script.name} --quick failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert proc.stdout.strip(), f"{script.name} --quick printed nothing"


@pytest.mark.slow  # a fresh interpreter importing open_clip_train
def test_the_dev_install_can_run_open_clip_train():
    """finetune_vs_open_clip.py runs ``python -m open_clip_train.main``, whose data module imports braceexpand
    and webdataset at the top: the --dev install must carry them (pyproject's bench extra), or CI's slow run
    fails after the whole default suite. A fresh process, as the script starts it."""
    proc = subprocess.run([sys.executable, "-c", "import open_clip_train.data"], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, f"open_clip_train.data does not import (pip install -e '.[bench]'):\n{proc.stderr[-1500:]}"
