"""benchmarks/toy_prestage.py's n-gram targets (issue 20, condition 5): the fixed caption features the image
tower is pre-staged against must keep the captions' n-gram cosines, and dropping the relation chain must
drop exactly the chain's sentences. References by hand: Counter dot products, sentence lists."""

from __future__ import annotations

import dataclasses
import math
import random
import re
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import toy_prestage  # noqa: E402

from hnclip.data import synthetic as syn  # noqa: E402


class _Data:
    """What ngram_targets reads of a Scenes: its scenes and their count."""

    def __init__(self, scenes):
        self.scenes = scenes
        self.targets = None

    def __len__(self):
        return len(self.scenes)


def _scenes(count: int, seed: int):
    where = syn.family_slice("synthetic", 7, 1, 2, (7, 7), ["solid"])
    return [syn.sample_scene("synthetic", random.Random(f"test-prestage:{seed}:{k}"), where) for k in range(count)]


def _trigram_cosine(a: str, b: str) -> float:
    def grams(text):
        words = re.findall(r"\w+|[^\w\s]", text.lower())
        return Counter(zip(words, words[1:], words[2:], strict=False))

    ga, gb = grams(a), grams(b)
    dot = sum(count * gb[gram] for gram, count in ga.items())
    return dot / math.sqrt(sum(c * c for c in ga.values()) * sum(c * c for c in gb.values()))


@pytest.mark.parametrize("relations", [True, False])
def test_targets_keep_the_trigram_cosines(relations):
    scenes = _scenes(32, 0)
    data = _Data(scenes)
    grams, kept = toy_prestage.ngram_targets([data], 3, 512, relations=relations)
    # 32 captions span at most 32 directions, all kept; the other 480 columns are zero
    assert grams > 32 and kept == [pytest.approx(1.0, abs=1e-9)]
    captions = [syn.describe_scene(s if relations else toy_prestage.without_relations(s)) for s in scenes]
    targets = data.targets.numpy().astype(np.float64)
    assert targets.shape == (32, 512)
    np.testing.assert_allclose(np.linalg.norm(targets, axis=1), 1.0, atol=1e-6)
    for i in range(0, 32, 3):
        for j in range(1, 32, 5):
            assert targets[i] @ targets[j] == pytest.approx(_trigram_cosine(captions[i], captions[j]), abs=1e-5)


def test_what_the_pool_never_says_has_no_direction():
    pool = _Data(_scenes(24, 0))
    other = syn.family_slice("synthetic", 7, 1, 100000, (7, 7), ["solid"])
    elsewhere = _Data([syn.sample_scene("synthetic", random.Random(f"test-prestage:x:{k}"), other) for k in range(8)])
    _, kept = toy_prestage.ngram_targets([pool, elsewhere], 3, 64)
    assert kept[0] == pytest.approx(1.0, abs=1e-9)  # 24 pool rows, 64 columns
    assert 0.2 < kept[1] < 0.999  # the other slice's kinds make trigrams the pool never uses
    assert elsewhere.targets.shape == (8, 64)
    np.testing.assert_allclose(np.linalg.norm(elsewhere.targets.numpy(), axis=1), 1.0, atol=1e-6)


def test_without_relations_drops_only_the_chain():
    scene = _scenes(1, 2)[0]
    full = syn.describe_scene(scene).split(". ")
    bare = syn.describe_scene(toy_prestage.without_relations(scene)).split(". ")
    chain = [f"The {scene.objects[i].colour} {scene.objects[i].shape} is" for i, _ in scene.relations]
    assert len(scene.relations) == 6
    assert all(any(sentence.startswith(start) for sentence in full) for start in chain)
    assert not any(sentence.startswith(start) for start in chain for sentence in bare)
    assert [s.rstrip(".") for s in bare] == [s.rstrip(".") for s in full[:len(bare)]]
    assert len(full) - len(bare) == len(scene.relations)


def test_pool_with_a_share_of_the_slice():
    where = syn.family_slice("synthetic", 7, 1, 2, (7, 7), ["solid"])
    kinds = set(where.kinds)
    mixed = toy_prestage.pool_scenes("family", where, 40, 2, 7, 32, slice_share=0.25)
    on_slice = [s for s in mixed if {(o.colour, o.shape) for o in s.objects} <= kinds]
    assert len(mixed) == 40 and len(on_slice) == 10
    # no share: the whole family's stream, as the runs recorded before the share existed drew it
    plain = toy_prestage.pool_scenes("family", where, 12, 2, 7, 32)
    assert [s.signature() for s in plain] == [
        s.signature() for s in toy_prestage.slice_scenes("synthetic", syn.Slice(), 12, 2, "prestage-pool")]


