"""The pretraining pool: many fresh synthetic scenes with long and short captions, never a benchmark scene.

Long-CLIP-L came from CLIP by a long-caption stage on ShareGPT4V, a large image-caption set separate
from the dense-caption benchmarks it is later fine-tuned and evaluated on. The embedded default mirrors
that with a pool of independent scenes (no near-duplicate clusters) rendered exactly like the
benchmark's: the same renderer at the benchmark's ``image_size``, then the image store's resize to the
backbone's resolution, i.e. the pixels ``hnclip prepare`` would make from the benchmark's PNGs.

A pool may mix families (the transfer target's family too, so the backbone can read it, as Long-CLIP-L
reads Urban-1K) and draw its scenes from narrow slices of each family (:class:`PoolSlices`), so that its
batches hold scenes that differ only in which kind sits where.

The pool is written straight into a manifest and an image store (no PNG files: 60k of them would cost
a minute of encoding and decoding for nothing). Its manifest's ``image_path`` column is empty for that
reason; only the store holds the pixels. Every benchmark scene (both splits) is excluded by signature,
so no pool scene carries a caption of the benchmark.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip.data.image_store import resize_center_crop, write_store
from hnclip.data.manifest import write_manifest
from hnclip.data.synthetic import (
    PoolSlices,
    describe_scene,
    describe_scene_pool,
    describe_scene_short,
    read_records,
    render_scene,
    sample_pool,
    scene_from_record,
)

log = logging.getLogger(__name__)

__all__ = ["PHRASINGS", "benchmark_signatures", "build_pool"]


def benchmark_signatures(root) -> tuple[str, set]:
    """(family, signatures of every scene of both splits) of the generated benchmark at ``root``."""
    records = read_records(root)
    if not records:
        raise ValueError(f"benchmark at {root} has no scenes to exclude from the pool")
    families = {r["family"] for r in records}
    if len(families) != 1:
        raise ValueError(f"benchmark at {root} mixes families {sorted(families)}")
    return families.pop(), {scene_from_record(r).signature() for r in records}


PHRASINGS = ("benchmark", "pool")
BENCHMARK_WORDS_STREAM = 7  # the random stream choosing the scenes in the benchmarks' words, apart from the scenes' own


def build_pool(sources, count: int, seed: int, image_size: int, manifest_path, store_dir,
               slices: PoolSlices | None = None, phrasing: str = "benchmark",
               benchmark_words: float = 0.0) -> pd.DataFrame:
    """Render ``count`` pool scenes; write the manifest and the image store.

    ``sources``: (benchmark root, share, rendered size) per synthetic benchmark: each one's family is drawn
    with its share and rendered at that benchmark's size (its ``synthetic.image_size``), and every scene of
    every listed benchmark (all splits) is excluded. ``image_size`` is the backbone's input resolution;
    ``slices``: draw scenes within narrow slices of their family (:class:`hnclip.data.synthetic.PoolSlices`);
    ``phrasing``: the long captions in the benchmarks' own words, or in the pool's
    (:func:`hnclip.data.synthetic.describe_scene_pool`); ``benchmark_words``: under the pool's phrasing, the
    share of scenes (a seeded draw) whose long captions are in the benchmarks' words all the same, as a web
    corpus holds a few captions written the way a benchmark's annotators write: the knob between a backbone
    that reads the benchmark's captions at once and one that must learn their phrasing in fine-tuning.
    Returns the manifest (image_id, image_path = "", caption, short_caption).
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"pool count must be an int >= 1, got {count!r}")
    if phrasing not in PHRASINGS:
        raise ValueError(f"pool phrasing must be one of {PHRASINGS}, got {phrasing!r}")
    if not 0.0 <= benchmark_words <= 1.0 or (benchmark_words and phrasing != "pool"):
        raise ValueError(f"pool benchmark_words must be in [0, 1] and needs phrasing 'pool', got "
                         f"{benchmark_words!r} with phrasing {phrasing!r}")
    shares, render_sizes, exclude = {}, {}, set()
    for root, share, render_size in sources:
        family, signatures = benchmark_signatures(root)
        if family in shares:
            raise ValueError(f"two pool sources of family {family!r} ({root}): give each family once")
        shares[family], render_sizes[family] = share, render_size
        exclude |= signatures
    scenes = sample_pool(shares, count, seed, exclude, slices)
    overlap = exclude.intersection(s.signature() for s in scenes)
    if overlap:  # sample_pool guarantees this; a check here costs nothing and guards the premise
        raise AssertionError(f"{len(overlap)} pool scenes are benchmark scenes")
    image_ids = [f"pool_{index:06d}" for index in range(count)]
    in_benchmark_words = np.zeros(count, dtype=bool)
    if phrasing == "benchmark":
        in_benchmark_words[:] = True
    elif benchmark_words:
        chosen = np.random.default_rng([seed, BENCHMARK_WORDS_STREAM]).choice(
            count, size=round(benchmark_words * count), replace=False)
        in_benchmark_words[chosen] = True
    manifest = pd.DataFrame({
        "image_id": image_ids,
        "image_path": [""] * count,
        "caption": [describe_scene(s) if plain else describe_scene_pool(s)
                    for s, plain in zip(scenes, in_benchmark_words, strict=True)],
        "short_caption": [describe_scene_short(s) for s in scenes],
    }, dtype=str)
    pixels = (np.asarray(resize_center_crop(render_scene(s, render_sizes[s.family]), image_size), dtype=np.uint8)
              for s in scenes)
    write_store(image_ids, pixels, Path(store_dir), image_size)
    write_manifest(manifest, Path(manifest_path))
    drawn = pd.Series([s.family for s in scenes]).value_counts().to_dict()
    log.info("pool: %d scenes (seed %d; %s)%s, stored at %d px; %d benchmark scenes excluded; %d long captions in "
             "the benchmarks' words", count, seed, ", ".join(f"{n} {f}" for f, n in sorted(drawn.items())),
             f" from {slices.count} narrow slices per family" if slices else "", image_size, len(exclude),
             int(in_benchmark_words.sum()))
    return manifest
