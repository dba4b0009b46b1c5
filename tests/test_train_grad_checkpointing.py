"""train.grad_checkpointing: the same gradients for less activation memory, and really switched on.

Long-CLIP issue 78 (out of memory at batch 32 on a 40 GB GPU) is what the setting is for; memory cannot
be measured on a CPU, so the tests pin what can be: the gradients equal those without recomputation,
and open_clip's blocks do go through ``torch.utils.checkpoint`` (spied where open_clip calls it).
"""

from __future__ import annotations

import open_clip.transformer
import torch
from test_train_support import make_dataset, run_training, small_config

from hnclip.losses import contrastive_loss
from hnclip.models import create_model, load_model


def _spy_checkpoint(monkeypatch) -> list[int]:
    calls = []
    real = open_clip.transformer.checkpoint

    def spy(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(open_clip.transformer, "checkpoint", spy)
    return calls


def _one_step_grads(enable: bool) -> dict[str, torch.Tensor]:
    model = create_model("micro", seed=0)
    model.train()
    model.set_grad_checkpointing(enable)
    generator = torch.Generator().manual_seed(1)
    size = model.spec["config"]["vision_cfg"]["image_size"]
    images = torch.rand(4, 3, size, size, generator=generator)
    tokens = model.tokenize(["a red cube left of a ball", "a blue ball", "two green trees near a car",
                             "a small shiny dog above the matte car"])
    out = model(images, tokens)
    contrastive_loss(out["image_features"], out["text_features"], out["logit_scale"], gamma=0.5).backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


def test_gradients_with_and_without_recomputation_are_equal(monkeypatch):
    calls = _spy_checkpoint(monkeypatch)
    plain = _one_step_grads(False)
    assert not calls
    recomputed = _one_step_grads(True)
    assert calls  # every block of both towers went through torch.utils.checkpoint
    assert plain.keys() == recomputed.keys() and len(plain) > 10
    for name, grad in plain.items():
        torch.testing.assert_close(recomputed[name], grad, rtol=1e-6, atol=1e-7, msg=name)


def test_the_training_loop_applies_the_setting_and_trains_the_same_step(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path / "data", n=8)
    calls = _spy_checkpoint(monkeypatch)
    trained = {}
    for enable in (False, True):
        calls.clear()
        root = tmp_path / f"run_{enable}"
        run_training(paths, root, small_config(gamma=0.5, max_steps=1, grad_checkpointing=enable))
        assert bool(calls) is enable
        trained[enable] = dict(load_model(root / "out" / "model").named_parameters())
    for name, param in trained[False].items():
        torch.testing.assert_close(trained[True][name], param, rtol=1e-6, atol=1e-7, msg=name)
