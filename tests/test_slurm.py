"""The cluster path on a real single-node SLURM: `pytest -m slurm` (root or sudo; apt-get if SLURM is missing).

`workflow/scripts/slurm_cluster.sh` starts munge, slurmctld and slurmd on this machine, with partitions
named like the profile's and fake GPUs. The micro configuration then runs through
`--workflow-profile profiles/slurm` (which replaces profiles/default); the test overrides only what one small node cannot grant (memory,
CPUs per task) and what a cluster without accounting needs (`--slurm-status-command squeue`).

Cost: one cluster and one SLURM run shared by the tests, a local reference run overlapped with it, a
one-job failing run and a preempted training run with its uninterrupted reference; ~5-8 min on 2 cores,
almost all of it the ~15-30 s each SLURM job spends starting Snakemake twice and importing torch. The
SLURM run builds the main table's runs and a geometry (every kind of cluster job) rather than the whole
report, which the local end-to-end test already covers.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from hnclip import paths

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "workflow/scripts/slurm_cluster.sh"
PROFILE = REPO / "profiles/slurm"
MICRO = REPO / "tests/e2e/micro.yaml"

# what one small node grants every job, whatever the profile asks for
SMALL_MEM_MB = 1000
SMALL_CPUS = 1
# every kind of job that goes to the cluster, plus local rules: the main table's runs, a geometry, a subset
# (the main table's evaluations are its training jobs'; a transfer evaluation is an evaluate job)
MAIN_TARGETS = ["results/tables/main.csv", "results/geometry/synthetic.json",
                paths.subset_path("synthetic", "0.5", "0"),
                "results/evals/synthetic/longclip/g0/f1/s0/synthetic_shift.json"]
REFERENCE_TARGETS = ["results/tables/main.csv", "results/geometry/synthetic.json"]
# rules these targets send to the cluster whatever methods the micro config lists (frameworks add more)
# (evaluate_zeroshot: the main table's first row, the backbone before fine-tuning)
CORE_CLUSTER_RULES = {"prepare", "subset", "init_backbone", "pretrain_backbone", "stretch_backbone", "train",
                      "evaluate", "evaluate_zeroshot", "geometry"}
GPU_RULES = {"pretrain_backbone", "train", "evaluate", "evaluate_zeroshot", "geometry"}  # DESIGN section 5
LOCAL_RULES = {"fetch_benchmark", "spec", "table"}
# rules the micro run does not reach (synthetic data has no protocol variants) that must still get the
# resources of the rule whose work they repeat on another split
SAME_RESOURCES = {"evaluate_zeroshot": "evaluate", "evaluate_protocol": "evaluate",
                  "evaluate_protocol_zeroshot": "evaluate", "prepare_protocol_split": "prepare",
                  "train_without_test": "train"}
# resource names snakemake-executor-plugin-slurm 2.8 turns into sbatch options (submit_string.py,
# utils.set_gres_string) plus snakemake's own; any other name in the profile is silently dropped
PLUGIN_RESOURCES = {"slurm_partition", "slurm_account", "slurm_extra", "slurm_cluster", "runtime", "mem_mb",
                    "mem_mb_per_cpu", "cpus_per_task", "cpus_per_gpu", "gpu", "gpu_model", "gres", "nodes",
                    "tasks", "tasks_per_gpu", "tasks_per_node", "mpi", "constraint", "qos", "clusters",
                    "tmpdir", "disk_mb"}
RUN = "results/runs/synthetic/longclip/g0/f1/s0"  # the run the preemption test interrupts
RUN_TIMEOUT_S = 1500


# ------------------------------------------------------------------------------------------- helpers
def profile() -> dict:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())


def requested(rule: str) -> dict:
    """The resources the profile gives ``rule``: its set-resources over the default-resources."""
    prof = profile()
    return {**prof["default-resources"], **prof["set-resources"].get(rule, {})}


def cluster_overrides() -> list[str]:
    """CLI arguments for a small node: the profile's resources with memory and CPUs shrunk, all else kept.

    A command-line --set-resources replaces the profile's whole mapping, so every entry is passed again,
    read from the profile file itself: partitions, GPUs and runtimes still come from the profile.
    """
    prof = profile()

    def shrink(resources: dict) -> dict:
        out = dict(resources)
        if "mem_mb" in out:
            out["mem_mb"] = SMALL_MEM_MB
        if "cpus_per_task" in out:
            out["cpus_per_task"] = SMALL_CPUS
        return out

    defaults = shrink(prof["default-resources"])
    set_resources = [f"{rule}:{k}={v}" for rule, res in prof["set-resources"].items()
                     for k, v in shrink(res).items()]
    return ["--default-resources", *(f"{k}={v}" for k, v in defaults.items()),
            "--set-resources", *set_resources,
            "--slurm-status-command", "squeue",
            # the first status query after 2 s rather than 40 s; MinJobAge (3600 s) stays above 3x this
            "--slurm-init-seconds-before-status-checks", "2"]


def snakemake_cmd(workdir: Path, configfile: Path, targets, *, cluster: bool, cores: int = 2) -> list[str]:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
           str(workdir), "--configfile", str(configfile)]
    if cluster:
        cmd += ["--workflow-profile", str(PROFILE), *cluster_overrides()]
    else:
        cmd += ["--cores", str(cores), "--scheduler", "greedy"]
    return [*cmd, *targets]


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    """Run in the background, output to ``log``, in its own process group so a failed test can end it."""
    handle = log.open("w")
    return subprocess.Popen(cmd, stdout=handle, stderr=subprocess.STDOUT, text=True, start_new_session=True)


def finish(proc: subprocess.Popen, log: Path, timeout: float = RUN_TIMEOUT_S) -> str:
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop(proc)
        pytest.fail(f"{' '.join(proc.args[:6])} ... ran past {timeout} s; log {log}:\n{log.read_text()[-4000:]}")
    return log.read_text()


def stop(proc: subprocess.Popen) -> None:
    """SIGINT first: Snakemake then cancels its SLURM jobs itself."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def failure_report(workdir: Path, output: str) -> str:
    logs = "\n".join(f"== {p}\n{p.read_text(errors='replace')[-1500:]}"
                     for p in sorted((workdir / "results/logs").rglob("*.log")) if p.stat().st_size)
    slurm_logs = "\n".join(f"== {p}\n{p.read_text(errors='replace')[-1500:]}"
                           for p in sorted((workdir / ".snakemake/slurm_logs").rglob("*.log")))
    return f"{output[-5000:]}\n{logs[-5000:]}\n{slurm_logs[-5000:]}"


