"""One split of one benchmark -> its manifest CSV and its pre-resized image store."""

from __future__ import annotations

import logging
from pathlib import Path

from hnclip.data import load_benchmark
from hnclip.data.adapter_utils import PROTOCOL

log = logging.getLogger(__name__)

ORIGINALS_DIR = "originals"  # <split>_images/originals/: images unpacked from WebDataset shards


def prepare_split(source: dict, split: str, image_size: int, manifest_path: Path, store_dir: Path,
                  resample: str = "bicubic"):
    """Write ``split``'s manifest and image store (resized with ``resample``: the backbone's interpolation) and
    return the manifest. How many of its captions the text tower cuts is counted by the caller
    (``hnclip prepare``, :func:`hnclip.models.tokenizer.log_truncation`): the tokenizer is the models layer's,
    above this one."""
    from hnclip.data.image_store import build_store
    from hnclip.data.manifest import write_manifest

    expected = source.get("expected_counts", {}).get(split)
    # the config's count, when it gives one, replaces the adapter's protocol count (a documented subset,
    # a rehearsal's fixtures) and is checked here, naming the config key; else the protocol's is checked
    # your own captions (hnclip.data.own): the config block the source record carries, and a folder
    # inside the prepared split's store for the images unpacked from WebDataset shards
    manifest = load_benchmark(source["adapter"], source["root"], split,
                              expected_count=PROTOCOL if expected is None else None,
                              settings=source.get("adapter_settings"), work_dir=Path(store_dir) / ORIGINALS_DIR,
                              benchmark=source.get("benchmark", source["adapter"]))
    if expected is not None and len(manifest) != expected:
        raise ValueError(
            f"benchmark {source['benchmark']!r} split {split!r} under {source['root']}: found {len(manifest)} "
            f"records, the config's expected_counts says {expected}"
        )
    manifest = _with_caption_column(manifest, source)
    if len(manifest) == 0:
        raise ValueError(f"benchmark {source['benchmark']!r} split {split!r}: no records under {source['root']}")
    write_manifest(manifest, manifest_path)
    build_store(manifest, store_dir, image_size, resample)
    log.info("prepared %s/%s: %d records at %d px (%s)", source["benchmark"], split, len(manifest), image_size,
             resample)
    return manifest


def _with_caption_column(manifest, source: dict):
    """The manifest with its ``caption`` taken from the benchmark's ``caption_column`` (the synthetic
    adapters' ``short_caption``: the short captions of the same scenes), which evaluation, training and
    the caption geometry read; unchanged when that is ``caption`` or unset."""
    column = source.get("caption_column")
    if not column or column == "caption":
        return manifest
    if column not in manifest.columns:
        raise ValueError(f"benchmark {source.get('benchmark')!r}: caption_column {column!r} is not a column the "
                         f"{source['adapter']!r} adapter writes; it writes {list(manifest.columns)}")
    return manifest.assign(caption=manifest[column])
