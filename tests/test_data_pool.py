"""The pretraining pool: fresh scenes rendered like the benchmark's, never one of the benchmark's scenes."""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from hnclip.data import synthetic as syn
from hnclip.data.image_store import ImageStore, resize_center_crop
from hnclip.data.manifest import read_manifest
from hnclip.data.pool import benchmark_signatures, build_pool
from hnclip.data.prepare import prepare_split

RENDER, SIZE = 64, 32


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench")
    syn.generate_synthetic(root, "synthetic", 12, 8, image_size=RENDER, seed=0, cluster_size=4)
    return root


def test_pool_holds_no_benchmark_scene_and_no_repeat(bench, tmp_path):
    manifest = build_pool([(bench, 1.0, RENDER)], 40, 0, SIZE, tmp_path / "pool.csv", tmp_path / "pool_images")
    family, benchmark = benchmark_signatures(bench)
    assert family == "synthetic" and len(benchmark) == 20
    # independent of the pool's own code path: compare captions, which determine the scene
    bench_captions = {json.loads(line)["caption"] for line in (bench / "captions.jsonl").read_text().splitlines()}
    assert not bench_captions & set(manifest["caption"])
    assert manifest["caption"].nunique() == 40 and manifest["image_id"].nunique() == 40


def test_a_pool_draw_that_repeats_a_benchmark_scene_is_redrawn(bench, tmp_path, monkeypatch):
    record = json.loads((bench / "captions.jsonl").read_text().splitlines()[13])  # a test-split scene
    benchmark_scene = syn.scene_from_record(record)
    real, calls = syn.sample_scene, []

    def first_draw_is_the_test_scene(family, rng, where=None):
        calls.append(1)
        return benchmark_scene if len(calls) == 1 else real(family, rng, where or syn.Slice())

    monkeypatch.setattr(syn.scenes, "sample_scene", first_draw_is_the_test_scene)  # where sample_pool finds it
    manifest = build_pool([(bench, 1.0, RENDER)], 3, 0, SIZE, tmp_path / "pool.csv", tmp_path / "pool_images")
    assert record["caption"] not in set(manifest["caption"]) and len(calls) == 4


def test_pool_pixels_equal_what_prepare_makes_of_the_rendered_png(bench, tmp_path):
    build_pool([(bench, 1.0, RENDER)], 5, 1, SIZE, tmp_path / "pool.csv", tmp_path / "pool_images")
    store = ImageStore(tmp_path / "pool_images")
    manifest = read_manifest(tmp_path / "pool.csv")
    assert store.image_size == SIZE and store.image_ids == list(manifest["image_id"])
    scenes = syn.sample_pool("synthetic", 5, 1, benchmark_signatures(bench)[1])
    for row, scene in enumerate(scenes):
        assert syn.describe_scene(scene) == manifest["caption"][row]
        png = tmp_path / f"{row}.png"
        syn.render_scene(scene, RENDER).save(png)  # the benchmark's path: PNG, then the store's resize
        with Image.open(png) as image:
            expected = np.asarray(resize_center_crop(image.convert("RGB"), SIZE))
        np.testing.assert_array_equal(store.read([row])[0], expected)


def test_pool_is_deterministic_in_its_seed(bench, tmp_path):
    first = build_pool([(bench, 1.0, RENDER)], 6, 3, SIZE, tmp_path / "a.csv", tmp_path / "a")
    again = build_pool([(bench, 1.0, RENDER)], 6, 3, SIZE, tmp_path / "b.csv", tmp_path / "b")
    other = build_pool([(bench, 1.0, RENDER)], 6, 4, SIZE, tmp_path / "c.csv", tmp_path / "c")
    assert list(first["caption"]) == list(again["caption"]) != list(other["caption"])
    np.testing.assert_array_equal(np.load(tmp_path / "a/images.npy"), np.load(tmp_path / "b/images.npy"))


def test_benchmark_store_still_builds_from_the_clustered_benchmark(bench, tmp_path):
    source = {"benchmark": "synthetic", "adapter": "synthetic", "root": str(bench)}
    prepare_split(source, "test", SIZE, tmp_path / "test.csv", tmp_path / "test_images")
    assert len(ImageStore(tmp_path / "test_images")) == 8


