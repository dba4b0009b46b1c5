"""The synthetic benchmark (generator, captions, renderer, adapter) and manifest CSV round trips."""

from __future__ import annotations

import dataclasses
import itertools
import json
import random
import re
import shutil

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from hnclip.data import load_benchmark
from hnclip.data import synthetic as syn
from hnclip.data.manifest import read_manifest, write_manifest
from hnclip.data.synthetic import (
    FAMILIES,
    STYLES,
    Scene,
    SceneObject,
    describe_scene,
    describe_scene_short,
    generate_synthetic,
    load_synthetic,
    load_synthetic_shift,
    render_scene,
    sample_scene,
)

LOADERS = {"synthetic": load_synthetic, "synthetic_shift": load_synthetic_shift}
N_TRAIN, N_TEST, SIZE = 6, 3, 64


@pytest.fixture(scope="module")
def benchmarks(tmp_path_factory):
    roots = {}
    for family in FAMILIES:
        roots[family] = tmp_path_factory.mktemp(family)
        generate_synthetic(roots[family], family, N_TRAIN, N_TEST, image_size=SIZE, seed=3)
    return roots


@pytest.fixture
def broken(benchmarks, tmp_path):
    """A writable copy of the ``synthetic`` benchmark and its caption lines, to corrupt."""
    root = tmp_path / "copy"
    shutil.copytree(benchmarks["synthetic"], root)
    return root, (root / "captions.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)


def _scenes(family: str, n: int) -> list[Scene]:
    return [sample_scene(family, random.Random(k)) for k in range(n)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z-]+", text.lower()))


# ------------------------------------------------------------------------------------ generated files

@pytest.mark.parametrize("family", FAMILIES)
def test_generated_benchmark_has_the_requested_counts_and_images(benchmarks, family):
    root = benchmarks[family]
    train, test = LOADERS[family](root, "train"), LOADERS[family](root, "test")
    assert (len(train), len(test)) == (N_TRAIN, N_TEST)
    assert list(train.columns) == ["image_id", "image_path", "caption", "short_caption"]
    ids = list(train["image_id"]) + list(test["image_id"])
    assert len(set(ids)) == len(ids)  # unique across splits
    assert len(set(train["caption"]) | set(test["caption"])) == len(ids)  # each caption names one image
    for path in list(train["image_path"]) + list(test["image_path"]):
        assert path.startswith(str(root.resolve()))
        with Image.open(path) as image:
            assert image.size == (SIZE, SIZE) and image.mode == "RGB"
    lines = [json.loads(line) for line in (root / "captions.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["image_id"] for r in lines] == ids  # rows in file order, train lines first
    assert family in (root / "README.txt").read_text(encoding="utf-8")


@pytest.mark.parametrize("family", FAMILIES)
def test_registry_loads_the_generated_benchmark(benchmarks, family):
    manifest = load_benchmark(family, benchmarks[family], "test")
    pd.testing.assert_frame_equal(manifest, LOADERS[family](benchmarks[family], "test"))


def test_generation_is_deterministic_byte_for_byte(benchmarks, tmp_path):
    generate_synthetic(tmp_path / "again", "synthetic", N_TRAIN, N_TEST, image_size=SIZE, seed=3)
    first, again = benchmarks["synthetic"], tmp_path / "again"
    assert (again / "captions.jsonl").read_bytes() == (first / "captions.jsonl").read_bytes()
    for image in sorted((first / "images").iterdir()):
        assert (again / "images" / image.name).read_bytes() == image.read_bytes(), image.name
    generate_synthetic(tmp_path / "other", "synthetic", N_TRAIN, N_TEST, image_size=SIZE, seed=4)
    assert (tmp_path / "other" / "captions.jsonl").read_bytes() != (first / "captions.jsonl").read_bytes()


def test_test_split_does_not_depend_on_the_train_count(benchmarks, tmp_path):
    generate_synthetic(tmp_path / "small", "synthetic", 2, N_TEST, image_size=SIZE, seed=3)
    pd.testing.assert_frame_equal(load_synthetic(tmp_path / "small", "test").drop(columns="image_path"),
                                  load_synthetic(benchmarks["synthetic"], "test").drop(columns="image_path"))


def test_repeated_scene_is_redrawn(monkeypatch, tmp_path):
    real = syn.sample_scene
    fixed = real("synthetic", random.Random("fixed"))
    calls = []

    def first_three_identical(family, rng, where=None):
        calls.append(1)
        return fixed if len(calls) <= 3 else real(family, rng, where or syn.Slice())

    monkeypatch.setattr(syn.scenes, "sample_scene", first_three_identical)  # where iter_scenes finds it
    generate_synthetic(tmp_path, "synthetic", 3, 1, image_size=SIZE)
    captions = [r["caption"] for r in map(json.loads, (tmp_path / "captions.jsonl").read_text().splitlines())]
    assert captions[0] == describe_scene(fixed)
    assert len(set(captions)) == 4 and len(calls) == 6


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"family": "mnist"}, "mnist"), ({"n_train": -1}, "n_train"), ({"n_test": 0}, "n_test"),
    ({"image_size": 16}, "image_size"), ({"cluster_size": 0}, "cluster_size"), ({"max_changes": 0}, "max_changes"),
])
def test_generate_rejects_bad_arguments(tmp_path, kwargs, match):
    args = {"family": "synthetic", "n_train": 2, "n_test": 1, "image_size": SIZE} | kwargs
    with pytest.raises(ValueError, match=match):
        generate_synthetic(tmp_path, **args)


