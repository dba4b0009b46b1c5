"""The embedded default's benchmark: procedurally rendered scenes with long, near-duplicate captions.

Every scene is a background plus 4-7 objects on a 3x3 grid; every caption enumerates every object
(size, fill pattern, colour, shape, grid cell) and a chain of pairwise spatial relations, always in the
same template. So captions share most of their words, like DOCCI's, which is what makes the HN margin
matter; yet each caption determines its image, because it names every object and scenes are unique.

A benchmark may be a narrow slice of its family (``inventory``, ``backgrounds``): every scene draws its
objects from the same few (colour, shape) kinds on the same background, so scenes recombine shared
elements (the paper's A.2 on DOCCI: "the captions describe different images while recombining shared
elements") and differ in which kinds appear, where, how large and how filled. The pretraining pool
(:func:`sample_pool`) stays the whole family, where such recombinations seldom meet in a batch: the
backbone comes to the benchmark with its captions crowded together and the binding of kinds to cells
unlearned, and every random micro-batch holds near-duplicates (the embedded default's regime,
README "What the embedded default shows").

Scenes may also come in clusters of near-duplicates (``cluster_size`` scenes: a base scene and variants
that each differ from it in one or two details: one object's colour, shape, size, fill pattern or
cell); a cluster never straddles two splits.

Two families share the task but not the distribution: ``synthetic`` (solid pale backgrounds, one
phrasing) and ``synthetic_shift`` (gradient and noise backgrounds, some shapes and colours of its own,
another phrasing), the transfer target.

The generator writes its own "publisher format", read back by :func:`load_synthetic` like any other
benchmark: ``images/<image_id>.png``, ``captions.jsonl`` (one record per image) and ``README.txt``.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image, ImageChops, ImageDraw, ImageFilter
from tqdm import tqdm

from hnclip.data import SPLITS
from hnclip.data.roots import claim_root

__all__ = [
    "FAMILIES",
    "POOL_SLICE_SEED",
    "PoolSlices",
    "STYLES",
    "Scene",
    "SceneObject",
    "Slice",
    "DETAILS",
    "family_slice",
    "describe_scene",
    "describe_scene_pool",
    "describe_scene_short",
    "generate_synthetic",
    "iter_scenes",
    "read_records",
    "load_synthetic",
    "load_synthetic_shift",
    "render_scene",
    "sample_pool",
    "sample_scene",
    "scene_from_record",
    "vary_scene",
]

FAMILIES = ("synthetic", "synthetic_shift")
CAPTIONS_FILE = "captions.jsonl"
IMAGES_DIR = "images"
README_FILE = "README.txt"
_README_HEAD = "hnclip synthetic dense-caption benchmark"
FORMAT_VERSION = 3  # 2: near-duplicate clusters (``cluster`` field); 3: val split, narrow slices

SIZES = ("small", "medium", "large")
PATTERNS = ("solid", "striped", "dotted", "outlined")
# Object diameter as a fraction of a grid cell: "small" stays ~10 px wide when a 128 px scene is
# resized to 64 px, about the smallest a pattern is still visible at.
SIZE_FRACTION = {"small": 0.5, "medium": 0.7, "large": 0.9}
MIN_OBJECTS, MAX_OBJECTS = 4, 7
NUMBER_WORDS = {4: "four", 5: "five", 6: "six", 7: "seven"}
# What a near-duplicate variant may change about one object.
DETAILS = ("colour", "shape", "size", "pattern", "cell")
# Scenes are drawn at this multiple of the output size and box-filtered down: cheap anti-aliasing.
SUPERSAMPLE = 2


@dataclass(frozen=True)
class FamilyStyle:
    """A family's vocabulary: what can appear in its scenes and the words its captions use."""

    shapes: tuple[str, ...]
    colours: dict[str, tuple[int, int, int]]
    # caption phrase -> ("solid", rgb) | ("gradient", rgb_from, rgb_to, axis) | ("noise", rgb, amplitude)
    backgrounds: dict[str, tuple]
    size_words: dict[str, str]
    pattern_words: dict[str, str]
    cell_words: tuple[str, ...]  # the 9 grid cells in reading order
    relation_words: dict[tuple[int, int], str]  # (sign of row offset, sign of column offset) -> phrase


