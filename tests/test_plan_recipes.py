"""Each run's effective training settings: the shared budget, its method's recipe, its framework's section.

The configs are validated with the workflow schema (which fills the defaults), expanded by
``hnclip.plan.train_overrides`` into the ``--set`` items the train rule passes, and parsed back by
TrainConfig exactly as ``hnclip train`` does.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from hnclip import plan
from hnclip.config.train import TrainConfig

REPO = Path(__file__).resolve().parents[1]
SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def load(name: str) -> dict:
    config = yaml.safe_load((REPO / "config" / name).read_text())
    validate(config, SCHEMA)
    return config


def effective(config: dict, method: str, gamma: float = 0.0) -> TrainConfig:
    run = plan.Run("x", method, plan.format_number(gamma), "1", 0)
    items = plan.train_overrides(config, run)
    return TrainConfig.from_overrides(dict(item.split("=", 1) for item in items))


@pytest.fixture(scope="module")
def paper():
    return load("paper.yaml")


@pytest.mark.parametrize(("method", "gamma", "lr", "decay", "warmup", "smoothing"), [
    ("longclip", 0.0, 1e-6, 0.01, 200, 0.1),  # beichenzbc/Long-CLIP train/train.py, model_longclip.py
    ("longclip_hn", 0.5, 1e-6, 0.01, 200, 0.1),
    ("hnclip", 0.5, 1e-6, 0.01, 200, 0.1),  # HN-CLIP follows standard Long-CLIP fine-tuning
    ("hnclip_frozen", 0.5, 1e-6, 0.01, 200, 0.1),
    ("finelip", 0.0, 1e-6, 0.01, 200, 0.1),  # ffa-ti-ma/FineLIP train/arguments.py
    ("goal", 0.0, 5e-6, 0.05, 0, 0.0),  # PerceptualAI-Lab/GOAL goal_loss_finetuning.py
    ("structxlip_hn", 0.5, 5e-6, 0.05, 0, 0.0),  # intelligolabs/StructXLIP structxlip/train.py
    ("dora", 0.0, 1e-4, 0.01, 200, 0.1),  # (chosen): Long-CLIP's recipe, adapters at 1e-4
])
def test_paper_runs_use_their_methods_published_recipe_inside_the_shared_budget(paper, method, gamma, lr, decay,
                                                                               warmup, smoothing):
    cfg = effective(paper, method, gamma)
    assert (cfg.lr, cfg.weight_decay, cfg.warmup_steps, cfg.label_smoothing) == (lr, decay, warmup, smoothing)
    assert (cfg.epochs, cfg.micro_batch, cfg.accum_steps) == (10, 16, 8)  # the paper's budget, for all
    assert (cfg.beta1, cfg.beta2, cfg.eps, cfg.grad_clip, cfg.schedule, cfg.min_lr_ratio) == \
        (0.9, 0.999, 1e-8, 0.0, "cosine", 0.0)  # torch AdamW defaults, cosine to 0, no clipping


def test_a_framework_gets_its_own_section_and_finelip_its_aggregator_rate(paper):
    finelip = effective(paper, "finelip_hn", 0.5)
    assert finelip.module_lr == 2e-4 and finelip.framework_settings.hinge == "sum"
    lora = effective(paper, "lora")
    assert (lora.framework_settings.r, lora.framework_settings.alpha, lora.framework_settings.dropout) == (16, 32, 0.05)
    items = plan.train_overrides(paper, plan.Run("docci", "goal", "0", "1", 0))
    assert any(i.startswith("goal.") for i in items) and not any(i.startswith(("lora.", "finelip.")) for i in items)


def test_plain_and_hn_variants_differ_only_in_gamma_and_hn_clip_in_its_token_branch(paper):
    plain, hn, full = (effective(paper, m, g).to_dict() for m, g in (("longclip", 0), ("longclip_hn", 0.5),
                                                                      ("hnclip", 0.5)))
    assert {k for k in plain if plain[k] != hn[k]} == {"gamma"}
    assert {k for k in hn if hn[k] != full[k]} == {"token_weight"}


def test_a_null_recipe_key_keeps_the_shared_value_and_the_toy_adapters_keep_their_rate():
    toy = load("config.yaml")
    adapter_lr = toy["methods"]["lora"]["train"]["lr"]
    assert adapter_lr != toy["train"]["lr"]
    assert effective(toy, "lora").lr == adapter_lr and effective(toy, "dora_hn", 0.5).lr == adapter_lr
    assert effective(toy, "longclip").lr == toy["train"]["lr"]
    edited = copy.deepcopy(toy)
    edited["methods"]["goal"]["train"] = {"weight_decay": 0.05}
    validate(edited, SCHEMA)
    assert edited["methods"]["goal"]["train"]["lr"] is None
    goal = effective(edited, "goal")
    assert (goal.weight_decay, goal.lr) == (0.05, toy["train"]["lr"])


def test_a_method_recipe_outside_the_optimisation_keys_is_refused():
    toy = load("config.yaml")
    toy["methods"]["goal"]["train"] = {"epochs": 3}  # the budget is shared
    with pytest.raises(Exception, match="epochs"):
        validate(toy, SCHEMA)


def test_specs_carry_gamma_and_roles_and_the_report_declares_the_run_logs_it_reads():
    config = load("config.yaml")
    specs = {e: plan.experiment_spec(config, e) for e in config["experiments"]}
    assert all(s["gamma"] == config["gamma"] and s["roles"]["reference"] == plan.REFERENCE_METHOD
               for s in specs.values())
    logs = plan.report_run_logs(specs)
    # every main run's per-epoch log, and the dynamics of HN-CLIP's runs at the config's gamma only:
    # not the gamma sweep's other gammas, not the frozen-G variant
    assert logs["epochs"] == [f"{c['run_dir']}/epochs.csv" for c in plan.epoch_cells(specs["main"])]
    assert logs["dynamics"] and all("/hnclip/g0.5/" in p and p.endswith("/dynamics.csv") for p in logs["dynamics"])
    sweep = {c["run_dir"] for c in specs["gamma_sweep"]["cells"] if float(c["run"]["gamma"]) not in (0.0, 0.5)}
    assert sweep and not sweep & {p.removesuffix("/dynamics.csv") for p in logs["dynamics"]}
    # a renamed label finds the same runs
    relabelled = copy.deepcopy(config)
    relabelled["methods"]["hnclip"]["label"] = "Ours"
    assert plan.report_run_logs({e: plan.experiment_spec(relabelled, e) for e in config["experiments"]}) == logs


def test_the_train_sets_whose_runs_their_training_jobs_evaluate_are_those_with_their_own_test_split():
    from hnclip.workflow_config import load_config

    repo = Path(__file__).resolve().parents[1]
    # the embedded default: the synthetic benchmark trains and holds its test split; synthetic_short and
    # synthetic_shift are test-only, trained on nothing
    assert plan.self_evaluated_train_sets(load_config(repo / "config/config.yaml")) == ["synthetic"]
    # the paper: DOCCI and DCI hold test splits; VG paragraphs (Urban-1K's train set) has none, Long-DCI and
    # Urban-1K are test-only
    assert plan.self_evaluated_train_sets(load_config(repo / "config/paper.yaml")) == ["docci", "dci"]


def test_a_wildcard_pattern_matches_exactly_its_names_taken_literally_and_nothing_when_empty():
    import re

    pattern = plan.wildcard_pattern(["docci", "long_dci", "coco+", "v1.0"])
    for name in ("docci", "long_dci", "coco+", "v1.0"):
        assert re.fullmatch(pattern, name)
    # a prefix, a name the metacharacters would have matched, another name: none
    for other in ("doc", "cocoo", "v1x0", "dci"):
        assert re.fullmatch(pattern, other) is None
    assert all(re.fullmatch(plan.wildcard_pattern([]), path) is None for path in ("", "docci", "results/x"))
