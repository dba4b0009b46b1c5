"""The README's Python API snippet runs as written on a fine-tuned model folder, and what it computes is what
open_clip's own eval transform and tokenizer give (an independent reference), with unit-length features and,
on a model fine-tuned until it separates its pairs, each image's own caption ranked first."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image
from test_train_support import make_dataset, run_training, small_config

ROOT = Path(__file__).resolve().parents[1]
OPENAI_MEAN, OPENAI_STD = (0.48145466, 0.4578275, 0.40821073), (0.26862954, 0.26130258, 0.27577711)


def _readme_snippet() -> str:
    """The python block of the README's "In Python" paragraph (the only python block after it)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text.split("**In Python.**", 1)[1]
    blocks = re.findall(r"```python\n(.*?)```", after, flags=re.S)
    assert blocks, "README's 'In Python' paragraph has no python block"
    return blocks[0]


def _with_inputs(snippet: str, folder: Path, paths: list[Path], captions: list[str]) -> str:
    """The snippet with its three input lines (folder, paths, captions) pointing at the test's files."""
    values = {"folder": str(folder), "paths": [str(p) for p in paths], "captions": captions}
    for name, value in values.items():
        snippet, count = re.subn(rf"^{name} = .*$", lambda _m, n=name, v=value: f"{n} = {v!r}", snippet,
                                 flags=re.M)
        assert count == 1, f"README snippet should set {name} on one line"
    return snippet


def test_readme_api_snippet_matches_open_clip_reference_and_ranks_pairs(tmp_path):
    from open_clip import image_transform
    from open_clip import tokenize as oc_tokenize

    from hnclip.data.image_store import build_store

    n = 8
    torch.manual_seed(0)
    paths = make_dataset(tmp_path / "data", n=n)
    captions = pd.read_csv(paths["train_manifest"])["caption"].tolist()
    assert len(set(captions)) == n
    # odd-sized images with structure (a colour and a bar per image), so the resize is exercised
    rng = np.random.default_rng(3)
    files = []
    for i in range(n):
        width, height = 37 + 4 * i, 53 - 2 * i
        pixels = np.zeros((height, width, 3), dtype=np.uint8) + rng.integers(0, 256, size=3, dtype=np.uint8)
        pixels[:, (i * width) // n:((i + 1) * width) // n] = 255 - pixels[0, 0]
        pixels = np.clip(pixels.astype(int) + rng.integers(-20, 21, size=pixels.shape), 0, 255).astype(np.uint8)
        files.append(tmp_path / f"image{i}.png")
        Image.fromarray(pixels).save(files[-1])
    manifest = pd.DataFrame({"image_id": [f"img{i:03d}" for i in range(n)], "image_path": [str(f) for f in files],
                             "caption": captions})
    manifest.to_csv(paths["train_manifest"], index=False)
    build_store(manifest, paths["store_dir"], image_size=32)
    run_training(paths, tmp_path, small_config(epochs=60, lr=3e-3, micro_batch=8, accum_steps=1))
    folder = tmp_path / "out" / "model"

    scope: dict = {}
    exec(compile(_with_inputs(_readme_snippet(), folder, files, captions), "README.md", "exec"), scope)
    image_features, text_features, similarity = scope["image_features"], scope["text_features"], scope["similarity"]

    assert image_features.shape == text_features.shape == (n, 32)
    torch.testing.assert_close(image_features.norm(dim=1), torch.ones(n), atol=1e-5, rtol=0)
    torch.testing.assert_close(text_features.norm(dim=1), torch.ones(n), atol=1e-5, rtol=0)
    # open_clip's own eval transform and tokenizer on the same files and captions
    model = scope["model"]
    transform = image_transform(32, is_train=False, mean=OPENAI_MEAN, std=OPENAI_STD, interpolation="bicubic")
    with torch.no_grad():
        ref_images = model.encode_image(torch.stack([transform(Image.open(f)) for f in files]))
        ref_texts = model.encode_text(oc_tokenize(captions, context_length=77))
    torch.testing.assert_close(similarity, ref_images @ ref_texts.T, atol=1e-5, rtol=0)
    # the fine-tuned model ranks each image's own caption first
    assert similarity.argmax(dim=1).tolist() == list(range(n))