def run_id(output: str) -> str:
    match = re.search(r"SLURM run ID: (\S+)", output)
    assert match, f"no 'SLURM run ID' in the Snakemake output:\n{output[-3000:]}"
    return match.group(1)


def slurm_jobs(name: str | None = None) -> list[dict]:
    """Every job slurmctld still knows (MinJobAge=3600 s keeps finished ones), as key -> value dicts."""
    out = subprocess.run(["scontrol", "show", "job", "-o"], capture_output=True, text=True, check=True).stdout
    jobs = [dict(re.findall(r"(\S+?)=(\S*)", line)) for line in out.splitlines() if line.startswith("JobId=")]
    return sorted((j for j in jobs if name is None or j.get("JobName") == name), key=lambda j: int(j["JobId"]))


def rule_of(job: dict) -> str:
    """The rule of a job from the comment the plugin gives it: rule_<name>[_wildcards_<values>]."""
    comment = job.get("Comment", "")
    assert comment.startswith("rule_"), f"job {job['JobId']} has no rule comment: {comment!r}"
    return comment[len("rule_"):].split("_wildcards_")[0]


def minutes(time_limit: str) -> int:
    """SLURM's [D-]HH:MM:SS (or MM:SS) in minutes."""
    days, _, clock = time_limit.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    hours, mins, secs = parts
    return (int(days or 0) * 24 + hours) * 60 + mins + secs // 60


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def micro_config(tmp: Path, name: str, edit=None) -> Path:
    config = yaml.safe_load(MICRO.read_text())
    if edit is not None:
        edit(config)
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def copy_inputs(src: Path, dst: Path) -> None:
    """Data, backbone and preprocessing of a finished run, mtimes kept, so Snakemake does not rebuild them;
    never its runs, evaluations or checkpoints (copied outputs without metadata would count as done)."""
    shutil.copytree(src / "resources", dst / "resources", copy_function=shutil.copy2, symlinks=True)
    for part in (src / "results").iterdir():
        if part.is_dir() and part.name not in ("runs", "evals", "checkpoints"):
            shutil.copytree(part, dst / "results" / part.name, copy_function=shutil.copy2, symlinks=True)


