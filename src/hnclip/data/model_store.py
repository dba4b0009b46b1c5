"""An image store in one model's own geometry: its image side and its interpolation.

A benchmark's stores (``results/data/<benchmark>/<split>_images``) are built at the backbone's geometry; a released
checkpoint evaluated beside it (``models:``) may read 224 px where the backbone reads 32, or resize bilinearly.
:func:`store_for_model` builds its store from the split's manifest, or, when the benchmark's own store already has
that geometry for the same images (size, interpolation and the manifest's digest recorded in its ``index.json``),
hard-links that store's files instead of decoding every image again (a copy where links are not possible).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

from hnclip.data.image_store import IMAGES_FILE, INDEX_FILE, build_store, manifest_digest
from hnclip.model_files import model_geometry

__all__ = ["store_for_model"]

log = logging.getLogger(__name__)


def _same_store(like: Path, size: int, resample: str, digest: str) -> bool:
    index_path = Path(like) / INDEX_FILE
    if not index_path.is_file():
        return False
    index = json.loads(index_path.read_text())
    return (index.get("image_size"), index.get("resample", "bicubic"), index.get("manifest_sha256")) == (
        size, resample, digest)


def store_for_model(manifest, model_dir, out_dir, like=None) -> str:
    """Write ``out_dir``: ``manifest``'s images at ``model_dir``'s geometry; returns ``"linked"`` or ``"built"``."""
    from hnclip.data.manifest import read_manifest

    frame = read_manifest(manifest) if isinstance(manifest, str | Path) else manifest
    size, resample = model_geometry(model_dir)
    out_dir = Path(out_dir)
    if like is not None and _same_store(Path(like), size, resample, manifest_digest(frame.drop_duplicates("image_id"))):
        out_dir.mkdir(parents=True, exist_ok=True)
        for name in (IMAGES_FILE, INDEX_FILE):  # the index last: a store with an index is complete
            target = out_dir / name
            target.unlink(missing_ok=True)
            try:
                os.link(Path(like) / name, target)
            except OSError:
                shutil.copyfile(Path(like) / name, target)
        log.info("%s: the images of %s at %d px, %s (linked)", out_dir, like, size, resample)
        return "linked"
    build_store(frame, out_dir, size, resample)
    log.info("%s: %d px, %s, built from %s", out_dir, size, resample, manifest)
    return "built"
