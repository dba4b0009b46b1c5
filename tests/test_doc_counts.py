"""Every count a doc states about a DAG (training runs and those that probe, evaluations, zero-shot and
protocol-variant evaluations, jobs, the regime's conditions, the disk a grid keeps) checked against its
source: the job counts of ``snakemake -n`` of the config the sentence talks about (the plan's probed runs),
the regime's condition registry, and one stated per-run size.

Each :class:`Claim` finds its sentence with a regex anchored on the words around the numbers (it must match
exactly once, so a reworded sentence fails here instead of going unchecked) and names the measure each
number states. One dry run per config, shared by the session (tests/dry_runs.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from dry_runs import planned
from test_workflow_dag import job_counts

from hnclip import plan
from hnclip.analysis.regime import CONDITION_KEYS
from hnclip.workflow_config import load_config

REPO = Path(__file__).resolve().parents[1]
PAPER, REHEARSAL, REHEARSAL_CI = "config/paper.yaml", "config/rehearsal.yaml", "config/rehearsal-ci.yaml"
# the configs a doc talks about, as --configfile lists (the embedded default: none)
CONFIGS = {"default": [], "paper": [PAPER], "rehearsal": [PAPER, REHEARSAL],
           "rehearsal-ci": [PAPER, REHEARSAL, REHEARSAL_CI]}
NUMBER_WORDS = dict(enumerate("zero one two three four five six seven eight nine ten eleven twelve".split()))
COUNT = r"(\d+|" + "|".join(NUMBER_WORDS.values()) + ")"


def measures(counts: dict[str, int]) -> dict[str, int]:
    """What the docs count, from a dry run's jobs per rule. A run is a ``train`` job (its train set has a
    test split, which the job evaluates itself) or a ``train_without_test`` job; an evaluation of a run is
    a ``train`` job's or an ``evaluate`` job's (tests/test_workflow_dag.py derives the paper's by hand)."""
    return {"runs": counts.get("train", 0) + counts.get("train_without_test", 0),
            "evaluations": counts.get("train", 0) + counts.get("evaluate", 0),
            "zeroshot": counts.get("evaluate_zeroshot", 0),
            "protocol": counts.get("evaluate_protocol", 0) + counts.get("evaluate_protocol_zeroshot", 0),
            "jobs": counts["total"]}


@dataclass(frozen=True)
class Claim:
    """Numbers one sentence states: ``pattern``'s named groups, each a key of :func:`measures` (or
    ``conditions``), read in ``path`` (whitespace and YAML comment marks folded to single spaces)."""

    path: str
    config: str | None  # a key of CONFIGS, None for the conditions
    pattern: str


CLAIMS = [
    Claim("README.md", "default", r"most of it the (?P<runs>\d+) fine-tuning runs"),
    Claim("docs/paper-scale.md", "paper", r"Long-DCI and Urban-1K: (?P<runs>\d+) training runs and "
          r"(?P<evaluations>\d+) evaluations of them, (?P<zeroshot>\d+) of the zero-shot backbone"),
    Claim("docs/paper-scale.md", "paper", r"the paper grid: (?P<probed>\d+) of its (?P<runs>\d+) runs probe"),
    Claim("docs/rehearsal.md", "rehearsal", r"(?P<runs>\d+) training runs, (?P<evaluations>\d+) evaluations of "
          r"runs, (?P<zeroshot>\d+) of the zero-shot backbone and (?P<protocol>\d+) on the protocol"),
    Claim("docs/rehearsal.md", "paper", r"instead of the paper grid's (?P<runs>\d+), (?P<evaluations>\d+), "
          r"(?P<zeroshot>\d+) and (?P<protocol>\d+)\."),
    Claim("docs/rehearsal.md", "rehearsal-ci", r"every rule of the paper DAG \((?P<jobs>\d+) jobs\)"),
    Claim("docs/rehearsal.md", "rehearsal-ci", r"a train set without a test split\): (?P<runs>\d+) training runs;"),
    Claim(REHEARSAL, "rehearsal", r"(?P<runs>\d+) training runs, (?P<evaluations>\d+) evaluations of runs, "
          r"(?P<zeroshot>\d+) of the zero-shot backbone and (?P<protocol>\d+) on protocol variants"),
    Claim(REHEARSAL, "paper", r"\(the paper grid: (?P<runs>\d+), (?P<evaluations>\d+), (?P<zeroshot>\d+) and "
          r"(?P<protocol>\d+)\)"),
    Claim(REHEARSAL, "paper", r"so the paper's (?P<runs>\d+) runs would need"),
    Claim(REHEARSAL_CI, "rehearsal-ci", r"What goes is repetition, to (?P<runs>\d+) training runs"),
    Claim(PAPER, "paper", r"AdamW's moments \(~[\d.]+ GB more\): (?P<runs>\d+) runs"),
    Claim("config/README.md", "paper", r"\| `train.keep_checkpoint` \| weights \| (?P<runs>\d+) ViT-L runs"),
    Claim("benchmarks/README.md", "default", r"The default now has (?P<jobs>\d+) jobs \((?P<runs>\d+) training runs"),
    Claim(".ci/run", "rehearsal-ci", r"on stand-in files, (?P<runs>\d+) training runs\)"),
    Claim("docs/outputs.md", None, rf"`results/regime/{{benchmark}}.json` \| the (?P<conditions>{COUNT}) conditions"),
    Claim("docs/toy-design.md", None, rf"\(`hnclip.analysis.regime`, (?P<conditions>{COUNT}) conditions,"),
    Claim("docs/uncertainty.md", None, rf"json`: the (?P<conditions>{COUNT}) conditions beside their targets\)"),
    Claim("src/hnclip/analysis/regime/__init__.py", None,
          rf":data:`CONDITION_KEYS` names the (?P<conditions>{COUNT}) conditions"),
    Claim("src/hnclip/analysis/regime/conditions.py", None, rf'^"""The (?P<conditions>{COUNT}) conditions,'),
    Claim("src/hnclip/analysis/premise_print.py", None, rf"the (?P<conditions>{COUNT}) conditions of the paper's regime"),
    Claim("src/hnclip/analysis/regime/inputs.py", None, rf"checked for the (?P<conditions>{COUNT}) conditions in order"),
]
# Disk a grid keeps: one stated per-run size (config/paper.yaml's keep_checkpoint comment) times the runs
SIZE_SOURCE = Claim(PAPER, "paper", r"keeps its weights \(~(?P<weights>[\d.]+) GB\) but not AdamW's moments "
                    r"\(~(?P<moments>[\d.]+) GB more\): (?P<runs>\d+) runs x [\d.]+ GB = ~(?P<kept>\d+) GB")
GB_CLAIMS = [
    # (claim, its groups: kept = weights x runs, full = (weights + moments) x runs, weights = the per-run size)
    Claim(REHEARSAL, "paper", r"A full-FT ViT-L run leaves a (?P<weights>[\d.]+) GB model, so the paper's "
          r"(?P<runs>\d+) runs would need ~(?P<kept>\d+) GB"),
    Claim("config/README.md", "paper", r"(?P<runs>\d+) ViT-L runs x (?P<weights>[\d.]+) GB: ~(?P<kept>\d+) GB of "
          r"weights kept instead of ~(?P<full>\d+) GB with the AdamW moments"),
]


def folded(path: str) -> str:
    """The file's text with each line break, its indentation and a YAML/shell comment mark folded to one
    space, so a sentence wrapped over lines reads as one."""
    return re.sub(r"[ \t]*\n[ \t]*(#[ \t]*)?", " ", (REPO / path).read_text())


def stated(claim: Claim, text: str | None = None) -> dict[str, str]:
    """The numbers ``claim``'s sentence states, by measure; fails unless the sentence is there once."""
    text = folded(claim.path) if text is None else text
    found = [m for m in re.finditer(claim.pattern, text, re.M) if m.group(0).strip()]
    assert len(found) == 1, f"{claim.path}: {len(found)} sentences match {claim.pattern!r} (one expected)"
    return {k: v for k, v in found[0].groupdict().items() if v is not None}


def as_int(value: str) -> int:
    words = {w: n for n, w in NUMBER_WORDS.items()}
    return words[value] if value in words else int(value)


def mismatches(claim: Claim, numbers: dict[str, str], actual: dict[str, int]) -> list[str]:
    return [f"{claim.path}: states {name} {value}, {claim.config or 'the code'} has {actual[name]}"
            for name, value in numbers.items() if as_int(value) != actual[name]]


@pytest.fixture(scope="module")
def dag_measures(tmp_path_factory):
    """config name -> :func:`measures` of its dry run and its probed runs (``probed``), each config dry-run
    once, when first asked for."""
    cache: dict[str, dict[str, int]] = {}

    def get(config: str) -> dict[str, int]:
        if config not in cache:
            files = [str(REPO / f) for f in CONFIGS[config]]
            proc = planned(*files)
            assert proc.returncode == 0, proc.stderr[-3000:]
            counts = job_counts(proc.stdout + proc.stderr)
            total = re.findall(r"^total\s+(\d+)$", proc.stdout + proc.stderr, re.M)
            # the runs that probe (train.probe_runs) are the plan's choice, not a rule of their own
            probed = len(plan.probed_runs(load_config(files or [str(REPO / "config/config.yaml")])))
            cache[config] = {**measures({**counts, "total": int(total[-1])}), "probed": probed}
        return cache[config]

    return get


@pytest.mark.parametrize("config", list(CONFIGS))
def test_each_dag_count_a_doc_states_is_the_dry_runs(config, dag_measures):
    claims = [c for c in CLAIMS if c.config == config]
    assert claims
    wrong = [line for c in claims for line in mismatches(c, stated(c), dag_measures(config))]
    assert not wrong, "\n".join(wrong)


def test_each_conditions_count_a_doc_states_is_the_registrys():
    claims = [c for c in CLAIMS if c.config is None]
    wrong = [line for c in claims for line in mismatches(c, stated(c), {"conditions": len(CONDITION_KEYS)})]
    assert not wrong, "\n".join(wrong)


def test_each_disk_size_is_the_stated_per_run_size_times_the_runs(dag_measures):
    """GB totals are derived, never measured: runs x config/paper.yaml's per-run sizes, to ~10 GB."""
    source = stated(SIZE_SOURCE)
    weights, moments = float(source["weights"]), float(source["moments"])
    runs = dag_measures("paper")["runs"]
    wrong = mismatches(SIZE_SOURCE, {"runs": source["runs"]}, {"runs": runs})
    for claim in [SIZE_SOURCE, *GB_CLAIMS]:
        numbers = stated(claim)
        expected = {"runs": runs, "weights": weights, "moments": moments, "kept": round(runs * weights, -1),
                    "full": round(runs * (weights + moments), -1)}
        wrong += [f"{claim.path}: states {name} {value}, expected {expected[name]:g} ({runs} runs x {weights} GB"
                  f" weights + {moments} GB moments)" for name, value in numbers.items()
                  if float(value) != expected[name]]
    assert not wrong, "\n".join(wrong)


def test_a_count_edited_wrong_is_caught():
    """The check itself: one number of a sentence changed is reported, a reworded sentence is not skipped."""
    claim = next(c for c in CLAIMS if c.path == "docs/rehearsal.md" and c.config == "paper")
    numbers = stated(claim)
    actual = {name: as_int(v) for name, v in numbers.items()}
    assert mismatches(claim, numbers, actual) == []
    text = folded(claim.path)
    sentence = re.search(claim.pattern, text).group(0)
    edited = text.replace(sentence, sentence.replace(f" {numbers['runs']},", f" {actual['runs'] - 9},"))
    assert mismatches(claim, stated(claim, edited), actual) == [
        f"docs/rehearsal.md: states runs {actual['runs'] - 9}, paper has {actual['runs']}"]
    with pytest.raises(AssertionError, match="0 sentences match"):
        stated(claim, text.replace(sentence, sentence.replace("paper grid's", "paper's grid")))


def test_released_yaml_is_the_layer_the_readme_says_it_is(tmp_path, monkeypatch):
    """README: config/released.yaml holds only `models:` and runs layered over another config, never alone."""
    import yaml
    from hub_cache import write_hub_cache

    from hnclip.config.validation import ConfigError

    # its bases are Hub models: a cached copy lets the config check pass without a network (hnclip.hub_models)
    monkeypatch.setenv("HF_HUB_CACHE", str(write_hub_cache(tmp_path, "openai/clip-vit-base-patch16")))

    text = " ".join((REPO / "README.md").read_text().split())
    assert ("`config/released.yaml`, a layer holding only released checkpoints (`models:`) that is never run "
            "alone: `--configfile config/paper.yaml config/released.yaml`") in text
    released = REPO / "config/released.yaml"
    assert set(yaml.safe_load(released.read_text())) == {"models"}
    with pytest.raises(ConfigError, match="config key benchmarks: required"):
        load_config([released])
    models = yaml.safe_load(released.read_text())["models"]
    layered = load_config([REPO / PAPER, released])["models"]  # the schema fills in the defaults
    assert {name: {k: layered[name][k] for k in models.get(name, {})} for name in layered} == models
