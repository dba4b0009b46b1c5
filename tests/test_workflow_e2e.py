"""The whole DAG end to end on the micro config, the way the README runs it: in a copy of the checkout
(tests/checkout.py), a plain `snakemake` at the copy's root (the default profile loads by itself), then
the README's test command's DAG tests in the same copy. CPU, a few minutes.

The run gives evaluation jobs one GPU each (`--config resources={evaluate: {gpu: 1}}`, a nested numeric
override), so the default profile's `gpu: 1` cap must run them one at a time.
"""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from checkout import copy_checkout, user_env

# the paper's R@1/5/10 and GOAL's R@25/50, recorded from one ranking
METRICS = {f"{d}_r{k}" for d in ("i2t", "t2i") for k in (1, 5, 10, 25, 50)}
RUN_ARGS = ("--configfile", "tests/e2e/micro.yaml", "--config", "resources={evaluate: {gpu: 1}}")
# the DAG tests that used to run Snakemake in the checkout, and so broke after the README's run command
DAG_TESTS = "embedded_default or paper_grid or multi_gpu or lint"
# The jobs that take resources.evaluate (one GPU each in this run), by hand for micro.yaml: evaluate 7,
# the transfers to synthetic_shift (every main method, longclip, finelip, goal, structxlip, lora, hnclip, and
# hnclip_frozen; the 14 in-domain evaluations, main 6,
# plugin 3 new, fractions 2 at 0.5, gamma 0, frozen G, seed 1, are their training jobs', which take
# resources.train); the zero-shot backbone on synthetic and synthetic_shift 2; geometry of both
# benchmarks 2; the gallery 1. Synthetic data has no protocol variants.
GPU_JOBS = {"evaluate": 7, "evaluate_zeroshot": 2, "geometry": 2, "gallery": 1}


@dataclass
class MicroRun:
    root: Path  # the checkout copy: the run's working directory
    output: str  # what Snakemake printed


def snakemake(root: Path, *args: str) -> subprocess.CompletedProcess:
    """`snakemake ...` at a repository root, as a user types it (no --snakefile, --directory or --cores).

    ``args`` (targets included) come before RUN_ARGS: after ``--config``, which takes any number of
    values, a target would be read as one more config entry."""
    return subprocess.run([sys.executable, "-m", "snakemake", *args, *RUN_ARGS], cwd=root, env=user_env(),
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def micro_run(tmp_path_factory):
    root = copy_checkout(tmp_path_factory.mktemp("micro") / "checkout")
    proc = snakemake(root)
    if proc.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in (root / "results/logs").rglob("*.log")
                         if p.stat().st_size)
        pytest.fail(f"snakemake failed:\n{proc.stderr[-4000:]}\n{logs[-8000:]}")
    return MicroRun(root, proc.stdout + proc.stderr)


def job_intervals(output: str) -> list[tuple[str, int, int]]:
    """(rule, start event, finish event) of each job, from the order of Snakemake's job lines."""
    starts, intervals, event = {}, [], 0
    rule = None
    for line in output.splitlines():
        if m := re.fullmatch(r"(?:local)?rule (\w+):", line):
            rule = m.group(1)
        elif (m := re.fullmatch(r"\s+jobid: (\d+)", line)) and rule is not None:
            starts[m.group(1)] = (rule, event)
            event += 1
            rule = None
        elif m := re.fullmatch(r"Finished jobid: (\d+) \(Rule: (\w+)\)", line):
            name, start = starts.pop(m.group(1))
            intervals.append((name, start, event))
            event += 1
    return intervals


@pytest.mark.e2e
def test_the_readme_run_command_loads_the_default_profile_whose_gpu_cap_holds(micro_run):
    assert "Using workflow specific profile profiles/default for setting default command line arguments." \
        in micro_run.output
    jobs = job_intervals(micro_run.output)
    assert {rule: sum(r == rule for r, _, _ in jobs) for rule in GPU_JOBS} == GPU_JOBS
    gpu_jobs = sorted((s, f) for rule, s, f in jobs if rule in GPU_JOBS)
    # one GPU: a GPU job (an evaluation of a run or of the backbone, a geometry, the gallery) starts only
    # after the previous one finished
    assert all(prev[1] < nxt[0] for prev, nxt in zip(gpu_jobs, gpu_jobs[1:], strict=False)), gpu_jobs
    # while other jobs did run side by side (cores: all of the profile): the cap, not a lack of cores
    assert any(a[1] < b[2] and b[1] < a[2] for i, a in enumerate(jobs) for b in jobs[i + 1:])


