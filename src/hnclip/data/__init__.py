"""Benchmark adapters: each turns one publisher's files into the common manifest.

A manifest is a pandas DataFrame with columns ``image_id`` (str, unique), ``image_path`` (absolute
path of an existing file) and ``caption`` (str), rows in a stable order; adapters may add columns
(the synthetic benchmark's ``short_caption``). Each adapter module exposes ``load_<name>(root, split)``
(or a plain ``load``) returning that DataFrame; the registry below (:data:`ADAPTERS`) maps adapter names
(a benchmark's ``adapter`` in the config) to modules and imports them lazily, so a missing optional
dependency of one adapter never breaks the others.

``image_id`` is unique, except in the test and val splits of an adapter that sets
``SEVERAL_CAPTIONS_PER_IMAGE`` (your own captions: ``table``; Karpathy's COCO and Flickr30k, five captions
an image): there one row per caption, the rows of one
image sharing its id and path; evaluation encodes the image once and groups its captions
(:func:`hnclip.evaluate.recall_at_k`), and the image store keeps one row per id.
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pandas as pd

__all__ = ["ADAPTERS", "MANIFEST_COLUMNS", "load_benchmark", "protocol_counts", "test_variants"]

MANIFEST_COLUMNS = ("image_id", "image_path", "caption")

# adapter name -> its module (relative to this package)
ADAPTERS: dict[str, str] = {
    "synthetic": ".synthetic",
    "synthetic_shift": ".synthetic",
    "docci": ".docci",
    "dci": ".dci",
    "long_dci": ".long_dci",
    "urban1k": ".urban1k",
    "vg": ".vg",
    # short-caption retrieval (the retention experiment): Karpathy's test splits, five captions per image
    "coco": ".coco",
    "flickr30k": ".flickr30k",
    # your own captions (hnclip.data.own): a table, WebDataset shards
    "table": ".table",
    "webdataset": ".wds",
}

SPLITS = ("train", "val", "test")  # val: the synthetic adapters and your own captions (a publisher's refuses it)

from .adapter_utils import PROTOCOL, check_count  # noqa: E402 (it imports MANIFEST_COLUMNS from this module)


def test_variants(name: str) -> dict[str, str]:
    """Test splits of other published protocols that benchmark ``name``'s adapter also reads (split name ->
    what it is), e.g. DOCCI's ``test_goal`` (GOAL's 5,100 images); empty for most benchmarks."""
    if name not in ADAPTERS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(ADAPTERS))}")
    return dict(getattr(importlib.import_module(ADAPTERS[name], __name__), "TEST_VARIANTS", {}))


def protocol_counts(name: str) -> dict:
    """The records adapter ``name``'s protocol fixes (its ``EXPECTED_COUNTS``: per split, or per protocol and
    split), e.g. DOCCI's 9,647 train and 5,000 test images; empty for an unknown adapter or one without."""
    if name not in ADAPTERS:
        return {}
    return getattr(importlib.import_module(ADAPTERS[name], __name__), "EXPECTED_COUNTS", None) or {}


def load_benchmark(name: str, root, split: str, expected_count=PROTOCOL, **options) -> pd.DataFrame:
    """Read benchmark ``name`` from ``root`` (its files as the publisher distributes them) into a manifest.

    ``split`` is "train" or "test" (the paper's protocol), or one of the adapter's :func:`test_variants`.
    ``expected_count``: the records the split must have; by default the adapter's protocol count
    (DOCCI's 5,000 test images...), ``None`` for no check (a caller checking its own count).
    ``options``: keyword arguments for the adapters that take them (your own captions: ``settings``, the
    config block; ``work_dir``, where WebDataset images are unpacked; ``benchmark``, the config key named
    in errors); an adapter without such a parameter does not get it.
    """
    if name not in ADAPTERS:
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(sorted(ADAPTERS))}")
    variants = test_variants(name)
    if split not in SPLITS and split not in variants:
        known = ", ".join([*SPLITS, *variants])
        raise ValueError(f"unknown split {split!r} for benchmark {name!r}; known: {known}")
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"benchmark {name!r}: root folder {root} does not exist")
    module = importlib.import_module(ADAPTERS[name], __name__)
    loader = getattr(module, "load_" + name, None) or module.load
    parameters = inspect.signature(loader).parameters
    kwargs = {k: v for k, v in options.items() if k in parameters}
    # the synthetic adapters (and your own captions) have no protocol count, so they take no such argument
    if "expected_count" in parameters:
        manifest = loader(root.resolve(), split, expected_count=expected_count, **kwargs)
    else:
        manifest = loader(root.resolve(), split, **kwargs)
        if expected_count not in (PROTOCOL, None):
            check_count(name, split, len(manifest), expected_count, root)
    _check_manifest(manifest, name, split, getattr(module, "SEVERAL_CAPTIONS_PER_IMAGE", False) and split != "train")
    return manifest


def _check_manifest(manifest: pd.DataFrame, name: str, split: str, grouped: bool = False) -> None:
    """The manifest's columns and unique ids; ``grouped``: an id may repeat, always with the same image."""
    missing = [c for c in MANIFEST_COLUMNS if c not in manifest.columns]
    if missing:
        raise ValueError(f"adapter for {name!r} ({split}) returned no column(s) {missing}")
    if grouped:
        paths = manifest.groupby("image_id", sort=False)["image_path"].nunique()
        if (paths > 1).any():
            raise ValueError(f"{name!r} ({split}): image_id {paths.index[paths > 1][0]!r} names several images")
        return
    duplicated = manifest["image_id"][manifest["image_id"].duplicated()]
    if len(duplicated):
        raise ValueError(f"{name!r} ({split}): duplicate image_id {duplicated.iloc[0]!r}")
