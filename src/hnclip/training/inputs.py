"""A run's inputs read from disk: the training set (manifest rows, optionally a subset, with their image-store
rows), the splits evaluated after each epoch, and the fingerprint of data, initial model and preprocessing
products that a resumed run's checkpoint must match."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from hnclip.hashing import fingerprint_files, fingerprint_tree
from hnclip.training.batches import TrainingSet

__all__ = ["eval_splits", "load_training_set", "run_fingerprint"]


def load_training_set(manifest, store, caption_column: str, where: str, subset_ids=None,
                      subset_where: str = "") -> TrainingSet:
    """The manifest's rows (restricted to ``subset_ids``, manifest order kept) with their store rows.

    The kept manifest rows travel along (``TrainingSet.manifest``) for frameworks reading other columns.
    """
    if caption_column not in manifest.columns:
        raise ValueError(f"manifest {where} has no caption column {caption_column!r} (TrainConfig.caption_column); "
                         f"columns: {list(manifest.columns)}")
    image_ids = [str(i) for i in manifest["image_id"]]
    captions = [str(c) for c in manifest[caption_column]]
    keep = list(range(len(image_ids)))
    if subset_ids is not None:
        wanted = set(subset_ids)
        missing = wanted.difference(image_ids)
        if missing:
            raise ValueError(f"subset {subset_where} names image_id {sorted(missing)[0]!r} "
                             f"({len(missing)} in all) that manifest {where} does not have")
        keep = [i for i, image_id in enumerate(image_ids) if image_id in wanted]
        image_ids, captions = [image_ids[i] for i in keep], [captions[i] for i in keep]
    for image_id, caption in zip(image_ids, captions, strict=True):
        if not caption.strip():
            raise ValueError(f"manifest {where}: image_id {image_id!r} has an empty {caption_column!r}")
    rows = []
    for image_id in image_ids:
        try:
            rows.append(store.row(image_id))
        except KeyError:
            raise KeyError(f"image_id {image_id!r} of manifest {where} is not in the image store "
                           f"{getattr(store, 'root', store)}") from None
    return TrainingSet(image_ids, captions, np.asarray(rows, dtype=np.int64),
                       manifest=manifest.iloc[keep].reset_index(drop=True))


def eval_splits(eval_manifest, eval_store_dir, eval_benchmark) -> tuple[list, list, list]:
    """(manifests, stores, names) of the splits evaluated after each epoch: each argument a path (a name) or
    a list of them, one per split; empty lists when none is evaluated."""
    manifests = eval_manifest if isinstance(eval_manifest, list | tuple) else [eval_manifest] * (eval_manifest is not None)
    stores = eval_store_dir if isinstance(eval_store_dir, list | tuple) else [eval_store_dir] * (eval_store_dir is not None)
    names = eval_benchmark if isinstance(eval_benchmark, list | tuple) else [eval_benchmark] * len(manifests)
    if not len(manifests) == len(stores) == len(names):
        raise ValueError(f"evaluation after each epoch needs one store and one name per manifest, got "
                         f"{len(manifests)} manifests, {len(stores)} stores, {len(names)} names")
    return manifests, stores, names


def run_fingerprint(data: TrainingSet, init_model_dir, products) -> str:
    """What a checkpoint must have been trained from to be resumed: the training data, the initial model's
    files and the bytes of each preprocessing product (a rebuilt product refuses a stale checkpoint)."""
    identity = f"{data.fingerprint()}\n{fingerprint_files(init_model_dir)}"
    for name, path in sorted((products or {}).items()):
        if not (Path(path).is_file() or Path(path).is_dir()):
            raise FileNotFoundError(f"preprocessing product {name!r}: {path} does not exist")
        identity += f"\n{name}:{fingerprint_tree(path)}"
    return hashlib.sha256(identity.encode()).hexdigest()