# Picked so every pair within a family differs by >= 45 levels per channel on average, so colours stay
# distinguishable on outlines a pixel wide after a resize to 64 px.
_SHARED_COLOURS = {
    "red": (220, 30, 30), "orange": (255, 120, 0), "yellow": (235, 225, 20), "green": (30, 160, 40),
    "blue": (30, 80, 230), "purple": (130, 40, 180),
}

STYLES: dict[str, FamilyStyle] = {
    "synthetic": FamilyStyle(
        shapes=("circle", "square", "triangle", "star", "ring", "cross", "diamond", "hexagon"),
        colours={**_SHARED_COLOURS, "pink": (255, 120, 200), "brown": (120, 70, 20), "black": (20, 20, 20)},
        backgrounds={
            "white": ("solid", (250, 250, 250)), "light gray": ("solid", (215, 215, 215)),
            "beige": ("solid", (238, 225, 200)), "pale blue": ("solid", (210, 228, 245)),
            "pale green": ("solid", (215, 240, 215)),
        },
        size_words={"small": "small", "medium": "medium", "large": "large"},
        pattern_words={"solid": "solid", "striped": "striped", "dotted": "dotted", "outlined": "outlined"},
        cell_words=("top left corner", "top middle", "top right corner", "middle left", "center",
                    "middle right", "bottom left corner", "bottom middle", "bottom right corner"),
        relation_words={
            (0, -1): "to the left of", (0, 1): "to the right of", (-1, 0): "above", (1, 0): "below",
            (-1, -1): "above and to the left of", (-1, 1): "above and to the right of",
            (1, -1): "below and to the left of", (1, 1): "below and to the right of",
        },
    ),
    "synthetic_shift": FamilyStyle(
        shapes=("circle", "square", "triangle", "star", "ring", "cross", "pentagon", "crescent", "heart",
                "arrow"),
        colours={**_SHARED_COLOURS, "teal": (0, 140, 150), "magenta": (210, 0, 200), "lime": (120, 230, 60),
                 "navy": (20, 30, 110)},
        backgrounds={
            "a vertical peach to lavender gradient": ("gradient", (250, 220, 195), (220, 210, 245), 0),
            "a horizontal mint to cream gradient": ("gradient", (205, 240, 225), (250, 245, 220), 1),
            "a vertical sky to white gradient": ("gradient", (190, 220, 245), (252, 252, 252), 0),
            "a grainy gray noise texture": ("noise", (205, 205, 205), 28),
            "a grainy sand noise texture": ("noise", (230, 215, 180), 28),
        },
        size_words={"small": "little", "medium": "mid-sized", "large": "big"},
        pattern_words={"solid": "painted solid", "striped": "filled with stripes", "dotted": "covered in dots",
                       "outlined": "drawn only as an outline"},
        cell_words=("upper left corner", "top edge", "upper right corner", "left edge", "center of the image",
                    "right edge", "lower left corner", "bottom edge", "lower right corner"),
        relation_words={
            (0, -1): "left of", (0, 1): "right of", (-1, 0): "higher than", (1, 0): "lower than",
            (-1, -1): "up and left of", (-1, 1): "up and right of",
            (1, -1): "down and left of", (1, 1): "down and right of",
        },
    ),
}


@dataclass(frozen=True)
class SceneObject:
    shape: str
    colour: str
    size: str  # one of SIZES
    pattern: str  # one of PATTERNS
    cell: int  # 0..8, reading order on the 3x3 grid


@dataclass(frozen=True)
class Scene:
    family: str
    background: str  # a key of the family's ``backgrounds``
    objects: tuple[SceneObject, ...]  # in reading order of their cells
    relations: tuple[tuple[int, int], ...]  # (i, j): "object i is <relation> object j" in the caption
    texture_seed: int  # noise backgrounds only; not part of the caption

    def signature(self) -> tuple:
        """What the caption determines: two scenes with equal signatures would share a caption."""
        return self.background, self.objects


