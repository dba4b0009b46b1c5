"""Fetch a benchmark's (or a checkpoint's) files from their publishers, pinned by a lock file.

``sources.json`` beside this module lists, per source, its licence, where its layout was learned and
its files: a plain URL (resumable HTTP), a Hugging Face Hub file or whole dataset repository, or a file
that only a person can fetch (SA-1B's licence click-through). Each file is fetched
(:mod:`hnclip.data.transport`), checked against the lock or recorded in it
(:mod:`hnclip.data.checksum_lock`) and, for an archive, unpacked in place once its checksum is known
(:mod:`hnclip.data.archives`).
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path, PurePosixPath

from hnclip.data.archives import unpack_archive
from hnclip.data.checksum_lock import ChecksumLock
from hnclip.data.roots import claim_root
from hnclip.data.transport import DownloadError, download_file, download_hub_file, download_hub_snapshot

__all__ = [
    "LOCK_FILE",
    "SOURCES_FILE",
    "ManualDownloadRequired",
    "download_benchmark",
    "download_checkpoint",
    "load_sources",
    "root_entries",
]

log = logging.getLogger(__name__)

SOURCES_FILE = Path(__file__).with_name("sources.json")
UNPACK_MARKERS = ".hnclip-unpacked"
LOCK_FILE = "hnclip-checksums.json"  # the lock's name when it lives in the root (hnclip fetch puts it there)
_FILE_KINDS = ("url", "hub", "hub_snapshot", "manual")


class ManualDownloadRequired(DownloadError):
    """A file only a person can fetch (a licence click-through) is not in place yet."""


# ---------------------------------------------------------------------------------------------------
# sources table


def load_sources(path: Path = SOURCES_FILE) -> dict[str, dict]:
    """The sources table, checked so a typo fails here rather than halfway through a 7 GB download."""
    with open(path, encoding="utf-8") as f:
        sources = json.load(f)
    for name, entry in sources.items():
        for key in ("licence", "homepage", "files"):
            if key not in entry:
                raise ValueError(f"{path}: source {name!r} has no {key!r}")
        for i, spec in enumerate(entry["files"]):
            kinds = [k for k in _FILE_KINDS if k in spec]
            if len(kinds) != 1:
                raise ValueError(
                    f"{path}: source {name!r} file {i} needs exactly one of {_FILE_KINDS}, has {kinds}"
                )
            if kinds[0] != "hub_snapshot" and "path" not in spec:
                raise ValueError(f"{path}: source {name!r} file {i} has no 'path'")
    return sources


# ---------------------------------------------------------------------------------------------------
# one source


def download_benchmark(
    name: str,
    dest: Path,
    lock_path: Path,
    *,
    sources: dict | None = None,
    retries: int = 5,
    retry_wait: float = 2.0,
    root_key: str | None = None,
) -> Path:
    """Make ``dest`` hold source ``name``'s files as its publisher distributes them, archives unpacked.

    Files already present are re-hashed and checked against ``lock_path``; missing ones are fetched,
    checked against the lock (or recorded in it on first download) and, for archives, unpacked once
    per archive checksum. Raises ChecksumMismatchError naming the file and both hashes,
    ManualDownloadRequired with instructions for licence-gated files, DownloadError or ArchiveError.
    ``root_key``: the config key ``dest`` came from, named when the folder is refused (hnclip.data.roots).
    """
    sources = load_sources() if sources is None else sources
    if name not in sources:
        raise ValueError(f"unknown source {name!r}; known: {', '.join(sorted(sources))}")
    entry = sources[name]
    # a root holding a user's own files is refused before anything is fetched (hnclip.data.roots)
    dest = claim_root(dest, f"download of {name!r}", known=root_entries(entry), key=root_key)
    lock = ChecksumLock(lock_path)
    log.info("%s: licence %s", name, entry["licence"])
    for spec in entry["files"]:
        if "hub_snapshot" in spec:
            _fetch_snapshot(name, spec, dest, lock)
        else:
            _fetch_file(name, spec, dest, lock, retries, retry_wait)
    return dest


def root_entries(entry: dict) -> set[str]:
    """Top-level names a source's files occupy in its root: the files (and their ``.part``), the folders
    a placed download satisfies or an archive unpacks into, the ``root_entries`` the table lists (what
    archives unpack at the top, snapshot files, files placed by hand), the lock and the unpack records.
    A root holding only these is the publisher's copy placed by hand, not a user's unrelated data."""
    names = {LOCK_FILE, UNPACK_MARKERS, *entry.get("root_entries", [])}
    for spec in entry["files"]:
        if "path" in spec:
            first = PurePosixPath(spec["path"]).parts[0]
            names |= {first, first + ".part", first + ".tmp"}
        names |= {PurePosixPath(d).parts[0] for d in spec.get("satisfied_by", [])}
        into = PurePosixPath(spec.get("unpack", {}).get("into", "."))
        if into.parts:
            names.add(into.parts[0])
    return names


def download_checkpoint(
    dest: Path,
    lock_path: Path,
    *,
    name: str = "longclip_l",
    sources: dict | None = None,
    revision: str | None = None,
    sha256: str | dict[str, str] | None = None,
    allow_patterns: list[str] | None = None,
) -> Path:
    """A checkpoint source's weights (locked like any benchmark file); returns the file, or the folder of
    a whole-repository source (SAM, a CLIPModel in transformers format).

    ``revision`` (a Hub commit) and ``sha256`` (of a single-file source; of named files of a whole-repository
    source, as ``{path: sha256}``) override the sources table's pins: the workflow config pins them
    (``backbone.revision``/``backbone.sha256``), and a file that differs stops the run naming the file, the
    revision and both hashes. ``allow_patterns`` narrows what a whole-repository source fetches.
    """
    sources = load_sources() if sources is None else sources
    if name not in sources:
        raise ValueError(f"unknown source {name!r}; known: {', '.join(sorted(sources))}")
    entry = json.loads(json.dumps(sources[name]))  # a copy: the pins below must not leak into the table
    spec = entry["files"][0]
    hub = spec.get("hub", spec.get("hub_snapshot"))
    if revision is not None:
        hub["revision"] = revision
    if sha256 is not None:
        if "hub_snapshot" in spec and not isinstance(sha256, dict):
            raise ValueError(f"{name}: a whole-repository source takes no single sha256 pin (pin {{path: sha256}})")
        spec["sha256"] = {**spec.get("sha256", {}), **sha256} if isinstance(sha256, dict) else sha256
    if allow_patterns is not None:
        if "hub_snapshot" not in spec:
            raise ValueError(f"{name}: allow_patterns narrows a whole-repository source only")
        hub["allow_patterns"] = list(allow_patterns)
    download_benchmark(name, dest, lock_path, sources={**sources, name: entry})
    return Path(dest) / spec["path"] if "path" in spec else Path(dest)


def _fetch_file(
    name: str, spec: dict, dest: Path, lock: ChecksumLock, retries: int, retry_wait: float
) -> None:
    rel = spec["path"]
    key = f"{name}/{rel}"
    target = dest / rel
    revision = (lock.files.get(key) or {}).get("revision")
    if not target.exists() or _is_other_revision(spec.get("hub"), revision):
        if "manual" in spec:
            done = [d for d in spec.get("satisfied_by", []) if _is_nonempty_dir(dest / d)]
            if done:
                log.info(
                    "%s: %s absent but %s already holds its content; skipping", name, rel, dest / done[0]
                )
                return
            raise ManualDownloadRequired(
                f"{name}: {target} is missing and must be fetched by hand. {spec['manual']}"
            )
        if "url" in spec:
            download_file(spec["url"], target, retries=retries, retry_wait=retry_wait)
            source = spec["url"]
        else:
            hub = spec["hub"]
            _, source = download_hub_file(
                hub["repo_id"],
                hub["filename"],
                target,
                repo_type=hub.get("repo_type", "dataset"),
                revision=hub.get("revision"),
            )
            revision = _revision_of(source)
    else:
        source = spec.get("url") or _hub_label(spec.get("hub")) or "placed by hand"
    digest = lock.check(key, target, source, spec.get("sha256"), revision)
    if "unpack" in spec:
        _unpack_once(key, target, digest, dest, spec["unpack"])


def _is_other_revision(hub: dict | None, locked_revision: str | None) -> bool:
    """Whether a Hub file in place may be another commit's than the pinned one: it is fetched again (a
    cache hit when the Hub cache holds that commit) and checked, rather than trusted by its name."""
    pinned = (hub or {}).get("revision")
    return pinned is not None and pinned != locked_revision


def _revision_of(provenance: str) -> str | None:
    """The commit in ``hf://<type>s/<repo>@<commit>/<path>`` (None when the cache layout hid it)."""
    match = re.match(r"hf://[^@]+@([^/]+)/", provenance)
    return match.group(1) if match and match.group(1) != "unknown" else None