# ------------------------------------------------------------------------------------ near-duplicate clusters

def _n_details_apart(a: list[dict], b: list[dict]) -> int:
    """Details that differ between two object lists, each object of ``a`` matched greedily to the object of
    ``b`` it shares most details with (with 4+ objects and at most two edits, the edited objects' partners)."""
    keys = ("cell", "colour", "shape", "size", "pattern")
    remaining, changes = list(b), 0
    for obj in a:
        best = max(remaining, key=lambda o: sum(o[k] == obj[k] for k in keys))
        changes += sum(best[k] != obj[k] for k in keys)
        remaining.remove(best)
    return changes


@pytest.mark.parametrize(("cluster_size", "max_changes"), [(4, 2), (3, 1)])
def test_clusters_are_near_duplicates_of_their_base_and_stay_in_one_split(tmp_path, cluster_size, max_changes):
    generate_synthetic(tmp_path, "synthetic", 12, 7, image_size=SIZE, seed=5, cluster_size=cluster_size,
                       max_changes=max_changes)
    records = [json.loads(line) for line in (tmp_path / "captions.jsonl").read_text().splitlines()]
    clusters: dict[str, list[dict]] = {}
    for record in records:
        clusters.setdefault(record["cluster"], []).append(record)
    for name, members in clusters.items():
        assert {m["split"] for m in members} == {name.split("_")[0]}  # never straddles two splits
        base = members[0]
        for variant in members[1:]:
            assert base["background"] == variant["background"] and len(base["objects"]) == len(variant["objects"])
            assert 1 <= _n_details_apart(base["objects"], variant["objects"]) <= max_changes, (base, variant)
            assert variant["caption"] != base["caption"]
    sizes = sorted(len(m) for m in clusters.values())
    expected = [12 % cluster_size or cluster_size, 7 % cluster_size or cluster_size]  # last cluster of a split
    assert sizes.count(cluster_size) == len(clusters) - sum(e != cluster_size for e in expected)
    assert len({r["caption"] for r in records}) == len(records)  # still one caption per scene


def test_variant_changes_exactly_the_requested_number_of_details_and_keeps_captions_unambiguous():
    for k in range(300):
        base = sample_scene("synthetic", random.Random(k))
        n = 1 + k % 2
        variant = syn.vary_scene(base, random.Random(f"v{k}"), n)
        a = [dataclasses.asdict(o) for o in base.objects]
        b = [dataclasses.asdict(o) for o in variant.objects]
        assert _n_details_apart(a, b) <= n  # a colour and a shape change of one object can look like one swap
        assert variant.signature() != base.signature()
        kinds = [(o.colour, o.shape) for o in variant.objects]
        cells = [o.cell for o in variant.objects]
        assert len(set(kinds)) == len(kinds) and cells == sorted(set(cells))
        # the relation chain still links the same objects, by their (possibly new) names
        assert len(variant.relations) == len(base.relations)
        assert describe_scene(variant) != describe_scene(base)


