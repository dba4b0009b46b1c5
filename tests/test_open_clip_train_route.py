"""HN-CLIP in open_clip's own trainer: ``hnclip.open_clip_train.install`` patched into the REAL
``open_clip_train.main.main`` (two steps of a tiny random open_clip model on a CSV made here, CPU, offline).

The loss open_clip_train computed each step is checked against a float64 numpy transcription of the HN-CLIP
formula (InfoNCE with logits s*cos + s*gamma*G, G the detached caption-caption cosine with a zero diagonal) on
the very features that step saw, and against open_clip's ``ClipLoss`` on the same features, which it must not
equal at gamma > 0.
"""

from __future__ import annotations

import csv
import json
import logging

import numpy as np
import pytest
import torch
from PIL import Image

open_clip = pytest.importorskip("open_clip")
trainer = pytest.importorskip("open_clip_train.main")

import hnclip.open_clip_train as route  # noqa: E402
from hnclip.losses import HNClipLoss  # noqa: E402

TINY = {"embed_dim": 32, "quick_gelu": False,
        "vision_cfg": {"image_size": 32, "patch_size": 16, "width": 64, "layers": 1, "head_width": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1}}
CAPTIONS = ["a red tram at the station", "a red tram at the depot", "a blue boat on a lake", "a dog on a sofa",
            "two cats asleep on a bed", "a green bus in the rain", "a green bus in the snow", "a kite over a beach"]


def _dataset(folder):
    """8 images under images/ and train.csv (filepath<TAB>title, paths relative to the table's folder)."""
    rng = np.random.default_rng(0)
    (folder / "images").mkdir(parents=True)
    with open(folder / "train.csv", "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(("filepath", "title"))
        for i, caption in enumerate(CAPTIONS):
            Image.fromarray(rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)).save(folder / f"images/{i}.png")
            writer.writerow((f"images/{i}.png", caption))


def _reference_hn_loss(img, txt, scale, gamma):
    """Float64 numpy transcription of the HN-CLIP loss (paper eq.: margin gamma * G on every negative)."""
    img, txt = img.astype(np.float64), txt.astype(np.float64)
    g = txt @ txt.T
    np.fill_diagonal(g, 0.0)
    i2t = scale * img @ txt.T + scale * gamma * g
    t2i = scale * txt @ img.T + scale * gamma * g

    def ce(logits):
        logits = logits - logits.max(axis=1, keepdims=True)
        logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
        return -np.mean(np.diag(logp))

    return (ce(i2t) + ce(t2i)) / 2


def _spy_on_loss(monkeypatch, calls):
    """Wrap the installed create_loss so that every loss call's inputs and result are recorded."""
    installed = trainer.create_loss

    def create_loss(args):
        loss = installed(args)
        plain = loss.forward

        def forward(*a, **kw):
            out = plain(*a, **kw)
            calls.append({k: (v.detach().clone() if torch.is_tensor(v) else v) for k, v in kw.items()}
                         | {"loss": out, "module": loss})
            return out

        loss.forward = forward
        return loss

    monkeypatch.setattr(trainer, "create_loss", create_loss)


def _run_main(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path / "data")  # open_clip_train opens the CSV's paths against the working directory
    trainer.main(["--train-data", "train.csv", "--dataset-type", "csv", "--model", "hn-tiny", "--batch-size", "4",
                  "--epochs", "1", "--lr", "1e-4", "--warmup", "1", "--workers", "0", "--precision", "fp32",
                  "--device", "cpu", "--seed", "0", "--logs", str(tmp_path / "logs"), "--name", name,
                  "--save-frequency", "0", "--report-to", ""])


