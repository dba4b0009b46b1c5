"""A scene drawn as an image: shapes, fill patterns and backgrounds, supersampled and box-filtered down."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from PIL import Image, ImageChops, ImageDraw, ImageFilter

from hnclip.data.synthetic.scenes import (
    PATTERNS,
    SIZE_FRACTION,
    SUPERSAMPLE,
    Scene,
    _style,
)

# --------------------------------------------------------------------------------------------- rendering

def _regular_polygon(d: int, corners: int, radius: float, rotation: float = -math.pi / 2) -> list:
    c = d / 2
    return [(c + radius * math.cos(rotation + 2 * math.pi * k / corners),
             c + radius * math.sin(rotation + 2 * math.pi * k / corners)) for k in range(corners)]


@lru_cache(maxsize=256)
def _shape_mask(shape: str, d: int) -> Image.Image:
    """A d x d binary ("L") mask of ``shape``; cached because only (shape, size) pairs ever differ."""
    mask = Image.new("L", (d, d), 0)
    draw = ImageDraw.Draw(mask)
    e = d - 1
    if shape == "circle":
        draw.ellipse((0, 0, e, e), fill=255)
    elif shape == "square":  # inset so its area is close to the circle's
        draw.rectangle((0.1 * d, 0.1 * d, 0.9 * d, 0.9 * d), fill=255)
    elif shape == "triangle":
        draw.polygon([(d / 2, 0.03 * d), (0.02 * d, 0.93 * d), (0.98 * d, 0.93 * d)], fill=255)
    elif shape == "star":
        outer, inner = _regular_polygon(d, 5, d / 2), _regular_polygon(d, 5, 0.22 * d, -math.pi / 2 + math.pi / 5)
        draw.polygon([p for pair in zip(outer, inner, strict=True) for p in pair], fill=255)
    elif shape == "ring":
        draw.ellipse((0, 0, e, e), fill=255)
        draw.ellipse((0.25 * d, 0.25 * d, 0.75 * d, 0.75 * d), fill=0)
    elif shape == "cross":
        draw.rectangle((0.32 * d, 0, 0.68 * d, e), fill=255)
        draw.rectangle((0, 0.32 * d, e, 0.68 * d), fill=255)
    elif shape == "diamond":
        draw.polygon([(d / 2, 0), (e, d / 2), (d / 2, e), (0, d / 2)], fill=255)
    elif shape == "hexagon":
        draw.polygon(_regular_polygon(d, 6, d / 2, 0.0), fill=255)
    elif shape == "pentagon":
        draw.polygon(_regular_polygon(d, 5, d / 2), fill=255)
    elif shape == "crescent":
        draw.ellipse((0, 0, e, e), fill=255)
        draw.ellipse((0.38 * d, -0.05 * d, 1.2 * d, 0.85 * d), fill=0)
    elif shape == "heart":
        draw.ellipse((0.02 * d, 0.08 * d, 0.52 * d, 0.58 * d), fill=255)
        draw.ellipse((0.48 * d, 0.08 * d, 0.98 * d, 0.58 * d), fill=255)
        draw.polygon([(0.05 * d, 0.42 * d), (0.95 * d, 0.42 * d), (d / 2, 0.95 * d)], fill=255)
    elif shape == "arrow":
        draw.polygon([(0.02 * d, 0.36 * d), (0.55 * d, 0.36 * d), (0.55 * d, 0.1 * d), (0.98 * d, d / 2),
                      (0.55 * d, 0.9 * d), (0.55 * d, 0.64 * d), (0.02 * d, 0.64 * d)], fill=255)
    else:
        raise ValueError(f"no drawing for shape {shape!r}")
    return mask


@lru_cache(maxsize=256)
def _pattern_masks(shape: str, pattern: str, d: int) -> tuple[Image.Image | None, Image.Image]:
    """(white under-layer mask or None, colour mask) for one object; outlines are the mask minus its erosion."""
    mask = _shape_mask(shape, d)
    if pattern == "solid":
        return None, mask
    width = max(1, round(0.07 * d))
    outline = ImageChops.subtract(mask, mask.filter(ImageFilter.MinFilter(2 * width + 1)))
    if pattern == "outlined":
        return None, outline
    texture = Image.new("L", (d, d), 0)
    draw = ImageDraw.Draw(texture)
    if pattern == "striped":
        period = max(4, round(0.22 * d))
        for y in range(0, d, period):
            draw.rectangle((0, y, d, y + period // 2 - 1), fill=255)
    elif pattern == "dotted":
        spacing, radius = max(4, round(0.28 * d)), max(1, round(0.08 * d))
        for cy in range(spacing // 2, d, spacing):
            for cx in range(spacing // 2, d, spacing):
                draw.ellipse((cx - radius, cy - radius, cx + radius, cy + radius), fill=255)
    else:
        raise ValueError(f"unknown pattern {pattern!r}; known: {', '.join(PATTERNS)}")
    return mask, ImageChops.lighter(ImageChops.multiply(mask, texture), outline)


def _background(spec: tuple, side: int, seed: int) -> Image.Image:
    kind = spec[0]
    if kind == "solid":
        return Image.new("RGB", (side, side), spec[1])
    if kind == "gradient":
        _, start, end, axis = spec
        t = np.linspace(0.0, 1.0, side)[:, None]
        ramp = (1 - t) * np.asarray(start, float) + t * np.asarray(end, float)  # [side, 3]
        pixels = np.broadcast_to(ramp[:, None, :] if axis == 0 else ramp[None, :, :], (side, side, 3))
        return Image.fromarray(np.round(pixels).astype(np.uint8), "RGB")
    if kind == "noise":
        _, base, amplitude = spec
        noise = np.random.default_rng(seed).normal(0.0, amplitude, (side, side, 1))
        return Image.fromarray(np.clip(np.asarray(base, float) + noise, 0, 255).round().astype(np.uint8), "RGB")
    raise ValueError(f"unknown background kind {kind!r}")


def render_scene(scene: Scene, image_size: int = 128) -> Image.Image:
    """Draw ``scene`` as an ``image_size`` square RGB image; a pure function of the scene and the size."""
    style = _style(scene.family)
    side = image_size * SUPERSAMPLE
    canvas = _background(style.backgrounds[scene.background], side, scene.texture_seed)
    cell = side / 3
    for obj in scene.objects:
        d = int(SIZE_FRACTION[obj.size] * cell)
        row, col = divmod(obj.cell, 3)
        left, top = int(col * cell + (cell - d) / 2), int(row * cell + (cell - d) / 2)
        under, over = _pattern_masks(obj.shape, obj.pattern, d)
        if under is not None:
            canvas.paste((255, 255, 255), (left, top, left + d, top + d), under)
        canvas.paste(style.colours[obj.colour], (left, top, left + d, top + d), over)
    return canvas.reduce(SUPERSAMPLE)