def test_one_scene_clusters_reproduce_independent_scenes(tmp_path):
    generate_synthetic(tmp_path / "one", "synthetic", 5, 3, image_size=SIZE, seed=2, cluster_size=1)
    generate_synthetic(tmp_path / "default", "synthetic", 5, 3, image_size=SIZE, seed=2)
    assert (tmp_path / "one/captions.jsonl").read_bytes() == (tmp_path / "default/captions.jsonl").read_bytes()
    expected = [describe_scene(sample_scene("synthetic", syn._scene_rng("synthetic", 2, "test", i, 0)))
                for i in range(3)]
    assert list(load_synthetic(tmp_path / "one", "test")["caption"]) == expected


# ------------------------------------------------------------------------------------ captions

def test_hand_built_scene_has_the_hand_written_captions():
    objects = (SceneObject("circle", "red", "large", "striped", 0), SceneObject("star", "blue", "small", "solid", 4),
               SceneObject("square", "green", "medium", "dotted", 5),
               SceneObject("ring", "black", "large", "outlined", 8))
    scene = Scene("synthetic", "white", objects, ((0, 1), (2, 1), (3, 2)), 0)
    assert describe_scene(scene) == (
        "A synthetic scene on a white background with four objects arranged on a three by three grid. "
        "In the top left corner there is a large striped red circle. In the center there is a small solid "
        "blue star. In the middle right there is a medium dotted green square. In the bottom right corner "
        "there is a large outlined black ring. The red circle is above and to the left of the blue star. "
        "The green square is to the right of the blue star. The black ring is below the green square.")
    assert describe_scene_short(scene) == "A large red circle and a large black ring on a white background."

    shifted = Scene("synthetic_shift", "a grainy gray noise texture",
                    objects[:3] + (SceneObject("ring", "navy", "large", "outlined", 8),), scene.relations, 0)
    assert describe_scene(shifted) == (
        "This image shows four shapes over a grainy gray noise texture. At the upper left corner sits a big "
        "red circle filled with stripes. At the center of the image sits a little blue star painted solid. "
        "At the right edge sits a mid-sized green square covered in dots. At the lower right corner sits a "
        "big navy ring drawn only as an outline. Relative placement: the red circle lies up and left of the "
        "blue star; the green square lies right of the blue star; the navy ring lies lower than the green "
        "square.")
    assert describe_scene_short(shifted) == "Mainly a big red circle and a big navy ring over a grainy gray noise texture."


@pytest.mark.parametrize("family", FAMILIES)
def test_every_object_appears_in_its_caption_with_all_attributes(family):
    style = STYLES[family]
    for scene in _scenes(family, 200):
        sentences = re.split(r"(?<=\.) ", describe_scene(scene))
        for obj in scene.objects:
            needles = [style.cell_words[obj.cell], style.size_words[obj.size], style.pattern_words[obj.pattern],
                       obj.colour, obj.shape]
            hits = [s for s in sentences if all(re.search(rf"\b{re.escape(n)}\b", s) for n in needles)]
            assert len(hits) == 1, (obj, describe_scene(scene))


@pytest.mark.parametrize("family", FAMILIES)
def test_relation_phrases_agree_with_grid_positions(family):
    for scene in _scenes(family, 200):
        caption = describe_scene(scene)
        assert len(scene.relations) == len(scene.objects) - 1
        for i, j in scene.relations:
            a, b = scene.objects[i], scene.objects[j]
            match = re.search(rf"\bthe {a.colour} {a.shape} (?:is|lies) (.+?) the {b.colour} {b.shape}\b", caption,
                              flags=re.IGNORECASE)
            assert match, (a, b, caption)
            phrase = match.group(1)
            (row_a, col_a), (row_b, col_b) = divmod(a.cell, 3), divmod(b.cell, 3)
            assert ("left" in phrase) == (col_a < col_b) and ("right" in phrase) == (col_a > col_b), phrase
            assert bool(re.search(r"above|higher|up\b", phrase)) == (row_a < row_b), phrase
            assert bool(re.search(r"below|lower|down\b", phrase)) == (row_a > row_b), phrase


@pytest.mark.parametrize("family", FAMILIES)
def test_captions_are_long_short_captions_short_and_both_fit_the_towers(family):
    from open_clip.tokenizer import SimpleTokenizer

    tokenizer = SimpleTokenizer()
    scenes = _scenes(family, 1000)
    assert min(len(describe_scene(s).split()) for s in scenes) >= 60
    assert max(len(describe_scene_short(s).split()) for s in scenes) < 20
    # start and end tokens take 2 of the 248 (long) and 77 (short) positions
    assert max(len(tokenizer.encode(describe_scene(s))) for s in scenes) <= 246
    assert max(len(tokenizer.encode(describe_scene_short(s))) for s in scenes) <= 75


