"""Where a search keeps its grid points, keyed on everything that changes a point, so that a search under
another setting never reads a point trained under this one.

A point's folder is ``<work>/<benchmark>-<split>/<method>-<digest>/<key><rate>/``: the digest (12 hex
digits) covers the point's training settings but its rate (the shared budget, the method's recipe, the
seed: every weight-changing ``--set`` item of its ``hnclip train`` command, :data:`hnclip.config.train.
NOT_HASHED` aside), the backbone's files, the train and scoring tables, the framework products the method
trains on (GOAL's segments, StructXLIP's edges) and the CPU kernel setting. Switching
the split, the benchmark, the budget or a rate thus lands in another folder; ``setting.json`` beside the
points says in words what the digest covers. The zero-shot score gets the same treatment
(:func:`zeroshot_file`). A point is finished when its run finished: its ``summary.json``, which the trainer
writes last (:func:`finished`); anything less is an interrupted run, which the trainer resumes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from hnclip.config.train import NOT_HASHED
from hnclip.hashing import fingerprint_files, sha256_file

__all__ = ["finished", "inputs_identity", "method_folder", "point_folder", "products_identity", "zeroshot_file"]


def _digest(key: Mapping) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def inputs_identity(backbone: Path, data: Path, split: str, cpu_kernels: str) -> dict:
    """What every point of a search reads: the backbone's files, the train and scoring tables (by content),
    the scoring split's name and the CPU kernel setting."""
    return {"backbone": fingerprint_files(backbone), "train.csv": sha256_file(Path(data) / "train.csv"),
            f"{split}.csv": sha256_file(Path(data) / f"{split}.csv"), "split": split, "cpu_kernels": cpu_kernels}


def method_folder(work: Path, benchmark: str, identity: Mapping, method: str, items: Sequence[str],
                  key: str, products: Mapping[str, str] | None = None) -> Path:
    """The folder of ``method``'s points under ``items`` (its train command's ``--set`` items; the tuned
    ``key``'s own item, the rate, is left out: it names each point's folder), with ``setting.json``.
    ``products``: the framework products the method trains on (:func:`products_identity`), when it has any:
    a rebuilt segment or edge product lands in another folder."""
    settings = sorted(i for i in items if i.split("=", 1)[0] not in (*NOT_HASHED, key))
    setting = {"benchmark": benchmark, "method": method, "tuned": key, "settings": settings, **identity}
    if products:
        setting["products"] = dict(products)
    folder = Path(work) / f"{benchmark}-{identity['split']}" / f"{method}-{_digest(setting)}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "setting.json").write_text(json.dumps(setting, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return folder


def products_identity(data: Path, products: Sequence[str]) -> dict[str, str]:
    """Each framework product's folder (``train_<product>`` beside the train table) by content."""
    return {product: fingerprint_files(Path(data) / f"train_{product}") for product in products}


def point_folder(method_dir: Path, key: str, rate: float) -> Path:
    """One grid point's run folder: its rate under its method's keyed folder."""
    return Path(method_dir) / f"{key}{rate:g}"


def zeroshot_file(work: Path, benchmark: str, identity: Mapping, batch_size: int) -> Path:
    """The zero-shot backbone's evaluation on the scoring split, keyed as the points are."""
    key = {"benchmark": benchmark, "batch_size": batch_size, **identity}
    return Path(work) / f"{benchmark}-{identity['split']}" / f"zeroshot-{_digest(key)}.json"


def finished(out: Path) -> bool:
    """Whether a point's run finished: its ``summary.json``, the last file a run writes
    (:mod:`hnclip.training.finish`). ``epochs.csv`` alone is an interrupted run's first epochs."""
    return (Path(out) / "summary.json").is_file()
