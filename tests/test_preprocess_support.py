"""Fixtures shared by the preprocessing and GOAL/StructXLIP tests (no tests here).

Scenes are PIL-drawn: a background and two shapes at known boxes, with a three-sentence caption naming
them. Masks come from :func:`scene_masks` (hand-made, at whatever size SAM would be given), so the
segment logic is tested on known segments; the real SAM path is tested once, in
test_preprocess_segments.py, with a tiny random SAM.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from PIL import Image, ImageDraw

COLOURS = [("red", (220, 30, 30)), ("blue", (30, 80, 230)), ("green", (30, 160, 40)), ("yellow", (235, 225, 20))]
SHAPES = ["square", "circle"]


def scene_boxes(index: int, width: int, height: int) -> list[tuple[int, int, int, int]]:
    """Two boxes (x1, y1, x2, y2), ends exclusive, that move with the scene index."""
    shift = index % 3
    return [(2 + shift, 3, 2 + shift + width // 3, 3 + height // 2),
            (width // 2, height // 3 + shift, width // 2 + width // 3, height // 3 + shift + height // 3)]


def draw_scene(index: int, width: int = 48, height: int = 40) -> Image.Image:
    image = Image.new("RGB", (width, height), (240, 240, 235))
    draw = ImageDraw.Draw(image)
    for k, (x1, y1, x2, y2) in enumerate(scene_boxes(index, width, height)):
        colour = COLOURS[(index + k) % len(COLOURS)][1]
        if k == 0:
            draw.rectangle((x1, y1, x2 - 1, y2 - 1), fill=colour)
        else:
            draw.ellipse((x1, y1, x2 - 1, y2 - 1), fill=colour)
    return image


def scene_caption(index: int) -> str:
    first = COLOURS[index % len(COLOURS)][0]
    second = COLOURS[(index + 1) % len(COLOURS)][0]
    return (f"A small scene number {index} with two shapes. A {first} square sits on the left side. "
            f"A smooth {second} circle is at the right.")


def scene_masks(index: int, width: int, height: int) -> list[np.ndarray]:
    """The scene's two box masks, a tiny speck and the whole frame (the last two fail the area filter)."""
    masks = []
    for x1, y1, x2, y2 in scene_boxes(index, width, height):
        mask = np.zeros((height, width), dtype=bool)
        mask[y1:y2, x1:x2] = True
        masks.append(mask)
    speck = np.zeros((height, width), dtype=bool)
    speck[0, 0] = True
    masks.append(speck)
    masks.append(np.ones((height, width), dtype=bool))
    return masks


