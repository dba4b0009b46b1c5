"""Synthetic DOCCI-sized JPEGs shared by the image-store benchmarks (made in a temp folder, never kept)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image
from tqdm import tqdm


def write_synthetic_jpegs(folder: Path, n: int, width: int, height: int, seed: int = 0) -> list[Path]:
    """JPEGs whose decode cost resembles photos': smooth colour fields plus sensor-like noise.

    Flat images decode faster than photos and pure noise slower; this mix gives ~0.3 bytes/pixel at
    quality 90, inside the range of DOCCI's and SA-1B's files. Every third image is portrait, so both
    crop directions of ``resize_center_crop`` are exercised.
    """
    rng = np.random.default_rng(seed)
    # one noise field, windows of it per image: drawing fresh noise per image would dominate setup time
    side = max(width, height) + 64
    noise = rng.normal(0.0, 10.0, size=(side, side, 3)).astype(np.int16)
    paths = []
    for i in tqdm(range(n), desc="write JPEGs", unit="img", leave=False):
        w, h = (width, height) if i % 3 else (height, width)
        coarse = Image.fromarray(rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8))
        base = np.asarray(coarse.resize((w, h), Image.Resampling.BICUBIC), dtype=np.int16)
        dy, dx = rng.integers(0, 64, size=2)
        pixels = np.clip(base + noise[dy:dy + h, dx:dx + w], 0, 255).astype(np.uint8)
        path = folder / f"img_{i:05d}.jpg"
        Image.fromarray(pixels).save(path, format="JPEG", quality=90)
        paths.append(path)
    return paths