@pytest.fixture
def tiny_setup(tmp_path, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models/hn-tiny.json").write_text(json.dumps(TINY))
    open_clip.add_model_config(tmp_path / "models")
    _dataset(tmp_path / "data")
    # open_clip_train.main replaces the root logger's handlers; keep pytest's
    monkeypatch.setattr(logging.getLogger(), "handlers", list(logging.getLogger().handlers))
    for attr in ("create_loss", "create_model_and_transforms"):
        monkeypatch.setattr(trainer, attr, getattr(trainer, attr))  # undone after the test
    return tmp_path


def test_open_clip_train_main_trains_with_the_hn_loss(tiny_setup, monkeypatch):
    gamma = 0.5
    route.install(gamma=gamma)
    calls = []
    _spy_on_loss(monkeypatch, calls)
    _run_main(tiny_setup, monkeypatch, "hn")
    assert len(calls) == 2, f"expected 2 steps (8 pairs, batch 4), saw {len(calls)}"
    clip_loss = open_clip.ClipLoss()
    for call in calls:
        assert isinstance(call["module"], HNClipLoss) and call["module"].gamma == gamma
        img, txt, scale = call["image_features"], call["text_features"], call["logit_scale"]
        expected = _reference_hn_loss(img.numpy(), txt.numpy(), float(scale), gamma)
        measured = float(call["loss"]["contrastive_loss"].detach())
        assert measured == pytest.approx(expected, rel=1e-5, abs=1e-6)
        plain = float(clip_loss(img, txt, scale))
        assert abs(measured - plain) > 1e-4, "the HN loss equals ClipLoss: the margin was not applied"


def test_token_term_reaches_the_loss_in_open_clip_train(tiny_setup, monkeypatch):
    route.install(gamma=0.5, token_weight=0.5)
    calls = []
    _spy_on_loss(monkeypatch, calls)
    _run_main(tiny_setup, monkeypatch, "tokens")
    assert len(calls) == 2
    for call in calls:
        losses = call["loss"]
        assert {"contrastive_loss", "token_loss"} <= set(losses)  # open_clip_train adds "loss", their sum
        # P = (32 / 16)^2 = 4 patches, 77 text positions, embed_dim 32
        assert call["image_tokens"].shape == (4, 4, 32) and call["text_tokens"].shape == (4, 77, 32)
        assert float(losses["token_loss"].detach()) > 0


def test_token_features_pool_as_open_clip_encodes():
    """token_features' pooled features are open_clip's encode_image / encode_text; its word tokens are the
    output of ln_final (captured by a forward hook) times text_projection, masked up to EOT."""
    torch.manual_seed(0)
    model = open_clip.model.CLIP(**TINY).eval()
    images = torch.randn(3, 3, 32, 32)
    texts = open_clip.tokenize(CAPTIONS[:3])
    captured = {}
    model.ln_final.register_forward_hook(lambda module, args, out: captured.setdefault("x", out))
    with torch.no_grad():
        out = route.token_features(model, images, texts)
        torch.testing.assert_close(out["image_features"], model.encode_image(images, normalize=True))
        captured.clear()
        torch.testing.assert_close(out["text_features"], model.encode_text(texts, normalize=True))
        words = torch.nn.functional.normalize(captured["x"] @ model.text_projection, dim=-1)
    torch.testing.assert_close(out["text_tokens"], words)
    eot = [list(row).index(49407) for row in texts.tolist()]
    assert out["text_mask"].sum(dim=1).tolist() == [e + 1 for e in eot]
    assert out["image_tokens"].shape == (3, 4, 32)
    torch.testing.assert_close(out["image_tokens"].norm(dim=-1), torch.ones(3, 4))


def test_open_clip_train_options_without_an_hn_loss_are_refused():
    from types import SimpleNamespace

    args = SimpleNamespace(distill=False, siglip=True, horovod=False, model="ViT-B-32", gather_with_grad=False)
    with pytest.raises(ValueError, match="--siglip"):
        route.make_loss(args, 0.5)
    args.siglip, args.model = False, "coca_ViT-B-32"
    with pytest.raises(ValueError, match="CoCa"):
        route.make_loss(args, 0.5)