def make_scenes(root, n: int = 8, width: int = 48, height: int = 40) -> pd.DataFrame:
    """Write n scenes under ``root/images`` and return their manifest."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        path = root / "images" / f"scene_{i:03d}.png"
        draw_scene(i, width, height).save(path)
        rows.append({"image_id": f"scene_{i:03d}", "image_path": str(path), "caption": scene_caption(i)})
    return pd.DataFrame(rows)


def hand_mask_generator(manifest: pd.DataFrame):
    """``(PIL image, image_id) -> masks`` answering each scene by its pixels (so the image, not the id, decides)."""
    by_bytes = {draw_scene(i).tobytes(): i for i in range(len(manifest))}

    def generate(image: Image.Image, image_id: str) -> list[np.ndarray]:
        return scene_masks(by_bytes[image.tobytes()], image.width, image.height)

    return generate


def save_micro_model(path, seed: int = 0):
    from hnclip.models import create_model, save_model

    model = create_model("micro", context_length=77, seed=seed)
    save_model(model, path)
    return model


def build_products(tmp_path, n: int = 8, max_pairs: int = 3):
    """(manifest, store_dir, model_dir, segments_dir, edges_dir) for n scenes and the micro model."""
    from hnclip.data.image_store import build_store
    from hnclip.preprocess.edges import build_edges
    from hnclip.preprocess.segments import build_segments

    manifest = make_scenes(tmp_path / "bench", n)
    save_micro_model(tmp_path / "model")
    build_store(manifest, tmp_path / "store", image_size=32)
    build_segments(manifest, tmp_path / "model", tmp_path / "segments", max_pairs=max_pairs, device="cpu",
                   mask_generator=hand_mask_generator(manifest))
    build_edges(tmp_path / "store", tmp_path / "segments", tmp_path / "edges", low=50, high=100)
    return manifest, tmp_path / "store", tmp_path / "model", tmp_path / "segments", tmp_path / "edges"


# ------------------------------------------------------------------------------------ framework helpers
def prepared_framework(products, **overrides):
    """(framework, model, data, store) for the products, the framework built and prepared as train_model does."""
    from hnclip.config.train import TrainConfig
    from hnclip.data.image_store import ImageStore
    from hnclip.frameworks import build_framework
    from hnclip.models import load_model
    from hnclip.training.inputs import load_training_set

    manifest, store_dir, model_dir, segments_dir, edges_dir = products
    cfg = TrainConfig(**{"device": "cpu", "micro_batch": 4, "accum_steps": 1, **overrides})
    store = ImageStore(store_dir)
    model = load_model(model_dir)
    data = load_training_set(manifest, store, cfg.caption_column, "test manifest")
    data.tokens = model.tokenize(data.captions)
    framework = build_framework(cfg, model)
    framework.prepare(data, {"segments": segments_dir / "index.json", "edges": edges_dir / "index.json"},
                      model.tokenize)
    return framework, model, data, store


def micro_batch(framework, model, data, store, positions, epoch: int = 0):
    from hnclip.data.image_store import to_model_input
    from hnclip.frameworks import Batch

    positions = torch.as_tensor(positions, dtype=torch.long)
    pixels = to_model_input(store.read(data.store_rows[positions.numpy()]), model.image_mean, model.image_std)
    return Batch(pixels, data.tokens[positions], positions, epoch=epoch,
                 extras=framework.batch_extras(positions, torch.device("cpu")))


def objective(framework, model, batch) -> torch.Tensor:
    return sum(framework.loss_terms(framework.encode(model, batch), batch).values())


def train_steps(framework, model, batch, steps: int = 10, lr: float = 3e-3) -> tuple[float, float]:
    """(objective before, after) ``steps`` AdamW steps on one fixed micro-batch."""
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    model.train()
    with torch.no_grad():
        before = float(objective(framework, model, batch))
    for _ in range(steps):
        optimizer.zero_grad()
        objective(framework, model, batch).backward()
        optimizer.step()
    with torch.no_grad():
        after = float(objective(framework, model, batch))
    return before, after


def naive_infonce(a: torch.Tensor, b: torch.Tensor, scale: float) -> float:
    """Symmetric InfoNCE written pair by pair in float64 (row i's positive is column i)."""
    a, b = a.double(), b.double()
    n = a.shape[0]
    total = 0.0
    for i in range(n):
        row = [scale * float(a[i] @ b[j]) for j in range(n)]
        col = [scale * float(b[i] @ a[j]) for j in range(n)]
        for logits in (row, col):
            peak = max(logits)
            total += -(logits[i] - peak - np.log(sum(np.exp(v - peak) for v in logits)))
    return total / (2 * n)


def reference_states(model, images, tokens):
    """float64 forward written out module by module: (model copy, pre-ln_post image states, pre-ln_final
    text states over all positions; causal attention makes the unused tail irrelevant)."""
    import copy

    m = copy.deepcopy(model).double().eval()
    clip, visual = m.clip, m.clip.visual
    with torch.no_grad():
        image_states = visual.transformer(visual._embeds(images.double()))
        length = tokens.shape[1]
        x = clip.token_embedding(tokens) + m.positional_embedding()[:length]
        text_states = clip.transformer(x, attn_mask=clip.attn_mask[:length, :length])
    return m, image_states, text_states