def snapshot(root: Path) -> dict[Path, tuple[int, int]]:
    """(mtime, size) of results/, .snakemake/ and everything in them."""
    paths = [root / "results", root / ".snakemake"]
    paths += [p for top in paths for p in top.rglob("*")]
    return {p: (p.stat().st_mtime_ns, p.stat().st_size) for p in paths}


@pytest.mark.e2e
def test_the_readme_test_command_passes_after_the_run_command_on_the_same_checkout(micro_run):
    before = snapshot(micro_run.root)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", DAG_TESTS,
                           "tests/test_workflow_dag.py"], cwd=micro_run.root, env=user_env(), capture_output=True,
                          text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-5000:]
    assert re.search(r"\b4 passed\b", proc.stdout), proc.stdout[-2000:]
    # the tests neither read the finished run as their own nor wrote into its results/ or .snakemake/
    after = snapshot(micro_run.root)
    assert after == before, sorted(str(p) for p in set(after) ^ set(before) | {p for p in before if after.get(p) != before[p]})


@pytest.mark.e2e
def test_micro_dag_produces_every_spec_table_figure_and_the_report(micro_run):
    results = micro_run.root / "results"
    for experiment in ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds"):
        spec = json.loads((results / "specs" / f"{experiment}.json").read_text())
        assert spec["experiment"] == experiment and spec["scale"] == "toy" and spec["cells"]
    for experiment in ("main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds",
                       "epochs", "cost", "convergence", "protocols"):
        assert (results / "tables" / f"{experiment}.csv").stat().st_size > 0, experiment
    for figure in ("dynamics", "fractions", "gamma_sweep", "epochs", "gallery", "convergence"):
        assert (results / "figures" / f"{figure}.png").stat().st_size > 1000, figure
    html = (results / "report.html").read_text()
    assert "toy" in html.lower()
    evals = list((results / "evals").rglob("*.json"))
    # 14 in-domain + 7 transfer (the 6 main methods and frozen G) + the backbone on 2 benchmarks
    assert len(evals) == 23
    assert {p.name for p in (results / "evals/zeroshot").iterdir()} == {"synthetic.json", "synthetic_shift.json"}
    for path in evals:
        record = json.loads(path.read_text())
        assert set(record["metrics"]) == METRICS
        assert all(0.0 <= v <= 100.0 for v in record["metrics"].values())


@pytest.mark.e2e
def test_micro_tables_open_with_the_zero_shot_row_and_show_every_benchmark_under_each_protocol(micro_run):
    from hnclip.plan import ZEROSHOT_ROW

    tables = micro_run.root / "results/tables"
    main = pd.read_csv(tables / "main.csv")
    assert main["method"].iloc[0] == ZEROSHOT_ROW
    transfer = pd.read_csv(tables / "transfer.csv")
    assert transfer["method"].iloc[0] == ZEROSHOT_ROW and "HN-CLIP (frozen G)" in set(transfer["method"])
    protocols = pd.read_csv(tables / "protocols.csv")
    # every benchmark the config evaluates, with GOAL's R@25/R@50 beside the paper's R@1/5/10
    assert set(protocols["benchmark"]) == {"synthetic", "synthetic_shift"}
    assert {"R@1", "R@5", "R@10", "R@25", "R@50", "images"} <= set(protocols["metric"])
    shift = protocols[(protocols["benchmark"] == "synthetic_shift") & (protocols["metric"] == "images")]
    assert set(shift["method"]) >= {ZEROSHOT_ROW, "HN-CLIP"} and set(shift["mean"]) == {16}
    convergence = pd.read_csv(tables / "convergence.csv")
    assert {"R@1", "error", "InfoNCE"} == set(convergence["metric"])


