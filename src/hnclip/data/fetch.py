"""Make a benchmark's raw files exist at its root, and record where they came from.

Every writer first claims the root (:func:`hnclip.data.roots.claim_root`): a folder holding files
hnclip did not make is refused before anything is written. Synthetic benchmarks are rendered; real ones are downloaded (or, when the root already holds a complete
copy, verified against the checksum lock). The source record is what `hnclip prepare` reads, so the
adapter and root a manifest came from are never guessed twice.
"""

from __future__ import annotations

import datetime as _dt
import logging
from pathlib import Path

log = logging.getLogger(__name__)

SYNTHETIC_ADAPTERS = ("synthetic", "synthetic_shift")


def fetch_benchmark(benchmark: str, adapter: str, root: Path, settings: dict) -> dict:
    root = Path(root)
    if adapter in SYNTHETIC_ADAPTERS:
        from hnclip.data.synthetic import generate_synthetic

        gen = settings.get("synthetic", {})
        generate_synthetic(root, family=adapter, n_train=gen.get("n_train", 1024), n_test=gen.get("n_test", 256),
                           image_size=gen.get("image_size", 96), seed=gen.get("seed", 0),
                           cluster_size=gen.get("cluster_size", 1), max_changes=gen.get("max_changes", 2),
                           n_val=gen.get("n_val", 0), inventory=gen.get("inventory", 0),
                           backgrounds=gen.get("backgrounds", 0), objects=gen.get("objects"),
                           patterns=gen.get("patterns"))
        origin = {"kind": "rendered", "settings": gen}
    else:
        from hnclip.data.download import LOCK_FILE, download_benchmark

        lock = root / LOCK_FILE
        download_benchmark(adapter, root, lock)
        origin = {"kind": "downloaded", "lock": str(lock.resolve())}
    return {
        "benchmark": benchmark,
        "adapter": adapter,
        "root": str(root.resolve()),
        "expected_counts": settings.get("expected_counts", {}),
        "origin": origin,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