def main_table_runs() -> tuple[set[str], set[str]]:
    """Run folders and evaluation files of the micro config's main table, from hnclip.plan."""
    from hnclip import plan
    from hnclip.workflow_config import load_config

    cells = plan.experiment_spec(load_config(MICRO), "main")["cells"]
    # the zero-shot row is evaluated but has no run folder
    return {c["run_dir"] for c in cells if c["run_dir"]}, {c["eval_path"] for c in cells}


# ------------------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def cluster():
    """A running single-node cluster; started (and stopped after the module) unless one already runs."""
    running = subprocess.run(["bash", str(SCRIPT), "status"], capture_output=True, text=True).returncode == 0
    # partitions named as the profile names them, its CPU partition the default; start is a no-op when a
    # cluster with this configuration already runs
    prof = profile()
    partitions = [prof["default-resources"]["slurm_partition"]]
    partitions += sorted({r["slurm_partition"] for r in prof["set-resources"].values() if "slurm_partition" in r}
                         - set(partitions))
    env = {**os.environ, "HNCLIP_SLURM_PARTITIONS": " ".join(partitions)}
    proc = subprocess.run(["bash", str(SCRIPT), "start"], capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        pytest.fail(f"slurm_cluster.sh start failed:\n{proc.stdout}\n{proc.stderr}")
    yield
    if not running:
        subprocess.run(["bash", str(SCRIPT), "stop"], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def slurm_run(cluster, tmp_path_factory):
    """The micro config through the SLURM profile, and a local run of the same config alongside it."""
    tmp = tmp_path_factory.mktemp("slurm")
    workdir, reference = tmp / "cluster", tmp / "local"
    reference_proc = start(snakemake_cmd(reference, MICRO, REFERENCE_TARGETS, cluster=False), tmp / "local.log")
    cluster_proc = start(snakemake_cmd(workdir, MICRO, MAIN_TARGETS, cluster=True), tmp / "cluster.log")
    try:
        output = finish(cluster_proc, tmp / "cluster.log")
        if cluster_proc.returncode != 0:
            pytest.fail("SLURM run failed:\n" + failure_report(workdir, output))
        reference_output = finish(reference_proc, tmp / "local.log")
        if reference_proc.returncode != 0:
            pytest.fail("local reference run failed:\n" + failure_report(reference, reference_output))
    finally:
        stop(cluster_proc)
        stop(reference_proc)
    return {"workdir": workdir, "reference": reference, "output": output, "jobs": slurm_jobs(run_id(output))}


# --------------------------------------------------------------------------------------------- tests
def test_profile_names_only_resources_the_slurm_plugin_maps():
    prof = profile()
    for scope, resources in [("default-resources", prof["default-resources"]),
                             *((f"set-resources.{r}", res) for r, res in prof["set-resources"].items())]:
        unknown = set(resources) - PLUGIN_RESOURCES
        assert not unknown, f"{PROFILE}/config.yaml {scope}: {sorted(unknown)} are not mapped to sbatch options"


def test_profile_gives_the_zero_shot_and_protocol_rules_the_resources_of_the_work_they_repeat():
    prof = profile()
    rules = "\n".join(p.read_text() for p in (REPO / "workflow/rules").glob("*.smk"))
    for rule, like in SAME_RESOURCES.items():
        assert re.search(rf"^(rule {rule}|use rule \w+ as {rule} with):$", rules, flags=re.M), \
            f"no rule {rule} in workflow/rules"
        assert rule in prof["set-resources"], f"{PROFILE}/config.yaml set-resources has no entry for {rule}"
        assert requested(rule) == requested(like), rule
    assert requested("evaluate_protocol")["gpu"] == 1 and requested("prepare_protocol_split").get("gpu", 0) == 0


@pytest.mark.slurm
def test_cluster_jobs_request_the_profiles_partition_gpus_and_runtime(slurm_run):
    jobs = slurm_run["jobs"]
    rules = {rule_of(j) for j in jobs}
    assert CORE_CLUSTER_RULES <= rules and not rules & LOCAL_RULES, f"rules sent to SLURM: {sorted(rules)}"
    # one SLURM job per job Snakemake ran remotely ("rule x:"), none for its local ones ("localrule x:")
    remote = re.findall(r"^rule (\w+):$", slurm_run["output"], flags=re.M)
    assert sorted(rule_of(j) for j in jobs) == sorted(remote)
    # prepare, subset, the backbone steps, the main runs (each evaluating its model), a transfer evaluation, the
    # backbone's evaluation, geometry
    assert len(jobs) >= 15
    for job in jobs:
        want = requested(rule_of(job))
        where = f"job {job['JobId']} ({job['Comment']})"
        assert job["Partition"] == want["slurm_partition"], where
        assert minutes(job["TimeLimit"]) == want["runtime"], where
        assert job["MinMemoryNode"] == f"{SMALL_MEM_MB}M", where
        assert int(job["NumCPUs"]) == SMALL_CPUS, where
        gpus = want.get("gpu", 0)
        assert job.get("TresPerJob", "") == (f"gres:gpu:{gpus}" if gpus else ""), where
    # the GPU rules of DESIGN section 5, named so a profile that loses them fails here
    gpu_rules = {rule_of(j) for j in jobs if j.get("TresPerJob", "").startswith("gres:gpu:")}
    assert GPU_RULES <= gpu_rules
    assert {j["Partition"] for j in jobs if rule_of(j) in gpu_rules} == {"gpu"}
    assert {j["Partition"] for j in jobs if rule_of(j) == "prepare"} == {"cpu"}
    assert all(j["JobState"] == "COMPLETED" for j in jobs), [(j["JobId"], j["JobState"]) for j in jobs]


@pytest.mark.slurm
def test_cluster_run_outputs_equal_the_local_run(slurm_run):
    cluster, local = slurm_run["workdir"], slurm_run["reference"]
    run_dirs, eval_paths = main_table_runs()
    evals = sorted(p.relative_to(local) for p in (local / "results/evals").rglob("*.json"))
    assert {str(p) for p in evals} == eval_paths
    for rel in evals:
        assert json.loads((cluster / rel).read_text())["metrics"] == json.loads((local / rel).read_text())["metrics"], rel
    weights = sorted(p.relative_to(local) for p in (local / "results").rglob("model.safetensors"))
    # the backbone's stages (init, short, stretched, long) and the installed copy, then one per run
    backbone = {f"results/{d}/model.safetensors" for d in ("pretrain/init", "pretrain/short/model",
                                                           "pretrain/stretched", "pretrain/long/model",
                                                           "backbone/model")}
    assert {str(p) for p in weights} == backbone | {f"{d}/model/model.safetensors" for d in run_dirs}
    for rel in weights:
        assert sha256(cluster / rel) == sha256(local / rel), rel
    geometry = "results/geometry/synthetic.json"
    assert json.loads((cluster / geometry).read_text()) == json.loads((local / geometry).read_text())
    assert (cluster / "results/tables/main.csv").read_text() == (local / "results/tables/main.csv").read_text()


@pytest.mark.slurm
def test_a_failing_cluster_job_is_reported_failed_and_retried_once(cluster, tmp_path):
    def wrong_count(config):  # synthetic_shift renders 16 test images; prepare must refuse any other count
        config["benchmarks"]["synthetic_shift"]["expected_counts"] = {"test": 17}

    configfile = micro_config(tmp_path, "wrong_count", wrong_count)
    workdir, log = tmp_path / "run", tmp_path / "run.log"
    proc = start(snakemake_cmd(workdir, configfile, ["results/data/synthetic_shift/test.csv"], cluster=True), log)
    output = finish(proc, log, timeout=600)
    assert proc.returncode != 0, output[-3000:]
    assert "Error in rule prepare" in output
    assert re.search(r"SLURM-job '\d+' failed, SLURM status is: 'FAILED'", output), output[-3000:]
    jobs = slurm_jobs(run_id(output))
    # the profile's retries: 1 resubmits once; both attempts fail for the same reason
    assert [rule_of(j) for j in jobs] == ["prepare", "prepare"]
    assert {j["JobState"] for j in jobs} == {"FAILED"}
    assert "17" in (workdir / "results/logs/prepare/synthetic_shift_test.log").read_text()
    assert not (workdir / "results/data/synthetic_shift/test.csv").exists()


@pytest.mark.slurm
def test_cancelled_training_job_resumes_from_its_checkpoint_with_identical_weights(slurm_run, tmp_path):
    def long_training(config):  # 20 epochs x 4 steps, a checkpoint every 2: time to cancel mid-run
        config["train"].update(epochs=20, checkpoint_every=2)

    configfile = micro_config(tmp_path, "long", long_training)
    preempted, reference = tmp_path / "preempted", tmp_path / "reference"
    copy_inputs(slurm_run["workdir"], preempted)
    copy_inputs(slurm_run["workdir"], reference)
    target = [f"{RUN}/summary.json"]
    reference_proc = start(snakemake_cmd(reference, configfile, target, cluster=False, cores=1),
                           tmp_path / "reference.log")
    known = {j["JobId"] for j in slurm_jobs()}
    proc = start(snakemake_cmd(preempted, configfile, target, cluster=True), tmp_path / "preempted.log")
    checkpoint = preempted / "results/checkpoints" / Path(RUN).relative_to("results/runs") / "last.pt"
    try:
        deadline, cancelled = time.monotonic() + 600, None
        while cancelled is None and time.monotonic() < deadline and proc.poll() is None:
            running = [j for j in slurm_jobs() if j["JobId"] not in known and j["JobState"] == "RUNNING"
                       and rule_of(j) == "train"]
            if running and checkpoint.is_file():
                cancelled = running[0]["JobId"]
                subprocess.run(["scancel", cancelled], check=True)
            time.sleep(0.2)
        assert cancelled, "the training job ended, or never wrote a checkpoint, before it could be cancelled"
        output = finish(proc, tmp_path / "preempted.log")
        assert proc.returncode == 0, failure_report(preempted, output)
        reference_output = finish(reference_proc, tmp_path / "reference.log")
        assert reference_proc.returncode == 0, failure_report(reference, reference_output)
    finally:
        stop(proc)
        stop(reference_proc)
    jobs = slurm_jobs(run_id(output))
    assert [(j["JobId"] == cancelled, j["JobState"]) for j in jobs] == [(True, "CANCELLED"), (False, "COMPLETED")]
    train_log = (preempted / "results/logs/train/synthetic/longclip/g0/f1/s0.log").read_text()
    assert re.search(r"resuming \S+last\.pt at step \d+/80", train_log), train_log[-2000:]
    summary = json.loads((preempted / RUN / "summary.json").read_text())
    assert summary["steps"] == 80
    rel = Path(RUN) / "model/model.safetensors"
    assert sha256(preempted / rel) == sha256(reference / rel)