# --------------------------------------------------------------------------------------------- sampling

@dataclass(frozen=True)
class Slice:
    """What a benchmark's scenes may contain: (colour, shape) kinds, background names, the range of
    object counts and the fill patterns; None = the family's all."""

    kinds: tuple[tuple[str, str], ...] | None = None
    backgrounds: tuple[str, ...] | None = None
    objects: tuple[int, int] | None = None
    patterns: tuple[str, ...] | None = None


def family_slice(family: str, inventory: int = 0, backgrounds: int = 0, seed: int = 0,
                 objects: tuple[int, int] | None = None, patterns=None) -> Slice:
    """A narrow slice of ``family``: ``inventory`` of its (colour, shape) kinds, ``backgrounds`` of its
    backgrounds (0 keeps all), ``objects`` (min, max) objects a scene and ``patterns`` (names; None or
    empty keeps all).

    The kinds and backgrounds are a pure function of (family, sizes, seed), drawn from a stream labelled
    ``slice`` that no scene uses. An inventory needs at least as many kinds as a scene holds objects.
    """
    style = _style(family)
    every_kind = [(c, s) for c in style.colours for s in style.shapes]
    for name, value, most in (("inventory", inventory, len(every_kind)), ("backgrounds", backgrounds,
                                                                          len(style.backgrounds))):
        if not isinstance(value, int) or not 0 <= value <= most:
            raise ValueError(f"{name} must be an int in [0, {most}] for family {family!r}, got {value!r}")
    low, high = objects or (MIN_OBJECTS, MAX_OBJECTS)
    if not (isinstance(low, int) and isinstance(high, int) and MIN_OBJECTS <= low <= high <= MAX_OBJECTS):
        raise ValueError(f"objects must be [min, max] within [{MIN_OBJECTS}, {MAX_OBJECTS}], got {objects!r}")
    if 0 < inventory < high:
        raise ValueError(f"inventory must be 0 or >= {high} (a scene holds up to {high} distinct kinds), "
                         f"got {inventory}")
    unknown = sorted(set(patterns or ()) - set(PATTERNS))
    if unknown:
        raise ValueError(f"unknown pattern(s) {unknown}; known: {', '.join(PATTERNS)}")
    rng = random.Random(f"{family}:slice:{seed}")
    kinds = tuple(rng.sample(every_kind, inventory)) if inventory else None
    chosen = tuple(rng.sample(sorted(style.backgrounds), backgrounds)) if backgrounds else None
    return Slice(kinds, chosen, (low, high) if objects else None,
                 tuple(p for p in PATTERNS if p in patterns) if patterns else None)


def sample_scene(family: str, rng: random.Random, where: Slice = Slice()) -> Scene:
    """Draw one scene of ``family`` (within ``where``); (colour, shape) pairs are unique in a scene so
    relations are unambiguous."""
    style = _style(family)
    n = rng.randint(*(where.objects or (MIN_OBJECTS, MAX_OBJECTS)))
    cells = sorted(rng.sample(range(9), n))
    kinds = rng.sample(list(where.kinds) if where.kinds else [(c, s) for c in style.colours for s in style.shapes], n)
    objects = tuple(
        SceneObject(shape=shape, colour=colour, size=rng.choice(SIZES), pattern=rng.choice(where.patterns or PATTERNS),
                    cell=cell)
        for cell, (colour, shape) in zip(cells, kinds, strict=True)
    )
    order = rng.sample(range(n), n)  # a random chain through all objects: n - 1 relations
    relations = tuple((order[k], order[k + 1]) for k in range(n - 1))
    background = rng.choice(list(where.backgrounds) if where.backgrounds else sorted(style.backgrounds))
    return Scene(family, background, objects, relations, rng.getrandbits(32))