def test_captions_are_near_duplicates_within_a_family_and_differ_across_families():
    words = {f: [_words(describe_scene(s)) for s in _scenes(f, 120)] for f in FAMILIES}

    def mean_jaccard(pairs):
        return float(np.mean([len(a & b) / len(a | b) for a, b in pairs]))

    within = {f: mean_jaccard(itertools.combinations(w, 2)) for f, w in words.items()}
    across = mean_jaccard(itertools.product(words["synthetic"], words["synthetic_shift"]))
    assert min(within.values()) >= 0.5, within  # DOCCI-like: most words shared between captions
    assert across < min(within.values()) - 0.2, (within, across)


def test_shift_family_has_its_own_shapes_colours_and_backgrounds():
    base, shift = STYLES["synthetic"], STYLES["synthetic_shift"]
    assert set(shift.shapes) - set(base.shapes) and set(shift.shapes) & set(base.shapes)
    assert set(shift.colours) - set(base.colours) and set(shift.colours) & set(base.colours)
    assert {spec[0] for spec in base.backgrounds.values()} == {"solid"}
    assert {spec[0] for spec in shift.backgrounds.values()} == {"gradient", "noise"}
    used = {o.shape for s in _scenes("synthetic_shift", 100) for o in s.objects}
    assert used - set(base.shapes)  # shift-only shapes actually occur


# ------------------------------------------------------------------------------------ rendering

def _cell_at_64(scene: Scene, cell: int) -> np.ndarray:
    small = np.asarray(render_scene(scene, 128).resize((64, 64), Image.Resampling.BICUBIC), dtype=np.float64)
    row, col = divmod(cell, 3)
    return small[int(row * 64 / 3):int((row + 1) * 64 / 3), int(col * 64 / 3):int((col + 1) * 64 / 3)]


def _changed_pixels(a: np.ndarray, b: np.ndarray) -> int:
    return int((np.abs(a - b).mean(axis=-1) > 24).sum())  # a cell at 64 px has ~440 pixels


@pytest.mark.parametrize("family", FAMILIES)
def test_every_attribute_change_is_visible_at_64_px(family):
    style = STYLES[family]
    for background in (sorted(style.backgrounds)[0], sorted(style.backgrounds)[-1]):
        def cell_of(background=background, **attrs):
            obj = {"shape": style.shapes[0], "colour": "red", "size": "small", "pattern": "solid", "cell": 4} | attrs
            return _cell_at_64(Scene(family, background, (SceneObject(**obj),), (), 0), 4)

        empty = _cell_at_64(Scene(family, background, (), (), 0), 4)
        for colour, pattern in itertools.product(style.colours, syn.PATTERNS):
            assert _changed_pixels(cell_of(colour=colour, pattern=pattern), empty) >= 16, (colour, pattern)
        for attr, values in (("shape", style.shapes), ("colour", style.colours), ("size", syn.SIZES)):
            for pattern in syn.PATTERNS:
                for a, b in itertools.combinations(values, 2):
                    changed = _changed_pixels(cell_of(**{attr: a, "pattern": pattern}),
                                              cell_of(**{attr: b, "pattern": pattern}))
                    assert changed >= 16, (background, attr, a, b, pattern)
        for a, b in itertools.combinations(syn.PATTERNS, 2):
            assert _changed_pixels(cell_of(pattern=a), cell_of(pattern=b)) >= 16, (background, a, b)


def test_render_is_pure_and_places_objects_in_their_cells():
    scene = _scenes("synthetic", 1)[0]
    image = render_scene(scene, 96)
    assert image.size == (96, 96) and image.mode == "RGB"
    assert render_scene(scene, 96).tobytes() == image.tobytes()
    pixels = np.asarray(image, dtype=np.float64)
    background = np.asarray(STYLES["synthetic"].backgrounds[scene.background][1], dtype=np.float64)
    for cell in range(9):
        row, col = divmod(cell, 3)
        # the whole cell's largest deviation: an outlined object's interior is background
        block = pixels[row * 32:(row + 1) * 32, col * 32:(col + 1) * 32]
        occupied = np.abs(block - background).max() > 40
        assert occupied == any(o.cell == cell for o in scene.objects), cell