def test_pool_rejects_a_bad_count_naming_it(bench, tmp_path):
    with pytest.raises(ValueError, match="pool count"):
        build_pool([(bench, 1.0, RENDER)], 0, 0, SIZE, tmp_path / "p.csv", tmp_path / "p")


def test_scene_signatures_from_records_match_the_generator(bench):
    scenes = [s for _, _, s in syn.iter_scenes("synthetic", "test", 8, 0, 4, 2)]
    assert len({s.signature() for s in scenes} & benchmark_signatures(bench)[1]) == 8


def test_a_pool_of_two_families_draws_each_at_its_share_and_avoids_both_benchmarks(bench, tmp_path_factory, tmp_path):
    shift = tmp_path_factory.mktemp("shift")
    syn.generate_synthetic(shift, "synthetic_shift", 0, 10, image_size=RENDER, seed=1)
    manifest = build_pool([(bench, 0.25, RENDER), (shift, 0.75, RENDER)], 400, 0, SIZE, tmp_path / "pool.csv",
                          tmp_path / "pool_images")
    # the shift family's captions open "This image shows", the synthetic family's "A synthetic scene"
    shifted = manifest["caption"].str.startswith("This image shows").mean()
    assert 0.75 - 0.07 < shifted < 0.75 + 0.07  # 400 Bernoulli(0.75) draws: SD 0.022
    excluded = {r["caption"] for root in (bench, shift) for r in syn.read_records(root)}
    assert not excluded & set(manifest["caption"])


def test_pool_slices_hold_their_scenes_to_a_few_kinds_each():
    slices = syn.PoolSlices(count=3, inventory=7, objects=(4, 7), backgrounds=1)
    scenes = syn.sample_pool("synthetic", 300, 0, set(), slices)
    # each scene's kinds lie within one of the three slices' inventories (family_slice with the pool's seeds)
    inventories = [set(syn.family_slice("synthetic", 7, 1, syn.POOL_SLICE_SEED + k, (4, 7)).kinds) for k in range(3)]
    homes = [[k for k, kinds in enumerate(inventories) if {(o.colour, o.shape) for o in s.objects} <= kinds]
             for s in scenes]
    assert all(homes)
    # and every slice is used (300 uniform draws over 3: none empty but with negligible probability)
    assert {h[0] for h in homes} == {0, 1, 2}
    assert all(4 <= len(s.objects) <= 7 for s in scenes) and len({s.background for s in scenes}) <= 3


def test_benchmark_words_caption_that_share_of_the_pool_in_the_benchmarks_template(bench, tmp_path):
    pool_words = build_pool([(bench, 1.0, RENDER)], 50, 0, SIZE, tmp_path / "a.csv", tmp_path / "a",
                            phrasing="pool")
    mixed = build_pool([(bench, 1.0, RENDER)], 50, 0, SIZE, tmp_path / "b.csv", tmp_path / "b",
                       phrasing="pool", benchmark_words=0.2)
    plain = build_pool([(bench, 1.0, RENDER)], 50, 0, SIZE, tmp_path / "c.csv", tmp_path / "c")
    # the same scenes: only the long captions of the chosen 10 (20 % of 50) change, to the benchmark's words
    assert (mixed["short_caption"] == plain["short_caption"]).all()
    in_benchmark_words = mixed["caption"] == plain["caption"]
    assert in_benchmark_words.sum() == 10
    assert (mixed["caption"][~in_benchmark_words] == pool_words["caption"][~in_benchmark_words]).all()
    assert not (pool_words["caption"] == plain["caption"]).any()


def test_benchmark_words_need_the_pools_phrasing_and_a_share(bench, tmp_path):
    with pytest.raises(ValueError, match="benchmark_words"):
        build_pool([(bench, 1.0, RENDER)], 5, 0, SIZE, tmp_path / "p.csv", tmp_path / "p", benchmark_words=0.5)
    with pytest.raises(ValueError, match="benchmark_words"):
        build_pool([(bench, 1.0, RENDER)], 5, 0, SIZE, tmp_path / "p.csv", tmp_path / "p", phrasing="pool",
                   benchmark_words=1.5)
