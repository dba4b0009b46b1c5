"""The pretraining pool: many fresh synthetic scenes with long and short captions, never a benchmark scene.

Long-CLIP-L came from CLIP by a long-caption stage on ShareGPT4V, a large image-caption set separate
from the dense-caption benchmarks it is later fine-tuned and evaluated on. The embedded default mirrors
that with a pool of independent scenes (no near-duplicate clusters) rendered exactly like the
benchmark's: the same renderer at the benchmark's ``image_size``, then the image store's resize to the
backbone's resolution, i.e. the pixels ``hnclip prepare`` would make from the benchmark's PNGs.

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
    describe_scene,
    describe_scene_short,
    read_records,
    render_scene,
    sample_pool,
    scene_from_record,
)

log = logging.getLogger(__name__)

__all__ = ["benchmark_signatures", "build_pool"]


def benchmark_signatures(root) -> tuple[str, set]:
    """(family, signatures of every scene of both splits) of the generated benchmark at ``root``."""
    records = read_records(root)
    if not records:
        raise ValueError(f"benchmark at {root} has no scenes to exclude from the pool")
    families = {r["family"] for r in records}
    if len(families) != 1:
        raise ValueError(f"benchmark at {root} mixes families {sorted(families)}")
    return families.pop(), {scene_from_record(r).signature() for r in records}


def build_pool(benchmark_root, count: int, seed: int, render_size: int, image_size: int, manifest_path,
               store_dir) -> pd.DataFrame:
    """Render ``count`` pool scenes of the benchmark's family; write the manifest and the image store.

    ``render_size`` is the benchmark's rendered size (its ``synthetic.image_size``), ``image_size`` the
    backbone's input resolution. Returns the manifest (image_id, image_path = "", caption, short_caption).
    """
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"pool count must be an int >= 1, got {count!r}")
    family, exclude = benchmark_signatures(benchmark_root)
    scenes = sample_pool(family, count, seed, exclude)
    overlap = exclude.intersection(s.signature() for s in scenes)
    if overlap:  # sample_pool guarantees this; a check here costs nothing and guards the premise
        raise AssertionError(f"{len(overlap)} pool scenes are benchmark scenes")
    image_ids = [f"pool_{index:06d}" for index in range(count)]
    manifest = pd.DataFrame({
        "image_id": image_ids,
        "image_path": [""] * count,
        "caption": [describe_scene(s) for s in scenes],
        "short_caption": [describe_scene_short(s) for s in scenes],
    }, dtype=str)
    pixels = (np.asarray(resize_center_crop(render_scene(s, render_size), image_size), dtype=np.uint8)
              for s in scenes)
    write_store(image_ids, pixels, Path(store_dir), image_size)
    write_manifest(manifest, Path(manifest_path))
    log.info("pool: %d %s scenes (seed %d), rendered at %d px, stored at %d px; %d benchmark scenes excluded",
             count, family, seed, render_size, image_size, len(exclude))
    return manifest
