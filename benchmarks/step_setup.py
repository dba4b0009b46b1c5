"""One framework made ready to take optimizer steps, the way `hnclip train` sets it up (minus the frozen
margin and the checkpoint): shared by the benchmarks that time steps (framework_cost.py, job_cost.py), so
that both measure the same model, modules and optimizer groups as a training job.
"""

from __future__ import annotations

from pathlib import Path

from hnclip.frameworks import framework_names  # torch-free: the registration rows
from hnclip.workflow_config import load_config

PAPER_CONFIG = Path(__file__).resolve().parents[1] / "config" / "paper.yaml"


def paper_hn_settings() -> dict:
    """HN-CLIP's gamma and token weight as config/paper.yaml sets them (the config is their one home), read
    as the workflow reads it (hnclip.workflow_config: validated, schema defaults filled in, cross-checked)."""
    config = load_config(PAPER_CONFIG)
    return {"gamma": float(config["gamma"]), "token_weight": float(config["token_weight"])}


def objective_variants() -> dict[str, dict]:
    """The objectives gpu_step.py and loss_overhead.py time against each other: plain InfoNCE (the baseline
    every ratio divides by), the HN margin, and HN with the token term, at config/paper.yaml's settings."""
    hn = paper_hn_settings()
    return {"InfoNCE": {"gamma": 0.0, "token_weight": 0.0}, "HN": {"gamma": hn["gamma"], "token_weight": 0.0},
            "HN + token": hn}


# label -> TrainConfig overrides of each framework as the paper config trains it (TrainConfig's gamma and
# token_weight default to 0: plain Long-CLIP fine-tuning); HN-CLIP first, the baseline of the ratios, then
# every registered framework
VARIANTS = {
    "hnclip": {"framework": "longclip", **paper_hn_settings()},
    "longclip": {"framework": "longclip", "gamma": 0.0, "token_weight": 0.0},
    **{name: {"framework": name} for name in framework_names() if name != "longclip"},
}


def training_parts(cfg, model, data, products: dict, device):
    """Tokenise ``data``'s captions, build and prepare ``cfg``'s framework, wrap the model (adapters), put
    both in training mode and build the optimizer on the framework's parameter groups.

    Returns (model, framework, optimizer, params): the wrapped model and the trainable parameters that
    the loop clips together.
    """
    from hnclip.frameworks import build_framework
    from hnclip.training.schedule import build_optimizer

    data.tokens = model.tokenize(data.captions)
    framework = build_framework(cfg, model).to(device)
    framework.prepare(data, {k: v for k, v in products.items() if k in framework.products}, model.tokenize)
    model = framework.wrap_model(model).to(device)
    model.train()
    framework.train()
    optimizer = build_optimizer(framework.param_groups(model), cfg)
    params = [p for p in model.parameters() if p.requires_grad] + \
        [p for p in framework.parameters() if p.requires_grad]
    return model, framework, optimizer, params