# ------------------------------------------------------------------------------------ adapter errors

def test_malformed_line_error_names_file_and_line(broken):
    root, lines = broken
    lines[2] = '{"image_id": "x", "split": \n'
    (root / "captions.jsonl").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"captions\.jsonl:3: malformed JSON"):
        load_synthetic(root, "train")


def test_missing_image_error_names_line_and_image_id(broken):
    root, lines = broken
    image_id = json.loads(lines[7])["image_id"]
    (root / "images" / f"{image_id}.png").unlink()
    with pytest.raises(FileNotFoundError, match=rf"captions\.jsonl:8: .*{image_id}"):
        load_synthetic(root, "test")
    load_synthetic(root, "train")  # the other split does not need that image


@pytest.mark.parametrize(("field", "value", "match"), [
    ("caption", "  ", r":2: .*empty caption"),
    ("split", "validation", r":2: .*unknown split 'validation'"),
    ("family", "synthetic_shift", r":2: .*family 'synthetic_shift'"),
    ("image_id", "../../etc/passwd", r":2: image_id '\.\./\.\./etc/passwd'"),
    ("image_id", "synthetic_train_000000", r":2: duplicate image_id"),
])
def test_bad_record_error_names_file_line_and_problem(broken, field, value, match):
    root, lines = broken
    record = json.loads(lines[1])
    record[field] = value
    lines[1] = json.dumps(record) + "\n"
    (root / "captions.jsonl").write_text("".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=r"captions\.jsonl" + match):
        load_synthetic(root, "train")


def test_loader_checks_family_split_and_caption_file(benchmarks, tmp_path):
    with pytest.raises(ValueError, match=r":1: .*family 'synthetic_shift', expected 'synthetic'"):
        load_synthetic(benchmarks["synthetic_shift"], "train")
    with pytest.raises(ValueError, match="'dev'"):
        load_synthetic(benchmarks["synthetic"], "dev")
    assert load_synthetic(benchmarks["synthetic"], "val").empty  # generated without a val split
    with pytest.raises(FileNotFoundError, match="captions.jsonl"):
        load_synthetic(tmp_path, "train")


# ------------------------------------------------------------------------------------ manifest CSV

def test_manifest_round_trip_is_exact_for_awkward_text(tmp_path):
    df = pd.DataFrame({
        "image_id": ["000123", "NA", "b,c", "d"],
        "image_path": ["/data/a b.jpg", "/data/é.jpg", "/data/\"q\".jpg", "/data/x.jpg"],
        "caption": ['a "quoted", comma', "line one\nline two", "crlf\r\nend  ", ""],
        "extra": ["null", "  lead", "1.0", "nan"],
    })
    write_manifest(df, tmp_path / "m.csv")
    back = read_manifest(tmp_path / "m.csv")
    assert list(back.columns) == list(df.columns)
    assert back.to_dict("list") == df.to_dict("list")
    assert all(isinstance(v, str) for v in back.to_numpy().ravel())


def test_synthetic_manifest_round_trips_through_csv(benchmarks, tmp_path):
    manifest = load_synthetic(benchmarks["synthetic"], "train")
    write_manifest(manifest, tmp_path / "train.csv")
    assert read_manifest(tmp_path / "train.csv").to_dict("list") == manifest.to_dict("list")


