"""Copies of this checkout for tests that run the workflow the way a user does, at a repository root.

A copy holds what `git ls-files` lists (tracked files, and untracked ones git does not ignore), as they
are in the working tree, and nothing generated: no results/, .snakemake/ or .venv. Tests run Snakemake
there, never in the checkout itself, whose results/ and .snakemake/ belong to the user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def copy_checkout(dst: Path) -> Path:
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout
    for rel in filter(None, listed.split("\0")):
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is not copied
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
    return dst


def user_env(**extra: str) -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH (the workflow finds its own src/), no venv on PATH."""
    venv_bin = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != venv_bin)
    env.update(extra)
    return env
