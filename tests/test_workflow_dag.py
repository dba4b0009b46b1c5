"""The DAG's shape: job counts per rule from the config expansion, config errors, omitted experiments,
layered config files, spec files, lint. Every Snakemake call runs in a temporary folder (``--directory``),
never in the checkout, whose results/ and .snakemake/ may hold a finished run."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from dry_runs import planned

from hnclip import experiments

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile")]
PAPER = REPO / "config/paper.yaml"
MICRO = REPO / "tests/e2e/micro.yaml"
EMBEDDED = REPO / "config/config.yaml"


def snakemake(workdir: Path, *args) -> subprocess.CompletedProcess:
    return subprocess.run([*SNAKEMAKE, "--directory", str(workdir), *args], capture_output=True, text=True)


def dry_run(workdir: Path, *args) -> subprocess.CompletedProcess:
    return snakemake(workdir, "-n", "--cores", "2", "--quiet", "rules", *args)


def job_counts(output: str) -> dict[str, int]:
    counts = {}
    for line in output.splitlines():
        m = re.match(r"^([a-z_]+)\s+(\d+)$", line.strip())
        if m:
            counts[m.group(1)] = int(m.group(2))
    return counts


def write_config(path: Path, config: dict) -> Path:
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_paper_grid_job_counts_match_the_hand_derived_expansion(tmp_path):
    # Hand derivation for config/paper.yaml (train sets: docci, dci, vg; Long-DCI trains on DOCCI,
    # Urban-1K on VG):
    #   main 7 methods x 3 train sets = 21; plugin adds 6 +HN methods x 3 = 18 (39); transfer's longclip,
    #   lora, dora, hnclip are main runs and its hnclip_frozen the ablation's (0); fractions 3 methods
    #   (longclip, goal, hnclip) x 3 fractions < 1 x 3 = 27 (66); gamma sweep 4 new gammas x 3 = 12 (78);
    #   ablation adds the frozen-G variant x 3 = 3 (81); seeds 4 methods x seed 1 x 3 = 12 (93).
    # Evaluations: main 28; plugin +24 (52); transfer DCI->DOCCI and DOCCI->DCI 8 methods each (the 7 main
    #   methods and hnclip_frozen: 68; its DOCCI->Long-DCI and VG->Urban-1K are main's and the
    #   ablation's); fractions 3 x 3 x 4 = 36 (104); gamma 4 x 4 = 16 (120); frozen-G in-domain 4 (124, its
    #   two transfers counted above); seeds 4 x 4 = 16 (140). The zero-shot backbone on the 4 test
    #   benchmarks: 4 more (evaluate_zeroshot).
    # Protocol variants (DOCCI test_goal, DCI test_all, Long-DCI test_keep_empty): 3 splits prepared, each
    #   scored for the 7 main methods (21) and the backbone (3).
    # Retention: the 21 main runs (7 methods x DOCCI, DCI, VG) on COCO 5k and Flickr30k 1k: 42 more
    #   evaluations (182), no new run; the backbone on both: 2 more zero-shot evaluations (6).
    # Specs: one file per experiment (8), written by the spec rule and read by its table and figures, and
    #   the protocol table's (spec_protocols, 1).
    proc = planned(PAPER)
    elapsed = proc.elapsed
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    # DOCCI and DCI hold test splits, so their 62 runs are evaluated there by their training jobs (rule
    # train: 62 of the 182 evaluations, every such run has one); VG's 31 train in train_without_test
    assert counts["train"] == 62 and counts["train_without_test"] == 31
    assert counts["evaluate"] == 182 - 62
    assert counts["evaluate_zeroshot"] == 6
    assert counts["prepare_protocol_split"] == 3
    assert counts["evaluate_protocol"] == 21 and counts["evaluate_protocol_zeroshot"] == 3
    assert counts["table_protocols"] == 1 and counts["table_convergence"] == 1
    assert counts["segments"] == 3 and counts["edges"] == 3  # GOAL/StructXLIP products per train set
    assert counts["fetch_benchmark"] == 7  # docci, dci, long_dci, urban1k, vg, coco, flickr30k
    assert counts["prepare"] == 9  # train: docci, dci, vg; test: docci, dci, long_dci, urban1k, coco, flickr30k
    assert counts["subset"] == 9  # 3 fractions < 1 x 3 train sets, seed 0
    assert counts["table"] == 8 and counts["spec"] == 8  # one per experiment
    assert counts["spec_protocols"] == 1
    assert counts["convert_backbone"] == 1 and "pretrain_backbone" not in counts
    assert counts["report"] == 1 and counts["claims"] == 1
    # the regime conditions of every test benchmark with plain Long-CLIP FT runs (trained on it or its train set)
    assert counts["regime"] == 4
    assert elapsed < 30, f"paper DAG dry run took {elapsed:.1f} s"


def test_the_rehearsals_ci_form_keeps_every_rule_of_the_paper_dag(tmp_path):
    # CI's rehearsal (config/rehearsal-ci.yaml, tests/test_rehearsal_e2e.py) checks after 11 minutes that
    # every rule of the paper DAG ran; this dry run checks the layered configs' DAG holds them, in seconds.
    # Each rule is named by hand where a config choice decides whether it is in the DAG: a train set
    # without a test split (train_without_test), the protocol variants, retention's zero-shot rows.
    ci = [REPO / "config/rehearsal.yaml", REPO / "config/rehearsal-ci.yaml"]
    paper = planned(PAPER)
    reduced = planned(PAPER, *ci)
    assert paper.returncode == 0 and reduced.returncode == 0, (paper.stderr + reduced.stderr)[-3000:]
    paper_rules = set(job_counts(paper.stdout + paper.stderr))
    ci_counts = job_counts(reduced.stdout + reduced.stderr)
    assert {"train", "train_without_test", "evaluate", "evaluate_protocol", "prepare_protocol_split",
            "segments", "edges", "convert_backbone", "report"} <= paper_rules
    assert set(ci_counts) == paper_rules
    assert ci_counts["train"] == 10 and ci_counts["train_without_test"] == 1  # VG paragraphs -> Urban-1K


def test_embedded_default_expands_every_experiment():
    proc = planned()
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    # main 7 + plugin 6 + fractions 3 x 3 + gamma 4 + frozen 1 + seeds 3 x 2 (Long-CLIP FT, the strongest
    # competitor FineLIP and HN-CLIP at seeds 1 and 2) = 33 runs
    assert counts["train"] == 33 and "train_without_test" not in counts
    # 48 evaluations: the 33 in-domain ones are their training jobs' (the synthetic benchmark holds its
    # test split); the evaluate jobs are the transfer of the 7 main methods and hnclip_frozen to
    # synthetic_shift and the retention table's 7 main models on the short captions of the synthetic test
    # scenes (no new runs)
    assert counts["evaluate"] == 48 - 33
    # the backbone before fine-tuning on the three test benchmarks; no protocol variants of synthetic data
    assert counts["evaluate_zeroshot"] == 3 and "evaluate_protocol" not in counts
    # synthetic_short reads the synthetic benchmark's files (files_from): fetched as a copy of its source
    # record, its test split prepared with the short captions
    assert counts["fetch_benchmark"] == 3 and counts["prepare"] == 4
    # the released backbone, installed once (checked against its pinned sha256): no pool, no pretraining
    assert counts["install_backbone"] == 1
    assert not {"pretrain_pool", "init_backbone", "pretrain_backbone", "stretch_backbone",
                "pretrain_long_backbone", "backbone_figures", "backbone_release"} & set(counts)
    # a spec and a table per experiment (the embedded default runs every registered one: tests/test_experiments.py),
    # and a figure from the table of each that declares one (fractions and gamma_sweep)
    assert counts["table"] == counts["spec"] == len(experiments.EXPERIMENTS)
    assert counts["figure_from_evaluations"] == len(experiments.figured_experiments()) == 2
    # the protocol table still runs (the paper's split of both synthetic benchmarks), with its spec
    assert counts["table_protocols"] == 1 and counts["spec_protocols"] == 1
    # the regime conditions of the one benchmark with plain runs (synthetic_shift has no train set)
    assert counts["regime"] == 1
    # the claims judged once, into results/claims.json, then the report renders them
    assert counts["claims"] == 1 and counts["report"] == 1
    # and summarised in results/summary.md / summary.json
    assert counts["summary"] == 1


def test_a_plain_snakemake_call_at_the_repository_root_loads_the_default_profile(tmp_path):
    from checkout import copy_checkout, user_env

    root = copy_checkout(tmp_path / "checkout")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n"], cwd=root, env=user_env(), capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Using workflow specific profile profiles/default for setting default command line arguments." in proc.stderr
    profile = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    assert profile["resources"] == {"gpu": 1} and profile["scheduler"] == "greedy"
    assert profile["keep-going"] is True and profile["rerun-incomplete"] is True


def test_the_slurm_profile_replaces_the_default_one_when_given_as_workflow_profile(tmp_path):
    proc = dry_run(tmp_path, "--workflow-profile", str(REPO / "profiles/slurm"), "--configfile", str(MICRO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Using workflow specific profile {REPO / 'profiles/slurm'} " in proc.stderr
    assert "profiles/default" not in proc.stderr


BASE = """
scale: toy
benchmarks: {synthetic: {adapter: synthetic, root: r, train_set: synthetic}}
methods: {longclip: {framework: longclip}, hnclip: {framework: longclip, hn: true}}
"""


@pytest.mark.parametrize(
    "extra, expected",
    [
        ("gamma: abc", "config key gamma: 'abc' is not of type number"),
        ("trian: {epochs: 1}", "config key trian: unknown key; did you mean 'train'?"),
        ("train: {epcohs: 1}", "config key train.epcohs: unknown key; did you mean 'epochs'?"),
        ("experiments: {main: {benchmarks: [synthetic], methods: [hnclp]}}",
         "config key experiments.main.methods[0]: unknown method 'hnclp'; did you mean 'hnclip'?"),
        ("experiments: {main: {benchmarks: [docci], methods: [hnclip]}}",
         "config key experiments.main.benchmarks[0]: unknown benchmark 'docci'"),
        ("experiments: {fractions: {benchmarks: [synthetic], methods: [hnclip], fractions: [1.5]}}",
         "config key experiments.fractions.fractions[0]: 1.5 is out of range (must be <= 1)"),
        ("experiments: {gamma_sweep: {benchmarks: [synthetic], method: longclip, gammas: [0]}}",
         "config key experiments.gamma_sweep.method: must be a method with hn: true"),
        ("methods: {x: {framework: finelip_typo}}",
         "config key methods.x.framework: 'finelip_typo' is not allowed; did you mean 'finelip'?"),
        ("methods: {g: {framework: goal}}\nexperiments: {main: {benchmarks: [synthetic], methods: [g]}}",
         "config key preprocess.sam_model"),
        # an empty list or a missing key is refused before any job runs, naming the key
        ("experiments: {main: {benchmarks: [synthetic], methods: []}}",
         "config key experiments.main.methods: must not be empty"),
        ("experiments: {gamma_sweep: {benchmarks: [synthetic], method: hnclip, gammas: []}}",
         "config key experiments.gamma_sweep.gammas: must not be empty"),
        ("experiments: {fractions: {benchmarks: [synthetic], methods: [hnclip]}}",
         "config key experiments.fractions.fractions: required, but missing"),
        ("resources: {train: {threads: many}}",
         "config key resources.train.threads: 'many' is not valid"),
    ],
)
def test_bad_config_fails_before_any_job_with_the_key_the_message_and_nothing_else(tmp_path, extra, expected):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(BASE + extra + "\n")
    proc = dry_run(tmp_path, "--configfile", str(cfg))
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert expected in output, output[-2000:]
    # no schema dump: the error is the one line above inside Snakemake's few lines of framing
    assert len(output.splitlines()) < 8 and "description" not in output and "$schema" not in output, output


# main, fractions and gamma_sweep have rules of their own besides the table; the other experiments only
# the spec and table rules every experiment has, so omitting them is the same case as these
@pytest.mark.parametrize("omitted", ["main", "fractions", "gamma_sweep", "all"])
def test_any_experiment_can_be_omitted(tmp_path, omitted):
    config = yaml.safe_load(EMBEDDED.read_text())
    # retention scores main's models: omitting main omits it too (kept alone, the config is refused below)
    gone = {omitted, "retention"} if omitted == "main" else {omitted}
    config["experiments"] = {} if omitted == "all" else {k: v for k, v in config["experiments"].items() if k not in gone}
    proc = dry_run(tmp_path, "--configfile", str(write_config(tmp_path / "config.yaml", config)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = job_counts(proc.stdout + proc.stderr)
    left = len(config["experiments"])
    assert counts.get("table", 0) == left and counts.get("spec", 0) == left and counts["report"] == 1
    assert ("gallery" in counts) == ("main" in config["experiments"])
    assert ("figure_dynamics" in counts) == ("fractions" in config["experiments"])
    assert ("table_cost" in counts) == (omitted != "all")


def test_retention_without_main_is_refused_naming_the_key(tmp_path):
    config = yaml.safe_load(EMBEDDED.read_text())
    del config["experiments"]["main"]
    proc = dry_run(tmp_path, "--configfile", str(write_config(tmp_path / "config.yaml", config)))
    assert proc.returncode != 0
    assert "config key experiments.retention: scores the main table's models" in proc.stdout + proc.stderr


def test_nested_numeric_config_overrides_reach_the_jobs_as_numbers(tmp_path):
    proc = snakemake(tmp_path, "-n", "-p", "--cores", "1", "--config", "train={epochs: 5, lr: 7e-5}",
                     "experiments={gamma_sweep: {gammas: [0.3]}}", "resources={train: {gpu: 1}}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    train = [line for line in proc.stdout.splitlines() if "python -m hnclip train" in line and "/runs/" in line]
    assert train and all("--set epochs=5 " in c for c in train)
    # the shared lr reaches every method that does not carry its own (each recipe's own lr stays)
    default = yaml.safe_load((REPO / "config/config.yaml").read_text())
    own_lr = {m: (spec.get("train") or {}).get("lr") for m, spec in default["methods"].items()}
    own_lr = {m: lr for m, lr in own_lr.items() if lr is not None}
    assert own_lr and 7e-5 not in own_lr.values()  # no recipe's own rate

    def method_of(command):
        return re.search(r"/runs/\w+/(\w+)/g", command).group(1)

    shared = [c for c in train if method_of(c) not in own_lr]
    assert shared and all("--set lr=7e-05 " in c for c in shared)
    assert all(f"--set lr={own_lr[method_of(c)]} " in c for c in train if c not in shared)
    # the embedded default's other train keys are kept (a nested override merges)
    assert all(f"--set micro_batch={default['train']['micro_batch']} " in c for c in train)
    assert any("results/runs/synthetic/hnclip/g0.3/f1/s0" in c for c in train)
    # a number, not the text '1': the default profile's gpu cap (an int) accepts it
    assert all("gpu=1" in block for block in proc.stdout.split("\nrule train:")[1:])


def test_several_configfiles_layer_in_order(tmp_path):
    overlay = write_config(tmp_path / "overlay.yaml", {
        "train": {"epochs": 2},  # merged into micro's train mapping
        "experiments": {"gamma_sweep": {"gammas": [0, 0.25, 0.5]}},  # a list replaces micro's [0, 0.5]
    })
    proc = snakemake(tmp_path, "-n", "-p", "--cores", "1", "--configfile", str(MICRO), str(overlay))
    assert proc.returncode == 0, proc.stderr[-3000:]
    train = [line for line in proc.stdout.splitlines() if "python -m hnclip train" in line and "/runs/" in line]
    # micro's 14 runs + gamma 0.25; micro's own keys survive under the overlay's
    assert len(train) == 15
    assert all("--set epochs=2 " in c and "--set micro_batch=8 " in c for c in train)
    assert any("/hnclip/g0.25/" in c for c in train)


@pytest.mark.slow  # three Snakemake runs of the spec job
def test_spec_files_follow_the_effective_config_and_are_rewritten_when_it_changes(tmp_path):
    spec = tmp_path / "results/specs/main.json"
    relabel = "methods={hnclip: {label: HN-CLIP (ours)}}"
    first = snakemake(tmp_path, "--cores", "1", "results/specs/main.json", "--config", relabel)
    assert first.returncode == 0, first.stderr[-3000:]
    rows = {c["row"] for c in json.loads(spec.read_text())["cells"]}
    assert "HN-CLIP (ours)" in rows and "HN-CLIP" not in rows
    again = snakemake(tmp_path, "-n", "--cores", "1", "results/specs/main.json", "--config", relabel)
    assert "Nothing to be done" in again.stdout + again.stderr
    second = snakemake(tmp_path, "--cores", "1", "results/specs/main.json")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "params" in (second.stdout + second.stderr).lower()  # Snakemake's reason: the params changed
    rows = {c["row"] for c in json.loads(spec.read_text())["cells"]}
    assert "HN-CLIP" in rows and "HN-CLIP (ours)" not in rows
    assert json.loads(spec.read_text())["settings"]["methods"] == yaml.safe_load(EMBEDDED.read_text())[
        "experiments"]["main"]["methods"]


def test_no_job_carries_a_spec_or_config_as_json_on_its_command_line():
    proc = planned(PAPER)
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = [line for line in proc.stdout.splitlines() if "python -m hnclip" in line]
    assert any("--specs results/specs/main.json" in c for c in commands)
    assert all('"cells"' not in c and len(c) < 20_000 for c in commands), max(map(len, commands))


def test_rule_all_asks_for_every_evaluation_and_run_summary(tmp_path):
    from hnclip import plan
    from hnclip.workflow_config import load_config

    config = load_config(MICRO)
    proc = snakemake(tmp_path, "-n", "--cores", "1", "--configfile", str(MICRO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # the inputs of rule all, as Snakemake lists them for the job
    all_inputs = re.search(r"^rule all:\n\s+input: ([^\n]+)", proc.stdout, flags=re.M).group(1).split(", ")
    evals = {e.path for e in plan.all_evaluations(config)}
    summaries = {f"results/runs/{r.path}/summary.json" for r in plan.all_runs(config)}
    # the zero-shot backbone's rows: main's synthetic and transfer's synthetic_shift (synthetic data has no
    # protocol variants, so the protocol table adds no evaluation of its own here)
    zeroshot = {"results/evals/zeroshot/synthetic.json", "results/evals/zeroshot/synthetic_shift.json"}
    assert evals and summaries and evals | zeroshot | summaries | {"results/report.html", "results/summary.md"} == set(all_inputs)


def test_lint_and_format_are_clean(tmp_path):
    lint = snakemake(tmp_path, "--lint", "--cores", "1")
    assert lint.returncode == 0 and "good condition" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    fmt = subprocess.run([sys.executable, "-m", "snakefmt", "--check", "."], cwd=REPO, capture_output=True,
                         text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_multi_gpu_training_jobs_launch_one_process_per_gpu_with_torchrun(tmp_path):
    proc = snakemake(tmp_path, "-n", "-p", "--cores", "1", "--config", 'resources={"train": {"gpu": 2}}')
    assert proc.returncode == 0, proc.stderr[-2000:]
    train_commands = [line for line in proc.stdout.splitlines() if " train --init" in line and "--subset" in line]
    assert train_commands and all("torchrun --standalone --nproc-per-node 2 -m hnclip train" in c
                                  for c in train_commands)
    single = planned()
    # fine-tuning runs start one process (the backbone's long-caption stage is data-parallel on the CPU)
    runs = [line for line in single.stdout.splitlines() if " train --init" in line and "/runs/" in line]
    assert runs and all("python -m hnclip train" in c and "torchrun" not in c for c in runs)


def test_gpu_declared_jobs_take_the_configured_threads_and_threads_are_no_resource(tmp_path):
    rehearsal = REPO / "config/rehearsal.yaml"
    for configs, cores, expected in (([PAPER], "3", 1), ([PAPER, rehearsal], "3", 3)):
        proc = snakemake(tmp_path, "-n", "-p", "--cores", cores, "--configfile", *map(str, configs))
        assert proc.returncode == 0, proc.stderr[-3000:]
        blocks = {b.split(":", 1)[0]: b for b in proc.stdout.split("\nrule ")[1:]}
        for rule in ("train", "evaluate", "evaluate_protocol", "segments", "geometry", "gallery"):
            block = blocks[rule]
            declared = re.search(r"^\s+threads: (\d+)$", block, re.MULTILINE)  # Snakemake omits 1
            assert (int(declared.group(1)) if declared else 1) == expected, (configs, rule, block[:500])
            resources = re.search(r"^\s+resources: (.*)$", block, re.MULTILINE).group(1)
            assert "gpu=1" in resources and "threads" not in resources, resources
        threads = re.findall(r"hnclip (?:train|evaluate|segments) .*?--threads (\d+)", proc.stdout)
        assert len(threads) > 20 and set(threads) == {str(expected)}


def test_exports_target_exports_the_main_models_in_the_configured_formats_and_is_not_in_all(tmp_path):
    # paper: the 7 main methods on the 3 train sets behind its 4 benchmarks = 21 runs, x 3 formats
    proc = planned(PAPER, targets=("exports",))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert job_counts(proc.stdout + proc.stderr)["export"] == 63
    # the embedded default: 7 main runs, open_clip and transformers (its toy backbone is no Long-CLIP shape)
    proc = planned(targets=("exports",))
    assert proc.returncode == 0, proc.stderr[-3000:]
    commands = [line for line in proc.stdout.splitlines() if "python -m hnclip export" in line]
    assert len(commands) == 14 and all("--format longclip" not in c for c in commands)
    hnclip_oc = [c for c in commands if "--out results/exports/synthetic/hnclip/" in c and "open_clip" in c]
    # the card's rows: every record of the run, in-domain and transfer
    assert len(hnclip_oc) == 1 and "synthetic.json" in hnclip_oc[0] and "synthetic_shift.json" in hnclip_oc[0]
    # every card states the config's scale (a toy-scale number must not reach the Hub unlabelled)
    assert all(" --scale toy " in c for c in commands)
    default = planned()
    counts = job_counts(default.stdout + default.stderr)
    assert counts["train"] == 33 and "export" not in counts


def test_the_claims_rule_declares_every_file_hnclip_claims_reads_and_the_report_renders_its_output(tmp_path):
    from hnclip import plan
    from hnclip.workflow_config import load_config

    config = load_config(MICRO)
    proc = snakemake(tmp_path, "-n", "-p", "--cores", "1", "results/report.html", "--configfile", str(MICRO))
    assert proc.returncode == 0, proc.stderr[-3000:]
    claims = [line for line in proc.stdout.splitlines() if "python -m hnclip claims" in line]
    report = [line for line in proc.stdout.splitlines() if "python -m hnclip report" in line]
    assert len(claims) == len(report) == 1
    specs = {e: plan.experiment_spec(config, e) for e in config["experiments"]}
    words = claims[0].split()

    def passed(flag):  # the paths after one flag, up to the next
        start = words.index(flag) + 1
        return next((words[start:i] for i in range(start, len(words)) if words[i].startswith("--")), words[start:])

    assert set(passed("--evals")) == {c["eval_path"] for s in specs.values() for c in s["cells"]}
    logs = plan.report_run_logs(specs)
    assert logs["epochs"] and logs["dynamics"]
    assert logs["summaries"]  # the main runs' training time (the speed-up claim)
    assert set(passed("--run-logs")) == set(logs["epochs"] + logs["dynamics"] + logs["summaries"])
    assert passed("--premise") == ["results/premise.json"] and "--out results/claims.json" in claims[0]
    assert "--claims results/claims.json" in report[0]
    # the rule's inputs are the command's: Snakemake lists them for the job
    block = proc.stdout.split("rule claims:\n", 1)[1].split("\n\n", 1)[0]
    inputs = set(re.search(r"^\s+input: ([^\n]+)", block, flags=re.M).group(1).split(", "))
    # and each main run's epoch_ranks.csv, read beside its epochs.csv (no flag: found by the run folder)
    epoch_ranks = {p.removesuffix("epochs.csv") + "epoch_ranks.csv" for p in logs["epochs"]}
    assert epoch_ranks and inputs == {*passed("--specs"), *passed("--evals"), *passed("--run-logs"),
                                      "results/premise.json", *epoch_ranks}
