"""One split of one benchmark -> its manifest CSV and its pre-resized image store."""

from __future__ import annotations

import logging
from pathlib import Path

from hnclip.data import load_benchmark

log = logging.getLogger(__name__)


def prepare_split(source: dict, split: str, image_size: int, manifest_path: Path, store_dir: Path) -> None:
    from hnclip.data.image_store import build_store
    from hnclip.data.manifest import write_manifest

    manifest = load_benchmark(source["adapter"], source["root"], split)
    expected = source.get("expected_counts", {}).get(split)
    if expected is not None and len(manifest) != expected:
        raise ValueError(
            f"benchmark {source['benchmark']!r} split {split!r} under {source['root']}: found {len(manifest)} "
            f"records, the config's expected_counts says {expected}"
        )
    if len(manifest) == 0:
        raise ValueError(f"benchmark {source['benchmark']!r} split {split!r}: no records under {source['root']}")
    write_manifest(manifest, manifest_path)
    build_store(manifest, store_dir, image_size)
    log.info("prepared %s/%s: %d records at %d px", source["benchmark"], split, len(manifest), image_size)
