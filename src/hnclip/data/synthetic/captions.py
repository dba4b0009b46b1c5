"""A scene in words: the benchmarks' long caption, the pool's own phrasing and the one-sentence short caption."""

from __future__ import annotations

from hnclip.data.synthetic.scenes import (
    NUMBER_WORDS,
    SIZES,
    Scene,
    SceneObject,
    _style,
)

# --------------------------------------------------------------------------------------------- captions

def _relation(scene: Scene, i: int, j: int) -> str:
    a, b = scene.objects[i], scene.objects[j]
    d_row = (a.cell // 3 > b.cell // 3) - (a.cell // 3 < b.cell // 3)
    d_col = (a.cell % 3 > b.cell % 3) - (a.cell % 3 < b.cell % 3)
    return _style(scene.family).relation_words[(d_row, d_col)]


def _two_largest(scene: Scene) -> list[SceneObject]:
    return sorted(scene.objects, key=lambda o: -SIZES.index(o.size))[:2]  # stable: ties in reading order


def object_sentences(scene: Scene) -> list[str]:
    """Each object's own sentence of the long caption (its cell, size, fill, colour and shape), in the
    objects' order: what describes that object alone (the oracle sentence matcher's pairs)."""
    style = _style(scene.family)
    if scene.family == "synthetic":
        return [f"In the {style.cell_words[o.cell]} there is a {style.size_words[o.size]} "
                f"{style.pattern_words[o.pattern]} {o.colour} {o.shape}." for o in scene.objects]
    return [f"At the {style.cell_words[o.cell]} sits a {style.size_words[o.size]} {o.colour} {o.shape} "
            f"{style.pattern_words[o.pattern]}." for o in scene.objects]


def describe_scene(scene: Scene) -> str:
    """The long (dense) caption: every object with its attributes and cell, then the relation chain."""
    n_words = NUMBER_WORDS[len(scene.objects)]
    if scene.family == "synthetic":
        parts = [f"A synthetic scene on a {scene.background} background with {n_words} objects arranged "
                 f"on a three by three grid."]
        parts += object_sentences(scene)
        for i, j in scene.relations:
            a, b = scene.objects[i], scene.objects[j]
            parts.append(f"The {a.colour} {a.shape} is {_relation(scene, i, j)} the {b.colour} {b.shape}.")
        return " ".join(parts)
    parts = [f"This image shows {n_words} shapes over {scene.background}."]
    parts += object_sentences(scene)
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
