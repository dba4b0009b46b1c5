"""Changing --cores retrains nothing: the long pretraining stage's process count is a config value
(pretrain.long.processes), not derived from the cores, so no param of a finished job changes with them.

Dry runs of the micro config's backbone chain (fetch, pool, init, short stage, stretch, long stage on two
processes) in a copy of the checkout (tests/checkout.py) under --cores 1 and --cores 3 print the same shell
command for every job: Snakemake reruns a finished job when its params or command change, so a chain finished
under one --cores is not retrained under another."""

from __future__ import annotations

import subprocess
import sys

import pytest
from checkout import copy_checkout, user_env

TARGET = "results/pretrain/long/summary.json"
CONFIG = ("--configfile", "tests/e2e/micro.yaml")


def snakemake(root, *args) -> subprocess.CompletedProcess:
    # targets before --configfile, which takes any number of values
    return subprocess.run([sys.executable, "-m", "snakemake", *args, *CONFIG], cwd=root, env=user_env(),
                          capture_output=True, text=True, timeout=1200)


@pytest.mark.slow  # a checkout copy and three dry runs
def test_the_process_count_comes_from_the_config_whatever_the_cores(tmp_path):
    root = copy_checkout(tmp_path / "checkout")
    commands = {}
    for cores in ("1", "3"):
        plan = snakemake(root, "-n", "-p", "--cores", cores, TARGET)
        out = plan.stdout + plan.stderr
        assert plan.returncode == 0, out[-3000:]
        assert "--nproc-per-node 2 " in out, out[-3000:]
        commands[cores] = sorted(line for line in plan.stdout.splitlines() if "-m hnclip " in line)
    assert len(commands["1"]) >= 6 and commands["1"] == commands["3"]
    odd = snakemake(root, "-n", "--cores", "1", TARGET, "--config", "pretrain={long: {processes: 3}}")
    assert odd.returncode != 0
    assert "config key pretrain.long.processes: 3 does not divide" in odd.stdout + odd.stderr