@pytest.mark.parametrize("source", ["family", "slice"])
def test_unseen_scenes_are_apart_from_the_pool_and_the_distillation(source):
    where = syn.family_slice("synthetic", 7, 1, 2, (7, 7), ["solid"])

    def drawn(offset):
        return {s.signature() for s in toy_prestage.pool_scenes(source, where, 200, 2 + offset, 7, 32)}

    pool, distilled, unseen = drawn(0), drawn(toy_prestage.DISTILL_SEED_OFFSET), drawn(toy_prestage.UNSEEN_SEED_OFFSET)
    assert len(unseen) == 200 and not unseen & pool and not unseen & distilled


def test_unseen_needs_a_text_tower():
    with pytest.raises(SystemExit):
        toy_prestage.main(["--targets", "ngrams", "--unseen", "64", "--ft-at"])


def test_dropping_sizes_reads_every_object_as_medium():
    scene = _scenes(1, 3)[0]
    resized = dataclasses.replace(scene, objects=tuple(
        dataclasses.replace(o, size=syn.SIZES[(syn.SIZES.index(o.size) + 1) % 3]) for o in scene.objects))
    assert syn.describe_scene(resized) != syn.describe_scene(scene)
    # by hand: the caption with each size word replaced by "medium", nothing else changed
    medium = re.sub(r"\b(small|large)\b", "medium", syn.describe_scene(scene))
    assert syn.describe_scene(toy_prestage.without_sizes(scene)) == medium
    kept, dropped = _Data([scene, resized]), _Data([scene, resized])
    toy_prestage.ngram_targets([kept], 3, 64)
    toy_prestage.ngram_targets([dropped], 3, 64, sizes=False)
    assert float(kept.targets[0] @ kept.targets[1]) == pytest.approx(
        _trigram_cosine(syn.describe_scene(scene), syn.describe_scene(resized)), abs=1e-5)
    assert float(kept.targets[0] @ kept.targets[1]) < 0.99
    assert float(dropped.targets[0] @ dropped.targets[1]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("ratio", [0.0, 0.1, 1.0])
def test_fine_tuning_moves_the_text_tower_at_its_ratio(ratio):
    """--ft-text-lr-ratio: 0 leaves every text-tower weight exactly as it was; otherwise the text tower's
    group runs at the ratio of the image tower's rate, and every weight but the logit scale is trained."""
    import torch

    from hnclip.models import create_model

    torch.manual_seed(0)
    model = create_model("micro", seed=0)
    groups = toy_prestage.fine_tune_groups(model, 1e-3, ratio)
    trained = {id(p) for group in groups for p in group["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in trained) == (name != "logit_scale" and (ratio > 0 or name.startswith("clip.visual.")))
    assert [group["lr"] for group in groups] == ([1e-3] if ratio == 0 else [1e-3, pytest.approx(1e-3 * ratio)])

    data = toy_prestage.Scenes(model, _scenes(32, 4))
    texts = toy_prestage.features(model, data)[1].double().numpy()
    tuned = toy_prestage.plain_fine_tune(model, data, toy_prestage.Scenes.subset(data, 16), texts[:16], texts,
                                         float(model.scale().detach()), 1e-3, "test", ratio)
    before, after = dict(model.named_parameters()), dict(tuned.named_parameters())
    text_moved = any(not torch.equal(before[n], after[n]) for n in before
                     if not n.startswith("clip.visual.") and n != "logit_scale")
    image_moved = any(not torch.equal(before[n], after[n]) for n in before if n.startswith("clip.visual."))
    assert image_moved and text_moved == (ratio > 0)
    assert torch.equal(before["logit_scale"], after["logit_scale"])


def test_clustered_scenes_are_groups_of_one_changed_detail():
    """--clusters 4 --max-changes 1: consecutive groups of four distinct scenes on one background, each
    variant the base with exactly one object changed (one detail of one object, the cell included)."""
    where = syn.family_slice("synthetic", 7, 0, 2, (4, 7), ["solid", "striped", "dotted", "outlined"])
    scenes = toy_prestage.clustered_scenes(where, 40, 2, "prestage-probe", 4, 1)
    assert len({s.signature() for s in scenes}) == 40
    for start in range(0, 40, 4):
        base, *variants = scenes[start:start + 4]
        for variant in variants:
            assert variant.background == base.background and len(variant.objects) == len(base.objects)
            kept = Counter(base.objects) & Counter(variant.objects)
            assert sum(kept.values()) == len(base.objects) - 1
    # another stream, other scenes; two clusters' bases differ
    other = toy_prestage.clustered_scenes(where, 40, 2, "prestage-ft", 4, 1)
    assert not {s.signature() for s in other} & {s.signature() for s in scenes}
