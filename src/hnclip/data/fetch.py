"""Make a benchmark's raw files exist at its root, and record where they came from.

Every writer first claims the root (:func:`hnclip.data.roots.claim_root`): a folder holding files
hnclip did not make is refused before anything is written. Synthetic benchmarks are rendered; real ones are downloaded (or, when the root already holds a complete
copy, verified against the checksum lock). Your own captions (adapters ``table`` and ``webdataset``) are
neither: their files are only checked to be there and recorded (path, size, modification time), and
nothing is written into their root. The source record is what `hnclip prepare` reads, so the adapter,
root and (your own captions) config block a manifest came from are never guessed twice.
"""

from __future__ import annotations

import datetime as _dt
import logging
from pathlib import Path

from hnclip.data import ADAPTERS
from hnclip.data.own import ADAPTERS as OWN_ADAPTERS  # files a person already has
from hnclip.data.roots import root_key

log = logging.getLogger(__name__)

SYNTHETIC_ADAPTERS = tuple(name for name, module in ADAPTERS.items() if module == ".synthetic")  # rendered


def fetch_benchmark(benchmark: str, adapter: str, root: Path, settings: dict, files_of: dict | None = None) -> dict:
    """The source record of ``benchmark`` (its config block ``settings``, as the schema fills it in), its files
    made to exist first.

    ``files_of``: the source record of the benchmark named by ``settings["files_from"]``, whose files this
    one reads: nothing is rendered or downloaded again (a second render of one root could race the
    first), the record is that one's with this benchmark's name, counts and caption column.
    """
    if settings.get("files_from"):
        if files_of is None or files_of.get("benchmark") != settings["files_from"]:
            raise ValueError(f"benchmark {benchmark!r} reads the files of {settings['files_from']!r} "
                             "(files_from): pass that benchmark's source record")
        return {**files_of, "benchmark": benchmark, "expected_counts": settings.get("expected_counts", {}),
                "caption_column": settings.get("caption_column"), "files_from": files_of["benchmark"],
                "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")}
    root = Path(root)
    extra = {}
    if adapter in OWN_ADAPTERS:
        block = settings.get(adapter) or {}
        origin = {"kind": "own files", "files": own_files_record(benchmark, adapter, root, block)}
        extra = {"adapter_settings": block}
    elif adapter in SYNTHETIC_ADAPTERS:
        from hnclip.data.synthetic import generate_synthetic

        # the generator settings as the schema filled them in (benchmarks.<name>.synthetic: every key, its
        # defaults declared there once), passed on whole
        gen = settings["synthetic"]
        generate_synthetic(root, family=adapter, **gen, root_key=root_key(benchmark))
        origin = {"kind": "rendered", "settings": gen}
    else:
        from hnclip.data.download import LOCK_FILE, download_benchmark

        lock = root / LOCK_FILE
        download_benchmark(adapter, root, lock, root_key=root_key(benchmark))
        origin = {"kind": "downloaded", "lock": str(lock.resolve())}
    return {
        "benchmark": benchmark,
        "adapter": adapter,
        "root": str(root.resolve()),
        "expected_counts": settings.get("expected_counts", {}),
        "caption_column": settings.get("caption_column"),
        "origin": origin,
        **extra,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }


def own_files_record(benchmark: str, adapter: str, root: Path, block: dict) -> dict[str, list[dict]]:
    """Split -> [{path, bytes, mtime}] of your own captions' files; a missing root or file is an error
    naming the config key it came from. Reads nothing but the files' sizes and times."""
    from hnclip.data.own import split_files

    key = f"benchmarks.{benchmark}.{adapter}.{'files' if adapter == 'table' else 'shards'}"
    if not root.is_dir():
        raise FileNotFoundError(f"benchmark {benchmark!r}: root folder {root} ({root_key(benchmark)}) "
                                "does not exist")
    record = {}
    for split, paths in split_files(adapter, root, block, benchmark).items():
        for path in paths:
            if not path.is_file():
                raise FileNotFoundError(f"benchmark {benchmark!r}: {path} ({key}.{split}) does not exist")
        record[split] = [{"path": str(p), "bytes": p.stat().st_size, "mtime": p.stat().st_mtime} for p in paths]
    return record