def _fetch_snapshot(name: str, spec: dict, dest: Path, lock: ChecksumLock) -> None:
    hub = spec["hub_snapshot"]
    prefix = f"hf://{hub.get('repo_type', 'dataset')}s/{hub['repo_id']}@"
    locked = {key: rec for key, rec in lock.files.items() if str(rec.get("source", "")).startswith(prefix)}
    in_place = locked and all((dest / key.split("/", 1)[1]).is_file() for key in locked)
    if in_place and not any(_is_other_revision(hub, rec.get("revision")) for rec in locked.values()):
        placed = {key.split("/", 1)[1]: rec["source"] for key, rec in locked.items()}  # no network needed
    else:
        placed = download_hub_snapshot(
            hub["repo_id"],
            dest,
            repo_type=hub.get("repo_type", "dataset"),
            revision=hub.get("revision"),
            allow_patterns=hub.get("allow_patterns"),
            replace=bool(in_place),
        )
    pins = spec.get("sha256", {})
    for rel, source in placed.items():
        lock.check(f"{name}/{rel}", dest / rel, source, pins.get(rel), _revision_of(source))


def _hub_label(hub: dict | None) -> str | None:
    if hub is None:
        return None
    return f"hf://{hub.get('repo_type', 'dataset')}s/{hub['repo_id']}/{hub['filename']}"


def _is_nonempty_dir(path: Path) -> bool:
    return path.is_dir() and any(path.iterdir())


def _unpack_once(key: str, archive: Path, digest: str, dest: Path, options: dict) -> None:
    """Unpack unless this exact archive (by checksum) was unpacked here before: a 7 GB tar is not re-read."""
    marker = dest / UNPACK_MARKERS / (key.replace("/", "__") + ".json")
    if marker.exists():
        try:
            if json.loads(marker.read_text(encoding="utf-8")).get("sha256") == digest:
                return
        except json.JSONDecodeError:
            pass
    count = unpack_archive(
        archive,
        dest,
        into=options.get("into", "."),
        members=options.get("members"),
        flatten=bool(options.get("flatten", False)),
    )
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"sha256": digest, "files": count}) + "\n", encoding="utf-8")