@pytest.mark.e2e
def test_micro_report_shows_each_claim_with_the_papers_sentence_criterion_numbers_and_verdict(micro_run):
    from html import unescape

    from hnclip.analysis.claims import CLAIMS, VERDICTS

    html = (micro_run.root / "results/report.html").read_text()
    items = re.findall(r'<li class="claim \w+" id="claim-([^"]+)" data-verdict="([^"]+)">(.*?)</li>', html, re.S)
    assert [i[0] for i in items] == list(CLAIMS)
    for key, verdict, body in items:
        text = unescape(re.sub(r"<[^>]+>", "", body))
        assert verdict in VERDICTS, key
        assert CLAIMS[key][1] in text and f"({CLAIMS[key][0]})" in text, key  # the sentence and its section
        assert "criterion:" in text, key
        assert ("our numbers:" in text) if verdict != "no data" else ("no data:" in text), key
    verdicts = dict((k, v) for k, v, _ in items)
    # the micro grid has the runs these need (the premise ones: plain InfoNCE, HN-only and HN-CLIP runs at full
    # data, read by the premise rule from their dynamics logs); the paper's DCI -> DOCCI is absent
    for key in ("a1_columns", "a1_first_epoch", "e3_directions", "a2_frameworks", "a3_transfer", "a3_every_fraction",
                "a4_hn_bulk", "b2_frozen", "seeds_average", "premise_saturation", "premise_exact_zero",
                "premise_active", "premise_error"):
        assert verdicts[key] != "no data", key
    assert verdicts["a3_dci_to_docci"] == "no data"
    # the regime section: every figure of the premise module beside the paper's, with its definition
    from hnclip.analysis.premise import PREMISE_KEYS

    regime = re.findall(r'<tr id="premise-([^"]+)">', html)
    assert regime == [k.replace(".", "-") for k in PREMISE_KEYS]
    # and the seven conditions of the paper's regime on the one benchmark with plain runs, each measured
    # where the micro grid can (its plain run logs the per-micro-batch InfoNCE)
    from hnclip.analysis.regime import CONDITION_KEYS, load_regime

    conditions = re.findall(r'<tr id="regime-synthetic-([a-z_]+)"', html)
    assert conditions == list(CONDITION_KEYS)
    report = load_regime(micro_run.root / "results/regime/synthetic.json")
    saturation = next(c for c in report["conditions"] if c["key"] == "saturation")
    assert saturation["unmeasured_steps"] == 0 and report["plain_runs"] == ["results/runs/synthetic/longclip/g0/f1/s0"]
    rows = re.findall(r'<tr class="comparison" data-key="([^"]+)">(.*?)</tr>', html, re.S)
    ours = {k: re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", body, re.S)[2]).strip() for k, body in rows}
    assert ours["a1.columns"].endswith("toy") and ours["train.gamma"] == "0.5 toy"
    assert ours["a1.first_epoch_docci"].endswith("toy")  # the synthetic benchmark standing in for DOCCI


@pytest.mark.e2e
def test_every_table_line_reaches_its_runs_and_their_config_hashes_in_one_hop(micro_run):
    from hnclip.analysis.table_format import RUN_COLUMNS
    from hnclip.plan import ZEROSHOT_ROW

    results = micro_run.root / "results"
    for table in ("main", "transfer", "seeds", "plugin", "epochs", "cost", "convergence", "protocols"):
        tidy = pd.read_csv(results / "tables" / f"{table}.csv", keep_default_na=False, dtype=str)
        assert len(tidy), table
        for _, line in tidy.iterrows():
            if line.get("method") == ZEROSHOT_ROW:  # the backbone before fine-tuning: no run behind it
                assert all(line[c] == "" for c in RUN_COLUMNS), (table, dict(line))
                continue
            runs = line["runs"].split(";")
            hashes = line["run_config_hash"].split(";")
            assert len(runs) == len(hashes) >= 1, (table, dict(line))
            for run, config_hash in zip(runs, hashes, strict=True):
                summary = json.loads((results / "runs" / run / "summary.json").read_text())
                assert summary["config_hash"] == config_hash, (table, run)
            train_set, method, gamma, fraction, seed = zip(*(re.fullmatch(r"(.+)/(.+)/g(.+)/f(.+)/s(.+)", r).groups()
                                                             for r in runs), strict=True)
            assert line["run_method"].split(";") == list(dict.fromkeys(method)), (table, dict(line))
            assert line["run_seeds"].split(";") == list(dict.fromkeys(seed)), (table, dict(line))
            assert line["run_train_set"] == ";".join(dict.fromkeys(train_set))
            assert line["run_gamma"] == ";".join(dict.fromkeys(gamma))
            assert line["run_fraction"] == ";".join(dict.fromkeys(fraction))
    # a main-table cell of HN-CLIP is the micro config's hnclip run at gamma 0.5, seed 0
    main = pd.read_csv(results / "tables/main.csv", keep_default_na=False, dtype=str)
    hn = main[(main["method"] == "HN-CLIP") & (main["metric"] == "R@1") & (main["direction"] == "I->T")]
    assert list(hn["runs"]) == ["synthetic/hnclip/g0.5/f1/s0"]
    assert (main["method"] == ZEROSHOT_ROW).any()  # the zero-shot lines checked above are there


@pytest.mark.e2e
def test_micro_runs_log_gradient_dynamics_and_stretched_backbone(micro_run):
    runs = list((micro_run.root / "results/runs").rglob("summary.json"))
    assert len(runs) == 14
    dynamics = pd.read_csv(runs[0].parent / "dynamics.csv")
    assert len(dynamics) >= 1 and dynamics["infonce"].notna().all()
    spec = json.loads((micro_run.root / "results/backbone/model/model.json").read_text())["spec"]
    assert spec["context_length"] == 248 and spec["frozen_positions"] == 20


@pytest.mark.e2e
def test_every_run_records_the_cpu_kernels_the_config_pinned(micro_run):
    # config cpu_kernels -> the rules' shell prefix -> python -m hnclip applies it before torch loads
    from hnclip.cpu_kernels import cpu_has_avx2

    summaries = [json.loads(p.read_text()) for p in (micro_run.root / "results/runs").rglob("summary.json")]
    backbone = json.loads((micro_run.root / "results/pretrain/long/summary.json").read_text())
    for summary in [*summaries, backbone]:
        kernels = summary["cpu_kernels"]
        assert kernels["setting"] == "avx2" and kernels["onednn"] is True  # only `portable` switches it off
        if cpu_has_avx2():
            assert kernels["capability"] == "AVX2" and kernels["MKL_CBWR"] == "AVX2"


@pytest.mark.e2e
def test_micro_report_shows_every_table_and_figure_in_headless_chromium(micro_run, tmp_path):
    from test_report import CHROMIUM, _chromium

    assert CHROMIUM, "needs Debian's chromium: `bash workflow/scripts/setup.sh --dev` installs it"
    report = micro_run.root / "results" / "report.html"
    proc, console = _chromium(tmp_path, "dom", "--window-size=1200,900", "--dump-dom", report.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console == [], console
    tables = set(re.findall(r'<table[^>]* id="table-([^"]+)"', proc.stdout))
    assert {"main", "plugin", "transfer", "fractions", "gamma_sweep", "ablation", "seeds", "epochs", "cost",
            "convergence", "protocols", "geometry-summary", "paper-vs-ours", "provenance"} <= tables
    figures = set(re.findall(r'<figure id="figure-([^"]+)"', proc.stdout))
    assert {"dynamics", "fractions", "gamma_sweep", "epochs", "gallery", "convergence", "geometry_synthetic",
            "geometry_synthetic_shift"} <= figures
    shot = tmp_path / "micro-report.png"
    proc, _ = _chromium(tmp_path, "shot", "--window-size=1200,3000", f"--screenshot={shot}", report.as_uri())
    assert proc.returncode == 0 and shot.stat().st_size > 10_000


@pytest.mark.e2e
def test_snakemake_native_report_of_the_micro_run(micro_run, tmp_path):
    proc = snakemake(micro_run.root, "--report", str(tmp_path / "report.zip"))
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    with zipfile.ZipFile(tmp_path / "report.zip") as archive:
        names = archive.namelist()
    assert any(n.endswith("main.html") for n in names) and any(n.endswith("gallery.png") for n in names)


@pytest.mark.e2e
def test_finished_runs_are_not_retrained_when_a_table_rule_reruns(micro_run):
    again = snakemake(micro_run.root, "-n")
    assert "Nothing to be done" in again.stdout + again.stderr
    proc = snakemake(micro_run.root, "-n", "--forcerun", "table", "report")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-2000:]
    assert "table" in out and "\ntrain " not in out and "rule train:" not in out


@pytest.mark.e2e
def test_each_run_records_its_methods_recipe_and_what_hn_meant(micro_run):
    runs = micro_run.root / "results/runs/synthetic"
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
    root = tmp_path / "checkout"
    shutil.copytree(micro_run.root, root, symlinks=True)  # copy2 keeps mtimes: the copy is up to date
    micro = root / "tests/e2e/micro.yaml"
    config = micro.read_text()
    micro.write_text(config.replace("{lr: 0.0002, weight_decay: 0.01, label_smoothing: 0.1}",
                                      "{lr: 0.0003, weight_decay: 0.01, label_smoothing: 0.1}"))
    target = "results/runs/synthetic/longclip/g0/f1/s0/summary.json"
    before = json.loads((root / target).read_text())
    proc = snakemake(root, target)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    after = json.loads((root / target).read_text())
    assert after["recipe"]["lr"] == 0.0003 and after["config_hash"] != before["config_hash"]
    assert after["steps"] == before["steps"] and after["checkpoint_sha256"] != before["checkpoint_sha256"]


@pytest.mark.e2e
def test_a_deleted_evaluation_or_run_summary_is_rebuilt(micro_run, tmp_path):
    root = tmp_path / "checkout"
    shutil.copytree(micro_run.root, root, symlinks=True)  # copy2 keeps mtimes: the copy is up to date
    evaluation = "results/evals/synthetic/longclip/g0/f1/s0/synthetic_shift.json"
    summary = "results/runs/synthetic/lora/g0/f1/s0/summary.json"
    (root / evaluation).unlink()
    (root / summary).unlink()
    proc = snakemake(root, "-n")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"output: {evaluation}" in out
    assert re.search(rf"rule train:\n(\s+\S.*\n)*?\s+output: {re.escape(summary)}", out), out[-3000:]


@pytest.mark.e2e
def test_the_backbone_release_target_rebuilds_the_backbone_and_sets_its_figures_beside(micro_run):
    # the micro run pretrained its backbone in the DAG (backbone.source pretrain) and installed it byte for byte
    pretrained = micro_run.root / "results/pretrain/long/model/model.safetensors"
    installed = micro_run.root / "results/backbone/model/model.safetensors"
    assert pretrained.read_bytes() == installed.read_bytes()
    # the release target packages that same model with its figures and card: only two new jobs
    proc = snakemake(micro_run.root, "backbone_release")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert re.search(r"backbone_figures\s+1", out) and re.search(r"backbone_release\s+1", out)
    assert "rule train:" not in out and "rule pretrain_long_backbone:" not in out
    release = micro_run.root / "results/release/micro-release"
    record = json.loads((release / "release.json").read_text())
    assert record["weights_sha256"] == hashlib.sha256(pretrained.read_bytes()).hexdigest()
    assert set(record["figures"]["zeroshot"]) == {"synthetic/test", "synthetic_shift/test"}
    assert record["figures"]["train"]["micro_batch"] == 8  # the fine-tuning micro-batch of micro.yaml
    assert record["recipe"]["pretrain"]["pool"]["shares"] == {"synthetic": 0.5, "synthetic_shift": 0.5}
    assert record["built"]["stages"]["long"]["steps"] >= 1 and record["built"]["minutes"]["total"] > 0
    assert "Toy scale" in (release / "README.md").read_text()
    assert "backbone release micro-release" in proc.stdout and record["weights_sha256"][:20] in proc.stdout
