"""The embedded default's benchmark: procedurally rendered scenes with long, near-duplicate captions.

Every scene is a background plus 4-7 objects on a 3x3 grid; every caption enumerates every object
(size, fill pattern, colour, shape, grid cell) and a chain of pairwise spatial relations, always in the
same template. So captions share most of their words, like DOCCI's, which is what makes the HN margin
matter; yet each caption determines its image, because it names every object and scenes are unique.

A benchmark may be a narrow slice of its family (``inventory``, ``backgrounds``): every scene draws its
objects from the same few (colour, shape) kinds on the same background, so scenes recombine shared
elements (the paper's A.2 on DOCCI: "the captions describe different images while recombining shared
elements") and differ in which kinds appear, where, how large and how filled, so that every random
micro-batch holds near-duplicates (the embedded default's regime, docs/toy-design.md). The pretraining
pool (:func:`sample_pool`) draws fresh scenes, never a benchmark's, from the whole family or from narrow
slices of one or both families.

Scenes may also come in clusters of near-duplicates (``cluster_size`` scenes: a base scene and variants
that each differ from it in one or two details: one object's colour, shape, size, fill pattern or
cell); a cluster never straddles two splits.

Two families share the task but not the distribution: ``synthetic`` (solid pale backgrounds, one
phrasing) and ``synthetic_shift`` (gradient and noise backgrounds, some shapes and colours of its own,
another phrasing), the transfer target.

The generator writes its own "publisher format", read back by :func:`load_synthetic` like any other
benchmark: ``images/<image_id>.png``, ``captions.jsonl`` (one record per image) and ``README.txt``.

The package, one module per job: :mod:`.scenes` (styles, the scene model, sampling), :mod:`.captions`,
:mod:`.render`, :mod:`.files` (the files written and read back); the adapter (:func:`load_synthetic`) is
here. Every public name is importable from ``hnclip.data.synthetic``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from hnclip.data import SPLITS
from hnclip.data.synthetic.captions import (
    POOL_CELL_WORDS,
    POOL_RELATION_WORDS,
    describe_scene,
    describe_scene_pool,
    describe_scene_short,
)
from hnclip.data.synthetic.files import (
    CAPTIONS_FILE,
    FORMAT_VERSION,
    IMAGES_DIR,
    README_FILE,
    generate_synthetic,
    read_records,
)
from hnclip.data.synthetic.render import render_scene
from hnclip.data.synthetic.scenes import (
    DETAILS,
    FAMILIES,
    MAX_OBJECTS,
    MIN_OBJECTS,
    NUMBER_WORDS,
    PATTERNS,
    POOL_SLICE_SEED,
    SIZE_FRACTION,
    SIZES,
    STYLES,
    SUPERSAMPLE,
    FamilyStyle,
    PoolSlices,
    Scene,
    SceneObject,
    Slice,
    family_slice,
    iter_scenes,
    sample_pool,
    sample_scene,
    scene_from_record,
    vary_scene,
)
from hnclip.data.synthetic.scenes import (
    _scene_rng as _scene_rng,  # tests/test_data_synthetic.py
)
from hnclip.data.synthetic.scenes import (
    _style as _style,
)

__all__ = [
    "FAMILIES",
    "POOL_SLICE_SEED",
    "PoolSlices",
    "STYLES",
    "Scene",
    "SceneObject",
    "Slice",
    "DETAILS",
    "family_slice",
    "describe_scene",
    "describe_scene_pool",
    "describe_scene_short",
    "generate_synthetic",
    "iter_scenes",
    "read_records",
    "load_synthetic",
    "load_synthetic_shift",
    "render_scene",
    "sample_pool",
    "sample_scene",
    "scene_from_record",
    "vary_scene",
    # constants of the scene model and the files (hnclip.preprocess.oracle, the pool, the CLI read them)
    "CAPTIONS_FILE",
    "FORMAT_VERSION",
    "IMAGES_DIR",
    "MAX_OBJECTS",
    "MIN_OBJECTS",
    "NUMBER_WORDS",
    "PATTERNS",
    "README_FILE",
    "SIZES",
    "SIZE_FRACTION",
    "SUPERSAMPLE",
    "FamilyStyle",
    "POOL_CELL_WORDS",
    "POOL_RELATION_WORDS",
]

# --------------------------------------------------------------------------------------------- adapter

_SAFE_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_REQUIRED = ("image_id", "split", "family", "caption", "short_caption")


def load_synthetic(root, split: str) -> pd.DataFrame:
    """Manifest of the ``synthetic`` family's ``split`` (see :func:`_load`)."""
    return _load(Path(root), split, "synthetic")


def load_synthetic_shift(root, split: str) -> pd.DataFrame:
    """Manifest of the ``synthetic_shift`` family's ``split`` (see :func:`_load`)."""
    return _load(Path(root), split, "synthetic_shift")


def _load(root: Path, split: str, family: str) -> pd.DataFrame:
    """Rows of ``split`` in file order: image_id, image_path (absolute), caption, short_caption.

    Errors name the caption file and line: malformed JSON, a missing field, an unknown split, a
    record of another family, an unsafe or repeated image_id, an empty caption, a missing image.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r} for {family!r}; known: {', '.join(SPLITS)}")
    path = root / CAPTIONS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{family!r}: no {CAPTIONS_FILE} in {root} (generate it with generate_synthetic)")
    images = root.resolve() / IMAGES_DIR
    rows, seen = [], set()
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise ValueError(f"{where}: malformed JSON ({e.msg} at column {e.colno})") from e
            if not isinstance(record, dict):
                raise ValueError(f"{where}: expected a JSON object, got {type(record).__name__}")
            missing = [k for k in _REQUIRED if k not in record]
            if missing:
                raise ValueError(f"{where}: record lacks field(s) {missing}")
            image_id = record["image_id"]
            if not isinstance(image_id, str) or not _SAFE_ID.fullmatch(image_id):
                raise ValueError(f"{where}: image_id {image_id!r} is not a plain file name")
            if image_id in seen:
                raise ValueError(f"{where}: duplicate image_id {image_id!r}")
            seen.add(image_id)
            if record["family"] != family:
                raise ValueError(f"{where}: image_id {image_id!r} belongs to family {record['family']!r}, "
                                 f"expected {family!r}")
            if record["split"] not in SPLITS:
                raise ValueError(f"{where}: image_id {image_id!r} has unknown split {record['split']!r}")
            for key in ("caption", "short_caption"):
                if not isinstance(record[key], str) or not record[key].strip():
                    raise ValueError(f"{where}: image_id {image_id!r} has an empty {key}")
            if record["split"] != split:
                continue
            image_path = images / f"{image_id}.png"
            if not image_path.is_file():
                raise FileNotFoundError(f"{where}: image of image_id {image_id!r} is missing: {image_path}")
            rows.append((image_id, str(image_path), record["caption"], record["short_caption"]))
    return pd.DataFrame(rows, columns=["image_id", "image_path", "caption", "short_caption"], dtype=str)