def vary_scene(scene: Scene, rng: random.Random, n_changes: int = 1, where: Slice = Slice()) -> Scene:
    """A near-duplicate of ``scene``: ``n_changes`` distinct (object, detail) pairs changed.

    A detail is one of :data:`DETAILS`; a new colour or shape keeps (colour, shape) pairs unique in the
    scene and a new cell is an empty one, so the caption stays unambiguous. The relation chain links the
    same objects as before (its words follow the new cells), and objects stay in reading order.
    """
    style = _style(scene.family)
    if not 1 <= n_changes <= len(scene.objects) * len(DETAILS):
        raise ValueError(f"n_changes must lie in [1, {len(scene.objects) * len(DETAILS)}], got {n_changes}")
    objects = list(scene.objects)
    for index, detail in rng.sample([(i, d) for i in range(len(objects)) for d in DETAILS], n_changes):
        obj = objects[index]
        kinds = {(o.colour, o.shape) for o in objects}
        allowed = set(where.kinds) if where.kinds else None
        if detail == "colour":
            choices = [c for c in style.colours if (c, obj.shape) not in kinds
                       and (allowed is None or (c, obj.shape) in allowed)]
            detail = "colour" if choices else "size"
            value = {"colour": rng.choice(choices)} if choices else None
        elif detail == "shape":
            choices = [s for s in style.shapes if (obj.colour, s) not in kinds
                       and (allowed is None or (obj.colour, s) in allowed)]
            detail = "shape" if choices else "size"
            value = {"shape": rng.choice(choices)} if choices else None
        elif detail == "pattern" and where.patterns and len(where.patterns) == 1:
            detail = "size"  # a slice with one fill pattern varies no pattern
        if detail == "size":
            value = {"size": rng.choice([s for s in SIZES if s != obj.size])}
        elif detail == "pattern":
            value = {"pattern": rng.choice([p for p in where.patterns or PATTERNS if p != obj.pattern])}
        elif detail == "cell":
            value = {"cell": rng.choice(sorted(set(range(9)) - {o.cell for o in objects}))}
        objects[index] = replace(obj, **value)
    order = sorted(range(len(objects)), key=lambda i: objects[i].cell)  # reading order again
    new_index = {old: new for new, old in enumerate(order)}
    relations = tuple((new_index[i], new_index[j]) for i, j in scene.relations)
    return Scene(scene.family, scene.background, tuple(objects[i] for i in order), relations, scene.texture_seed)


def _sample_cluster(family: str, rng: random.Random, size: int, max_changes: int, where: Slice) -> list[Scene]:
    """A base scene and ``size - 1`` variants of it, each with 1..``max_changes`` details changed."""
    base = sample_scene(family, rng, where)
    return [base] + [vary_scene(base, rng, rng.randint(1, max_changes), where) for _ in range(size - 1)]


def iter_scenes(family: str, split: str, count: int, seed: int, cluster_size: int = 1, max_changes: int = 2,
                seen: set | None = None, where: Slice = Slice()):
    """Yield ``(index, cluster, scene)`` for ``count`` scenes of ``split``, cluster by cluster.

    Every cluster has its own random stream, so a split does not depend on the other split's size. A
    scene whose signature is in ``seen`` (updated in place) is a repeat: its whole cluster is redrawn
    with the next attempt's stream. The last cluster is cut short when ``cluster_size`` does not divide
    ``count``.
    """
    seen = set() if seen is None else seen
    index = 0
    for cluster in range(math.ceil(count / cluster_size)):
        size = min(cluster_size, count - index)
        attempt = 0
        while True:
            scenes = _sample_cluster(family, _scene_rng(family, seed, split, cluster, attempt), size, max_changes,
                                     where)
            signatures = [scene.signature() for scene in scenes]
            if len(set(signatures)) == size and not seen.intersection(signatures):
                break
            attempt += 1
        seen.update(signatures)
        for scene in scenes:
            yield index, cluster, scene
            index += 1


@dataclass(frozen=True)
class PoolSlices:
    """Draw each pool scene from one of ``count`` narrow slices of its family (:func:`family_slice` with
    ``inventory`` kinds, ``backgrounds`` backgrounds and ``objects`` (min, max) objects, seeds
    :data:`POOL_SLICE_SEED` + k): scenes of one slice share their kinds, so a pretraining batch holds
    negatives that differ only in which kind sits where, and the binding of kinds to cells is learned."""

    count: int
    inventory: int
    objects: tuple[int, int] = (MIN_OBJECTS, MAX_OBJECTS)
    backgrounds: int = 1


