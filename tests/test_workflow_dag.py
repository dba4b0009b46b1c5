"""The DAG's shape: job counts per rule from the config expansion, config errors, lint."""

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]


def dry_run(*args, cwd=REPO):
    proc = subprocess.run([*SNAKEMAKE, "-n", "--cores", "2", "--quiet", "rules", *args], cwd=cwd,
                          capture_output=True, text=True)
    return proc


def job_counts(output: str) -> dict[str, int]:
    counts = {}
    for line in output.splitlines():
        m = re.match(r"^([a-z_]+)\s+(\d+)$", line.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def test_paper_grid_job_counts_match_the_hand_derived_expansion():
    # Hand derivation for config/paper.yaml (train sets: docci, dci, vg; Long-DCI trains on DOCCI,
    # Urban-1K on VG):
    #   main 7 methods x 3 train sets = 21; plugin adds 6 +HN methods x 3 = 18 (39); transfer reuses
    #   main runs (0); fractions 2 methods x 3 fractions < 1 x 3 = 18 (57); gamma sweep 4 new gammas x 3
    #   = 12 (69); ablation adds the frozen-G variant x 3 = 3 (72); seeds 4 methods x seed 1 x 3 = 12 (84).
    # Evaluations: main 28; plugin +24 (52); transfer DCI->DOCCI and DOCCI->DCI 4 each (60); fractions
    #   2 x 3 x 4 = 24 (84); gamma 4 x 4 = 16 (100); frozen-G 4 (104); seeds 4 x 4 = 16 (120).
    start = time.perf_counter()
    proc = dry_run("--configfile", "config/paper.yaml")
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    assert counts["train"] == 84
    assert counts["evaluate"] == 120
    assert counts["segments"] == 3 and counts["edges"] == 3  # GOAL/StructXLIP products per train set
    assert counts["fetch_benchmark"] == 5  # docci, dci, long_dci, urban1k, vg
    assert counts["prepare"] == 7  # train: docci, dci, vg; test: docci, dci, long_dci, urban1k
    assert counts["subset"] == 9  # 3 fractions < 1 x 3 train sets, seed 0
    assert counts["table"] == 7  # one per experiment
    assert counts["convert_backbone"] == 1 and "pretrain_backbone" not in counts
    assert counts["report"] == 1
    assert elapsed < 30, f"paper DAG dry run took {elapsed:.1f} s"


def test_embedded_default_expands_every_experiment():
    proc = dry_run()
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    # main 7 + plugin 6 + fractions 2 x 3 + gamma 4 + frozen 1 + seeds 2 x 2 (seeds 1 and 2) = 28 runs
    assert counts["train"] == 28
    # 28 in-domain evaluations + transfer of longclip and hnclip to synthetic_shift
    assert counts["evaluate"] == 30
    assert counts["pretrain_backbone"] == 1 and counts["stretch_backbone"] == 1
    assert counts["pretrain_pool"] == 1 and counts["pretrain_long_backbone"] == 1
    assert counts["table"] == 7


BASE = """
scale: toy
benchmarks: {synthetic: {adapter: synthetic, root: r, train_set: synthetic}}
methods: {longclip: {framework: longclip}, hnclip: {framework: longclip, hn: true}}
"""


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("gamma: abc", "gamma"),
        ("trian: {epochs: 1}", "trian"),
        ("experiments: {main: {benchmarks: [synthetic], methods: [nope]}}", "nope"),
        ("experiments: {main: {benchmarks: [docci], methods: [hnclip]}}", "docci"),
        ("experiments: {fractions: {benchmarks: [synthetic], methods: [hnclip], fractions: [1.5]}}", "1.5"),
        ("experiments: {gamma_sweep: {benchmarks: [synthetic], method: longclip, gammas: [0]}}", "gamma_sweep"),
        ("methods: {x: {framework: finelip_typo}}", "finelip_typo"),
        ("methods: {g: {framework: goal}}\nexperiments: {main: {benchmarks: [synthetic], methods: [g]}}",
         "preprocess.sam_model"),
    ],
)
def test_bad_config_fails_before_any_job_naming_the_key(tmp_path, extra, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(BASE + extra + "\n")
    proc = dry_run("--configfile", str(cfg))
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert expected in output, output[-2000:]


def test_lint_and_format_are_clean():
    lint = subprocess.run([*SNAKEMAKE, "--lint", "--cores", "1"], cwd=REPO, capture_output=True, text=True)
    assert lint.returncode == 0 and "good condition" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    fmt = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=REPO, capture_output=True,
                         text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_multi_gpu_training_jobs_launch_one_process_per_gpu_with_torchrun():
    proc = subprocess.run([*SNAKEMAKE, "-n", "-p", "--cores", "1", "--forceall", "--config",
                           'resources={"train": {"gpu": 2}}'], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    train_commands = [line for line in proc.stdout.splitlines() if "hnclip train" in line and "--subset" in line]
    assert train_commands and all("torchrun --standalone --nproc-per-node 2 --no-python hnclip train" in c
                                  for c in train_commands)
    single = subprocess.run([*SNAKEMAKE, "-n", "-p", "--cores", "1", "--forceall"], cwd=REPO, capture_output=True,
                            text=True)
    assert "hnclip train" in single.stdout and "torchrun" not in single.stdout
