"""Every framework x {plain, +HN} trains through the one loop on a micro model and its loss goes down.

One micro-batch holds the whole 8-sample training set, so every step sees the same batch and the
objective's first-step and last-step values are comparable (no sampling noise). The +HN runs use the
frozen margin: with G recomputed from the moving text encoder the HN objective is a different function
at every step (on the micro model it rises while InfoNCE falls, as G grows), so only the frozen-G
objective has a well-defined decrease to check. Also pinned: what a
run writes beside the model (the framework file, FineLIP's module weights) and that evaluation
loads it back.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

from hnclip.data.manifest import read_manifest, write_manifest

CASES = [
    ("longclip", {}),
    ("longclip", {"token_weight": 0.5, "label_smoothing": 0.1}),
    ("longclip", {"framework_settings": {"short_weight": 0.5, "pca_components": 4}}),
    ("lora", {"lr": 1e-2, "framework_settings": {"r": 4}}),  # adapters train at their method's lr
    ("dora", {"lr": 1e-2, "framework_settings": {"r": 4}}),
    # one step per epoch: FineLIP's first-epoch ramp would weight the only step of epoch 1 by 0
    ("finelip", {"framework_settings": {"ramp": False}}),
]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    root = tmp_path_factory.mktemp("frameworks_data")
    paths = make_dataset(root, n=8)
    manifest = read_manifest(paths["train_manifest"])
    manifest["short_caption"] = [c.split()[0] + " " + c.split()[1] for c in manifest["caption"]]
    write_manifest(manifest, paths["train_manifest"])
    return paths


@pytest.mark.parametrize("gamma", [0.0, 0.5], ids=["plain", "hn"])
@pytest.mark.parametrize(("framework", "settings"), CASES, ids=[f"{f}-{i}" for i, (f, _) in enumerate(CASES)])
def test_framework_trains_and_its_loss_decreases(dataset, tmp_path, framework, settings, gamma):
    cfg = small_config(**{"framework": framework, "gamma": gamma, "margin": "frozen" if gamma else "recompute",
                          "micro_batch": 8, "accum_steps": 1, "epochs": 4, "lr": 1e-3, "module_lr": 1e-2,
                          "eval_every_epoch": False, **settings})
    summary = run_training(dataset, tmp_path, cfg)
    losses = [float(r["loss"]) for r in read_csv_rows(tmp_path / "out" / "dynamics.csv")]
    assert len(losses) == 4 and summary["steps"] == 4
    assert losses[-1] < 0.9 * losses[0], losses
    saved = json.loads((tmp_path / "out" / "model" / "framework.json").read_text())
    assert saved["framework"] == framework and saved["config"]["gamma"] == gamma
    assert (tmp_path / "out" / "model" / "framework.safetensors").is_file() == (framework == "finelip")


def test_finelip_modules_are_trained_saved_and_used_by_evaluation(dataset, tmp_path):
    from hnclip.evaluate import evaluate_checkpoint, evaluate_model
    from hnclip.framework_loading import load_framework
    from hnclip.frameworks import build_framework
    from hnclip.models import load_model

    cfg = small_config(framework="finelip", micro_batch=8, accum_steps=1, epochs=2, module_lr=1e-2,
                       eval_every_epoch=False)
    run_training(dataset, tmp_path, cfg)
    model_dir = tmp_path / "out" / "model"
    torch.manual_seed(cfg.seed)  # the initialisation the run started from
    initial = build_framework(cfg, load_model(dataset["init_model_dir"])).state_dict()
    trained = load_file(str(model_dir / "framework.safetensors"))
    assert trained.keys() == initial.keys()
    assert any(not torch.equal(trained[k], initial[k]) for k in trained)  # module_lr reached them

    model = load_model(model_dir)
    framework = load_framework(model_dir, model)
    assert all(torch.equal(framework.state_dict()[k], trained[k]) for k in trained)
    result = evaluate_checkpoint(model_dir, dataset["train_manifest"], dataset["store_dir"],
                                 tmp_path / "eval.json", {"run": "x"}, "synthetic", device="cpu")
    manifest = pd.read_csv(dataset["train_manifest"])
    from hnclip.data.image_store import ImageStore

    store = ImageStore(dataset["store_dir"])
    assert result["metrics"] == evaluate_model(model, manifest, store, device="cpu", framework=framework)


def test_a_framework_needing_a_product_refuses_to_start_without_it(dataset, tmp_path, monkeypatch):
    from hnclip.frameworks.longclip import LongCLIP

    monkeypatch.setattr(LongCLIP, "products", ("segments",))
    with pytest.raises(ValueError, match=r"framework 'longclip' needs the preprocessing product\(s\) \['segments'\]"):
        run_training(dataset, tmp_path, small_config(max_steps=1))


def test_short_caption_option_names_the_missing_column(dataset, tmp_path):
    cfg = small_config(framework_settings={"short_weight": 1.0, "short_caption_column": "tiny_caption"},
                       max_steps=1)
    with pytest.raises(ValueError, match="'tiny_caption'"):
        run_training(dataset, tmp_path, cfg)