POOL_SLICE_SEED = 1000  # the pool's slices: seeds no benchmark's slice uses by default (0-999)


def sample_pool(family: str | dict[str, float], count: int, seed: int, exclude: set,
                slices: PoolSlices | None = None) -> list[Scene]:
    """``count`` independent scenes (no clusters) whose signatures avoid ``exclude`` and each other.

    The pretraining pool: fresh scenes drawn like the benchmarks', from streams labelled ``pool`` that
    no benchmark split uses; ``exclude`` holds the benchmarks' signatures, so that not one pretraining
    scene is a training or test scene of a benchmark, whatever the seeds. ``family``: one family, or
    {family: share} (each scene's family drawn with these weights from its own stream); ``slices``: draw
    each scene within one of its family's narrow slices (:class:`PoolSlices`), else from the whole family.
    """
    shares = {family: 1.0} if isinstance(family, str) else dict(sorted(family.items()))
    for name, share in shares.items():
        _style(name)
        if not share > 0:
            raise ValueError(f"pool share of family {name!r} must be > 0, got {share!r}")
    names, total = list(shares), sum(shares.values())
    cumulative = np.cumsum([shares[n] / total for n in names])
    slice_of = lru_cache(maxsize=None)(
        lambda name, k: family_slice(name, slices.inventory, slices.backgrounds, POOL_SLICE_SEED + k,
                                     tuple(slices.objects)))
    seen = set(exclude)
    scenes = []
    for index in range(count):
        name = names[0] if len(names) == 1 else names[int(np.searchsorted(
            cumulative, random.Random(f"pool:{seed}:{index}:family").random(), side="right").clip(max=len(names) - 1))]
        where = (slice_of(name, random.Random(f"{name}:pool:{seed}:{index}:slice").randrange(slices.count))
                 if slices else Slice())
        attempt = 0
        scene = sample_scene(name, random.Random(f"{name}:pool:{seed}:{index}:{attempt}"), where)
        while scene.signature() in seen:
            attempt += 1
            scene = sample_scene(name, random.Random(f"{name}:pool:{seed}:{index}:{attempt}"), where)
        seen.add(scene.signature())
        scenes.append(scene)
    return scenes


def scene_from_record(record: dict) -> Scene:
    """The (caption-determined) part of a scene from its ``captions.jsonl`` record, for signatures.

    Relations and the noise texture are not stored; they do not enter :meth:`Scene.signature`.
    """
    objects = tuple(SceneObject(**o) for o in record["objects"])
    return Scene(record["family"], record["background"], objects, (), 0)


def _style(family: str) -> FamilyStyle:
    if family not in STYLES:
        raise ValueError(f"unknown synthetic family {family!r}; known: {', '.join(FAMILIES)}")
    return STYLES[family]


# --------------------------------------------------------------------------------------------- captions

