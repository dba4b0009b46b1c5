"""One split of one benchmark -> its manifest CSV and its pre-resized image store."""

from __future__ import annotations

import logging
from pathlib import Path

from hnclip.data import load_benchmark
from hnclip.data.adapter_utils import PROTOCOL

log = logging.getLogger(__name__)

ORIGINALS_DIR = "originals"  # <split>_images/originals/: images unpacked from WebDataset shards


def prepare_split(source: dict, split: str, image_size: int, manifest_path: Path, store_dir: Path,
                  context_length: int | None = None, resample: str = "bicubic") -> dict | None:
    """Write ``split``'s manifest and image store (resized with ``resample``: the backbone's interpolation); with
    ``context_length`` (the text tower's positions, config ``backbone.context_length``), count the captions cut
    there, logged (a warning when any is) and returned (:func:`hnclip.models.tokenizer.truncation`)."""
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
    cut = None
    if context_length is not None:
        from hnclip.models.tokenizer import describe_truncation, truncation

        cut = truncation([str(c) for c in manifest["caption"]], context_length)
        (log.warning if cut["count"] else log.info)(describe_truncation(cut, f"{source['benchmark']}/{split}"))
    write_manifest(manifest, manifest_path)
    build_store(manifest, store_dir, image_size, resample)
    log.info("prepared %s/%s: %d records at %d px (%s)", source["benchmark"], split, len(manifest), image_size,
             resample)
    return cut


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
