"""Changing --cores retrains nothing: the long pretraining stage's process count is a config value
(pretrain.long.processes), not derived from the cores, so no param of a finished job changes with them.

The backbone chain of the micro config (fetch, pool, init, short stage, stretch, long stage on two
processes) runs for real in a copy of the checkout (tests/checkout.py), under --cores 2; dry-runs with
--cores 1 and --cores 3 then plan nothing. About a minute on the 2-core machine."""

from __future__ import annotations

import subprocess
import sys

from checkout import copy_checkout, user_env

TARGET = "results/pretrain/long/summary.json"
CONFIG = ("--configfile", "tests/e2e/micro.yaml")


def snakemake(root, *args) -> subprocess.CompletedProcess:
    # targets before --configfile, which takes any number of values
    return subprocess.run([sys.executable, "-m", "snakemake", *args, *CONFIG], cwd=root, env=user_env(),
                          capture_output=True, text=True, timeout=1200)


def test_a_finished_backbone_is_not_retrained_under_other_cores(tmp_path):
    root = copy_checkout(tmp_path / "checkout")
    done = snakemake(root, "--cores", "2", TARGET)
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    assert "--nproc-per-node 2" in done.stdout + done.stderr
    for cores in ("1", "3"):
        again = snakemake(root, "-n", "--cores", cores, TARGET)
        out = again.stdout + again.stderr
        assert again.returncode == 0, out[-3000:]
        assert "Nothing to be done" in out, out[-3000:]


def test_the_process_count_comes_from_the_config_whatever_the_cores(tmp_path):
    root = copy_checkout(tmp_path / "checkout")
    for cores in ("1", "3"):
        plan = snakemake(root, "-n", "-p", "--cores", cores, TARGET)
        out = plan.stdout + plan.stderr
        assert plan.returncode == 0, out[-3000:]
        assert "--nproc-per-node 2 " in out, out[-3000:]
    odd = snakemake(root, "-n", "--cores", "1", TARGET, "--config", "pretrain={long: {processes: 3}}")
    assert odd.returncode != 0
    assert "config key pretrain.long.processes: 3 does not divide" in odd.stdout + odd.stderr