def _relation(scene: Scene, i: int, j: int) -> str:
    a, b = scene.objects[i], scene.objects[j]
    d_row = (a.cell // 3 > b.cell // 3) - (a.cell // 3 < b.cell // 3)
    d_col = (a.cell % 3 > b.cell % 3) - (a.cell % 3 < b.cell % 3)
    return _style(scene.family).relation_words[(d_row, d_col)]


def _two_largest(scene: Scene) -> list[SceneObject]:
    return sorted(scene.objects, key=lambda o: -SIZES.index(o.size))[:2]  # stable: ties in reading order


def describe_scene(scene: Scene) -> str:
    """The long (dense) caption: every object with its attributes and cell, then the relation chain."""
    style = _style(scene.family)
    n_words = NUMBER_WORDS[len(scene.objects)]
    if scene.family == "synthetic":
        parts = [f"A synthetic scene on a {scene.background} background with {n_words} objects arranged "
                 f"on a three by three grid."]
        parts += [f"In the {style.cell_words[o.cell]} there is a {style.size_words[o.size]} "
                  f"{style.pattern_words[o.pattern]} {o.colour} {o.shape}." for o in scene.objects]
        for i, j in scene.relations:
            a, b = scene.objects[i], scene.objects[j]
            parts.append(f"The {a.colour} {a.shape} is {_relation(scene, i, j)} the {b.colour} {b.shape}.")
        return " ".join(parts)
    parts = [f"This image shows {n_words} shapes over {scene.background}."]
    parts += [f"At the {style.cell_words[o.cell]} sits a {style.size_words[o.size]} {o.colour} {o.shape} "
              f"{style.pattern_words[o.pattern]}." for o in scene.objects]
    relations = [f"the {scene.objects[i].colour} {scene.objects[i].shape} lies {_relation(scene, i, j)} the "
                 f"{scene.objects[j].colour} {scene.objects[j].shape}" for i, j in scene.relations]
    parts.append("Relative placement: " + "; ".join(relations) + ".")
    return " ".join(parts)


# The pretraining pool's own words: the same facts as a benchmark caption (every object with its size, fill,
# colour, shape and cell, then the relation chain) in another template with other cell and relation phrases,
# as ShareGPT4V's generated captions describe images otherwise than DOCCI's people do. A benchmark's phrasing
# is then something its fine-tuning adapts to, not something the backbone already knows.
POOL_CELL_WORDS = ("upper left", "upper centre", "upper right", "centre left", "middle", "centre right",
                   "lower left", "lower centre", "lower right")
POOL_RELATION_WORDS = {
    (0, -1): "west of", (0, 1): "east of", (-1, 0): "north of", (1, 0): "south of",
    (-1, -1): "north-west of", (-1, 1): "north-east of", (1, -1): "south-west of", (1, 1): "south-east of",
}


def describe_scene_pool(scene: Scene) -> str:
    """The long caption in the pretraining pool's phrasing (:data:`POOL_CELL_WORDS`), for either family."""
    style = _style(scene.family)
    objects = "; ".join(f"{POOL_CELL_WORDS[o.cell]}: {style.size_words[o.size]} {style.pattern_words[o.pattern]} "
                        f"{o.colour} {o.shape}" for o in scene.objects)
    relations = []
    for i, j in scene.relations:
        a, b = scene.objects[i], scene.objects[j]
        d_row = (a.cell // 3 > b.cell // 3) - (a.cell // 3 < b.cell // 3)
        d_col = (a.cell % 3 > b.cell % 3) - (a.cell % 3 < b.cell % 3)
        relations.append(f"{a.colour} {a.shape} {POOL_RELATION_WORDS[(d_row, d_col)]} {b.colour} {b.shape}")
    return (f"Picture of {NUMBER_WORDS[len(scene.objects)]} shapes over {scene.background}, laid out in a grid of "
            f"three rows. {objects}. Layout: {', '.join(relations)}.")


def describe_scene_short(scene: Scene) -> str:
    """One sentence under 20 words (the two largest objects), for the 77-token "pretraining" stage."""
    style = _style(scene.family)
    a, b = (f"{style.size_words[o.size]} {o.colour} {o.shape}" for o in _two_largest(scene))
    if scene.family == "synthetic":
        return f"A {a} and a {b} on a {scene.background} background."
    return f"Mainly a {a} and a {b} over {scene.background}."


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


# --------------------------------------------------------------------------------------------- files

def _scene_rng(family: str, seed: int, split: str, index: int, attempt: int) -> random.Random:
    # A per-scene seed (not one stream) keeps the test split independent of n_train. str seeds are
    # hashed with SHA-512 by random.Random, so this is stable across processes and PYTHONHASHSEED.
    return random.Random(f"{family}:{seed}:{split}:{index}:{attempt}")


def generate_synthetic(root, family: str, n_train: int, n_test: int, image_size: int = 128,
                       seed: int = 0, cluster_size: int = 1, max_changes: int = 2, n_val: int = 0,
                       inventory: int = 0, backgrounds: int = 0, objects=None, patterns=None,
                       root_key: str | None = None) -> None:
    """Write a ``family`` benchmark of ``n_train`` + ``n_val`` + ``n_test`` scenes under ``root``.

    ``root_key``: the config key ``root`` came from, named when the folder is refused (hnclip.data.roots).
    ``inventory`` / ``backgrounds`` (0: all), ``objects`` ([min, max]) and ``patterns`` (names) narrow
    the benchmark to a slice of its family (:func:`family_slice`, seeded by ``seed``). Every split has its own scene streams, so adding a
    validation split leaves the training and test scenes as they were.

    Scenes come in clusters of ``cluster_size`` near-duplicates (1: independent scenes), each variant
    with 1..``max_changes`` details changed from its cluster's base (:func:`vary_scene`); a cluster
    stays within its split. Deterministic in (family, counts, image_size, seed, cluster settings);
    scenes are unique across both splits (a repeat, vanishingly rare, is redrawn with its cluster).
    ``captions.jsonl`` is written last, through a temporary name, so an interrupted run never leaves a
    caption file that points at missing images.
    """
    _style(family)
    # n_train may be 0: the shifted family is an evaluation-only transfer target.
    for name, value, least in (("n_train", n_train, 0), ("n_val", n_val, 0), ("n_test", n_test, 1),
                               ("cluster_size", cluster_size, 1), ("max_changes", max_changes, 1)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if not isinstance(image_size, int) or image_size < 32:
        raise ValueError(f"image_size must be an int >= 32, got {image_size!r}")
    where = family_slice(family, inventory, backgrounds, seed, tuple(objects) if objects else None, patterns)
    # refuse a user's folder before rendering into it (hnclip.data.roots); a root rendered before
    # markers existed is recognised as ours by its README's first line
    root = claim_root(root, f"hnclip fetch --adapter {family}",
                      known=(README_FILE, CAPTIONS_FILE, CAPTIONS_FILE + ".tmp", IMAGES_DIR)
                      if _is_rendered_here(root) else (), key=root_key)
    (root / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    seen: set[tuple] = set()
    records = []
    with tqdm(total=n_train + n_val + n_test, desc=f"rendering {family}", unit="img") as bar:
        for split, count in (("train", n_train), ("val", n_val), ("test", n_test)):
            for index, cluster, scene in iter_scenes(family, split, count, seed, cluster_size, max_changes, seen,
                                                     where):
                image_id = f"{family}_{split}_{index:06d}"
                render_scene(scene, image_size).save(root / IMAGES_DIR / f"{image_id}.png")
                records.append({
                    "image_id": image_id, "split": split, "family": family, "cluster": f"{split}_{cluster:06d}",
                    "caption": describe_scene(scene), "short_caption": describe_scene_short(scene),
                    "background": scene.background, "objects": [asdict(o) for o in scene.objects],
                })
                bar.update()
    (root / README_FILE).write_text(_readme(family, n_train, n_val, n_test, image_size, seed, cluster_size,
                                            max_changes, where), encoding="utf-8")
    tmp = root / (CAPTIONS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, root / CAPTIONS_FILE)


def _is_rendered_here(root) -> bool:
    readme = Path(root) / README_FILE
    try:
        return readme.is_file() and readme.read_text(encoding="utf-8").startswith(_README_HEAD)
    except (OSError, UnicodeDecodeError):
        return False


def read_records(root) -> list[dict]:
    """Every record of a generated benchmark's ``captions.jsonl`` (both splits), in file order."""
    path = Path(root) / CAPTIONS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CAPTIONS_FILE} in {root} (generate it with generate_synthetic)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _readme(family: str, n_train: int, n_val: int, n_test: int, image_size: int, seed: int, cluster_size: int,
            max_changes: int, where: Slice) -> str:
    kinds = ", ".join(f"{c} {s}" for c, s in where.kinds) if where.kinds else "all of the family's"
    backgrounds = ", ".join(where.backgrounds) if where.backgrounds else "all of the family's"
    return f"""{_README_HEAD} (format version {FORMAT_VERSION})

family: {family}
splits: train {n_train} images, val {n_val} images (for choosing recipes), test {n_test} images
object kinds: {kinds}
backgrounds: {backgrounds}
objects per scene: {"{} to {}".format(*(where.objects or (MIN_OBJECTS, MAX_OBJECTS)))}
fill patterns: {", ".join(where.patterns or PATTERNS)}
image size: {image_size} x {image_size} px, RGB PNG
seed: {seed}
near-duplicate clusters: {cluster_size} scenes each (a base scene and variants with 1 to {max_changes}
  details changed: one object's colour, shape, size, fill pattern or cell); a cluster stays in one split

Files
  images/<image_id>.png   one rendered scene per image
  captions.jsonl          one JSON object per line, one line per image, train lines first:
    image_id       str, unique across splits: <family>_<split>_<index>
    split          "train", "val" or "test"
    family         "{family}"
    cluster        str, the near-duplicate cluster: <split>_<cluster index>
    caption        long caption: every object (size, pattern, colour, shape, grid cell) and a chain of
                   pairwise spatial relations
    short_caption  one sentence (< 20 words): the two largest objects and the background
    background     the background, as named in the caption
    objects        list of {{shape, colour, size, pattern, cell}}; cell 0..8 in reading order of the
                   3x3 grid

Procedurally generated by hnclip.data.synthetic.generate_synthetic; regenerate rather than edit.
Toy-scale data: numbers measured on it are toy-scale results.
"""


# --------------------------------------------------------------------------------------------- adapter

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_REQUIRED = ("image_id", "split", "family", "caption", "short_caption")


def load_synthetic(root, split: str) -> pd.DataFrame:
    """Manifest of the ``synthetic`` family's ``split`` (see :func:`_load`)."""
    return _load(Path(root), split, "synthetic")


def load_synthetic_shift(root, split: str) -> pd.DataFrame:
    """Manifest of the ``synthetic_shift`` family's ``split`` (see :func:`_load`)."""
    return _load(Path(root), split, "synthetic_shift")


def _load(root: Path, split: str, family: str) -> pd.DataFrame:
    """Rows of ``split`` in file order: image_id, image_path (absolute), caption, short_caption.

    Errors name the caption file and line: malformed JSON, a missing field, an unknown split, a
    record of another family, an unsafe or repeated image_id, an empty caption, a missing image.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {family!r}; known: {', '.join(SPLITS)}")
    path = root / CAPTIONS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{family!r}: no {CAPTIONS_FILE} in {root} (generate it with generate_synthetic)")
    images = root.resolve() / IMAGES_DIR
    rows, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: malformed JSON ({e.msg} at column {e.colno})") from e
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            missing = [k for k in _REQUIRED if k not in record]
            if missing:
                raise ValueError(f"{where}: record lacks field(s) {missing}")
            image_id = record["image_id"]
            if not isinstance(image_id, str) or not _SAFE_ID.fullmatch(image_id):
                raise ValueError(f"{where}: image_id {image_id!r} is not a plain file name")
            if image_id in seen:
                raise ValueError(f"{where}: duplicate image_id {image_id!r}")
            seen.add(image_id)
            if record["family"] != family:
                raise ValueError(f"{where}: image_id {image_id!r} belongs to family {record['family']!r}, "
                                 f"expected {family!r}")
            if record["split"] not in SPLITS:
                raise ValueError(f"{where}: image_id {image_id!r} has unknown split {record['split']!r}")
            for key in ("caption", "short_caption"):
                if not isinstance(record[key], str) or not record[key].strip():
                    raise ValueError(f"{where}: image_id {image_id!r} has an empty {key}")
            if record["split"] != split:
                continue
            image_path = images / f"{image_id}.png"
            if not image_path.is_file():
                raise FileNotFoundError(f"{where}: image of image_id {image_id!r} is missing: {image_path}")
            rows.append((image_id, str(image_path), record["caption"], record["short_caption"]))
    return pd.DataFrame(rows, columns=["image_id", "image_path", "caption", "short_caption"], dtype=str)