def test_read_manifest_names_file_and_missing_column(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("image_id,caption\na,b\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.csv.*'image_path'"):
        read_manifest(path)
    with pytest.raises(FileNotFoundError, match="absent.csv"):
        read_manifest(tmp_path / "absent.csv")


def test_an_evaluation_only_family_may_have_no_training_scenes(tmp_path):
    generate_synthetic(tmp_path, "synthetic_shift", n_train=0, n_test=3, image_size=32, seed=1)
    assert len(load_synthetic_shift(tmp_path, "test")) == 3
    assert len(load_synthetic_shift(tmp_path, "train")) == 0


# ------------------------------------------------------------------------------------ narrow slices, val split

def test_a_slice_confines_every_scene_to_its_kinds_and_backgrounds_and_the_pool_stays_whole(tmp_path):
    generate_synthetic(tmp_path, "synthetic", 40, 20, image_size=SIZE, seed=5, n_val=10, inventory=8, backgrounds=1)
    records = syn.read_records(tmp_path)
    chosen = syn.family_slice("synthetic", 8, 1, 5)
    assert len(chosen.kinds) == 8 and len(set(chosen.kinds)) == 8 and len(chosen.backgrounds) == 1
    kinds = {(o["colour"], o["shape"]) for r in records for o in r["objects"]}
    assert kinds <= set(chosen.kinds) and len(kinds) >= 7  # 70 scenes of 4-7 objects use (nearly) all 8
    assert {r["background"] for r in records} == set(chosen.backgrounds)
    # README names the slice, so a user sees what the benchmark holds
    readme = (tmp_path / "README.txt").read_text(encoding="utf-8")
    assert chosen.backgrounds[0] in readme and f"{chosen.kinds[0][0]} {chosen.kinds[0][1]}" in readme
    # the pool draws from the whole family: many more kinds, every background
    pool = syn.sample_pool("synthetic", 200, 0, exclude=set())
    assert len({(o.colour, o.shape) for s in pool for o in s.objects}) > 40
    assert len({s.background for s in pool}) == len(STYLES["synthetic"].backgrounds)


def test_slices_are_seeded_and_refuse_sizes_a_scene_cannot_fill():
    assert syn.family_slice("synthetic", 8, 1, 0) == syn.family_slice("synthetic", 8, 1, 0)
    assert syn.family_slice("synthetic", 8, 1, 0) != syn.family_slice("synthetic", 8, 1, 1)
    assert syn.family_slice("synthetic") == syn.Slice()
    with pytest.raises(ValueError, match="inventory must be 0 or >= 7"):
        syn.family_slice("synthetic", 5)
    with pytest.raises(ValueError, match="backgrounds must be an int in"):
        syn.family_slice("synthetic", 0, 99)


def test_val_split_is_held_out_and_leaves_train_and_test_as_they_were(benchmarks, tmp_path):
    generate_synthetic(tmp_path, "synthetic", N_TRAIN, N_TEST, image_size=SIZE, seed=3, n_val=4)
    val = load_synthetic(tmp_path, "val")
    assert len(val) == 4 and val["image_id"].str.startswith("synthetic_val_").all()
    for split in ("train", "test"):
        pd.testing.assert_frame_equal(load_synthetic(tmp_path, split).drop(columns="image_path"),
                                      load_synthetic(benchmarks["synthetic"], split).drop(columns="image_path"))
    captions = {split: set(load_synthetic(tmp_path, split)["caption"]) for split in ("train", "val", "test")}
    assert not captions["val"] & (captions["train"] | captions["test"])


def test_variants_within_a_slice_keep_their_kinds_in_the_inventory():
    where = syn.family_slice("synthetic", 8, 0, 2)
    for k in range(200):
        rng = random.Random(k)
        base = sample_scene("synthetic", rng, where)
        variant = syn.vary_scene(base, rng, 1, where)  # one change always alters the scene
        assert {(o.colour, o.shape) for o in variant.objects} <= set(where.kinds)
        assert variant.signature() != base.signature()


def test_a_slice_fixes_the_object_count_and_fill_patterns_and_variants_respect_them():
    where = syn.family_slice("synthetic", 9, 1, 0, objects=(7, 7), patterns=["solid"])
    scenes = [sample_scene("synthetic", random.Random(k), where) for k in range(100)]
    assert {len(s.objects) for s in scenes} == {7}
    assert {o.pattern for s in scenes for o in s.objects} == {"solid"}
    for k, base in enumerate(scenes):
        variant = syn.vary_scene(base, random.Random(k), 1, where)
        assert {o.pattern for o in variant.objects} == {"solid"} and variant.signature() != base.signature()
    with pytest.raises(ValueError, match="inventory must be 0 or >= 7"):
        syn.family_slice("synthetic", 6, objects=(5, 7))
    assert syn.family_slice("synthetic", 5, objects=(4, 5)).kinds  # five kinds fill scenes of up to five
    with pytest.raises(ValueError, match="objects must be"):
        syn.family_slice("synthetic", objects=(3, 5))
    with pytest.raises(ValueError, match="unknown pattern"):
        syn.family_slice("synthetic", patterns=["plaid"])
