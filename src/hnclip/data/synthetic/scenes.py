"""The synthetic benchmark's scenes: the families' styles, the scene model, and how scenes (a benchmark's
slices and clusters, the pretraining pool) are sampled and varied."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

FAMILIES = ("synthetic", "synthetic_shift")

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



def _scene_rng(family: str, seed: int, split: str, index: int, attempt: int) -> random.Random:
    # A per-scene seed (not one stream) keeps the test split independent of n_train. str seeds are
    # hashed with SHA-512 by random.Random, so this is stable across processes and PYTHONHASHSEED.
    return random.Random(f"{family}:{seed}:{split}:{index}:{attempt}")
