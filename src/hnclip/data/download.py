"""Fetch a benchmark's (or the Long-CLIP checkpoint's) files from their publishers, pinned by a lock file.

``sources.json`` beside this module lists, per source, its licence, where its layout was learned and
its files: a plain URL (resumable HTTP), a Hugging Face Hub file or whole dataset repository (through
``huggingface_hub``, so its cache, offline mode and token handling apply), or a file that only a
person can fetch (SA-1B's licence click-through). Archives are unpacked in place after their checksum
is known, refusing members that would land outside the destination, links and special files.

The lock file (JSON: ``"<source>/<path>" -> {sha256, size, source}``) records each file on its first
download and is checked on every later call: a file whose sha256 differs stops the run, naming the
file and both hashes. Re-hashing costs a read of every file per call (tens of seconds for DOCCI's
7 GB archive), which is the price of knowing the bytes under a result are the bytes that were locked.

The Hub token comes only from the ``HF_TOKEN`` environment variable and is never logged; plain URLs
are fetched without any credential.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import gzip
import hashlib
import http.client
import json
import logging
import lzma
import os
import re
import shutil
import stat
import tarfile
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from hnclip.data.roots import claim_root
from hnclip.fileio import link_or_copy_atomic, write_json_atomic

__all__ = [
    "SOURCES_FILE",
    "ArchiveError",
    "ChecksumLock",
    "ChecksumMismatchError",
    "DownloadError",
    "ManualDownloadRequired",
    "download_benchmark",
    "download_checkpoint",
    "download_file",
    "download_hub_file",
    "download_hub_snapshot",
    "load_sources",
    "root_entries",
    "sha256_file",
    "unpack_archive",
]

log = logging.getLogger(__name__)

SOURCES_FILE = Path(__file__).with_name("sources.json")
LOCK_VERSION = 1
UNPACK_MARKERS = ".hnclip-unpacked"
LOCK_FILE = "hnclip-checksums.json"  # the lock's name when it lives in the root (hnclip fetch puts it there)
_CHUNK = 1 << 20
_FILE_KINDS = ("url", "hub", "hub_snapshot", "manual")
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
# HTTP statuses worth retrying (the server may recover); any other 4xx/5xx is final
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class DownloadError(RuntimeError):
    """A file could not be fetched."""


class ChecksumMismatchError(DownloadError):
    """A file's sha256 differs from the one locked (or pinned) for it."""


class ArchiveError(DownloadError):
    """An archive is truncated, corrupt, or holds a member that must not be unpacked."""


class ManualDownloadRequired(DownloadError):
    """A file only a person can fetch (a licence click-through) is not in place yet."""


class _Transient(Exception):
    """A failure a retry that resumes the ``.part`` file may get past."""


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
# checksums


def sha256_file(path: Path) -> str:
    path = Path(path)
    digest = hashlib.sha256()
    size = path.stat().st_size
    with (
        open(path, "rb") as f,
        tqdm(
            total=size, unit="B", unit_scale=True, desc=f"sha256 {path.name}", disable=size < 256 * _CHUNK
        ) as bar,
    ):
        while block := f.read(_CHUNK):
            digest.update(block)
            bar.update(len(block))
    return digest.hexdigest()


class ChecksumLock:
    """The lock file: what each downloaded file's bytes must be, and where they came from."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.files: dict[str, dict] = {}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as e:
                raise ValueError(f"lock file {self.path} is not valid JSON: {e}") from e
            if data.get("version") != LOCK_VERSION or not isinstance(data.get("files"), dict):
                raise ValueError(
                    f"lock file {self.path}: expected version {LOCK_VERSION} with a 'files' table"
                )
            self.files = data["files"]

    def check(self, key: str, path: Path, source: str, pinned_sha256: str | None = None,
              revision: str | None = None) -> str:
        """Hash ``path``; refuse it if it differs from the lock (or the pin), else record it. Returns the sha256.

        ``revision``: the Hub commit the file came from, recorded beside its hash and named in every
        refusal, because one Hub file name can stand for several files over a repository's history.
        """
        digest = sha256_file(path)
        locked = self.files.get(key)
        at = f" at revision {revision}" if revision else ""
        if locked is not None and locked["sha256"] != digest:
            was = f" at revision {locked['revision']}" if locked.get("revision") else ""
            raise ChecksumMismatchError(
                f"{path} ({key}){at}: sha256 {digest} does not match the lock file {self.path}, which records "
                f"{locked['sha256']}{was} (from {locked.get('source')}); refusing to continue. Delete the file to "
                "fetch it again, or remove its lock entry if the publisher changed it on purpose"
            )
        if pinned_sha256 is not None and pinned_sha256.lower() != digest:
            raise ChecksumMismatchError(
                f"{path} ({key}){at}: sha256 {digest} does not match the pinned {pinned_sha256.lower()}; refusing "
                "to continue"
            )
        if locked is None:
            self.files[key] = {
                "sha256": digest,
                "size": path.stat().st_size,
                "source": source,
                "recorded": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
                **({"revision": revision} if revision else {}),
            }
            self.save()
            log.info("locked %s: sha256 %s%s", key, digest, at)
        return digest

    def save(self) -> None:
        write_json_atomic(self.path, {"version": LOCK_VERSION, "files": dict(sorted(self.files.items()))})


# ---------------------------------------------------------------------------------------------------
# plain URLs


def download_file(
    url: str,
    dest: Path,
    *,
    retries: int = 5,
    retry_wait: float = 2.0,
    timeout: float = 60.0,
    chunk_size: int = _CHUNK,
) -> Path:
    """Fetch ``url`` to ``dest`` through ``dest.part``, resuming with an HTTP Range request after a break.

    A ``.part`` left by an earlier, interrupted call is resumed too. The file is renamed to ``dest``
    only once the byte count the server announced has arrived. Raises DownloadError after
    ``retries`` failed resumptions or on a final HTTP error (404, 403...).
    """
    if not url.startswith(("https://", "http://")):
        raise ValueError(f"download_file: only http(s) URLs are fetched, got {url!r}")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    for attempt in range(retries + 1):
        try:
            _fetch_into(url, part, dest.name, timeout, chunk_size)
            os.replace(part, dest)
            return dest
        except _Transient as e:
            have = part.stat().st_size if part.exists() else 0
            if attempt == retries:
                raise DownloadError(
                    f"{url}: gave up after {retries + 1} attempts ({e}); {have} bytes kept in {part} for a later resume"
                ) from e
            log.warning(
                "%s: %s; resuming from byte %d (attempt %d of %d)", url, e, have, attempt + 2, retries + 1
            )
            time.sleep(retry_wait * (2**attempt))
    raise AssertionError("unreachable")


def _fetch_into(url: str, part: Path, label: str, timeout: float, chunk_size: int) -> None:
    offset = part.stat().st_size if part.exists() else 0
    headers = {"User-Agent": "hnclip-repro", "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout)
    except urllib.error.HTTPError as e:
        if e.code == 416 and offset:
            # the range starts at or past the end: the .part is whole if its size is the file's size
            total = _content_range_total(e.headers.get("Content-Range"))
            if total == offset:
                return
            part.unlink()
            raise _Transient(
                f"HTTP 416 with {offset} bytes on disk but a total of {total}; restarting"
            ) from e
        if e.code in _RETRY_STATUS:
            raise _Transient(f"HTTP {e.code} {e.reason}") from e
        raise DownloadError(f"{url}: HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, OSError) as e:
        raise _Transient(f"connection failed: {e}") from e
    with response:
        length = response.headers.get("Content-Length")
        length = int(length) if length is not None else None
        if offset and response.status == 206:
            start = _content_range_start(response.headers.get("Content-Range"))
            if start != offset:
                part.unlink()
                raise _Transient(f"server resumed at byte {start}, not {offset}; restarting")
            mode = "ab"
        else:
            if offset:
                log.info("%s: server ignored the Range request; fetching from the start", url)
            offset, mode = 0, "wb"
        total = offset + length if length is not None else None
        try:
            with (
                open(part, mode) as f,
                tqdm(total=total, initial=offset, unit="B", unit_scale=True, desc=label) as bar,
            ):
                while chunk := response.read(chunk_size):
                    f.write(chunk)
                    bar.update(len(chunk))
        except (http.client.IncompleteRead, ConnectionError, TimeoutError) as e:
            raise _Transient(f"connection broke: {e!r}") from e
    size = part.stat().st_size
    if total is not None and size != total:
        raise _Transient(f"received {size} of {total} bytes")


def _content_range_total(value: str | None) -> int | None:
    match = re.match(r"bytes [\d*-]+/(\d+)", value or "")
    return int(match.group(1)) if match else None


def _content_range_start(value: str | None) -> int | None:
    match = re.match(r"bytes (\d+)-", value or "")
    return int(match.group(1)) if match else None


# ---------------------------------------------------------------------------------------------------
# Hugging Face Hub


def _hub_options() -> dict:
    """Read at call time (not import time) so HF_HUB_CACHE / HF_HUB_OFFLINE set later still apply."""
    offline = os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}
    return {
        "cache_dir": os.environ.get("HF_HUB_CACHE") or None,
        "local_files_only": offline,
        # False, not None: None would let huggingface_hub fall back to a token stored on disk
        "token": os.environ.get("HF_TOKEN") or False,
    }


def download_hub_file(
    repo_id: str, filename: str, dest: Path, *, repo_type: str = "dataset", revision: str | None = None
) -> tuple[Path, str]:
    """One Hub file into the Hub cache, then hard-linked (or copied) to ``dest``; returns (dest, provenance)."""
    from huggingface_hub import hf_hub_download

    try:
        cached = hf_hub_download(
            repo_id=repo_id, filename=filename, repo_type=repo_type, revision=revision, **_hub_options()
        )
    except Exception as e:  # huggingface_hub raises many types (offline, gated, not found, HTTP)
        raise DownloadError(
            f"Hub {repo_type} {repo_id}: cannot fetch {filename!r}: {type(e).__name__}: {e}"
        ) from e
    cached = Path(cached)
    _place(cached, Path(dest))
    return Path(dest), f"hf://{repo_type}s/{repo_id}@{_commit_of(cached)}/{filename}"


def download_hub_snapshot(
    repo_id: str,
    dest: Path,
    *,
    repo_type: str = "dataset",
    revision: str | None = None,
    allow_patterns: list[str] | None = None,
    replace: bool = False,
) -> dict[str, str]:
    """A whole Hub repository placed under ``dest``; returns {relative path: provenance} of the files placed.

    Files already under ``dest`` are kept (a benchmark's snapshot is placed once) unless ``replace``:
    then the snapshot's files replace them, so another revision's bytes reach the lock check."""
    from huggingface_hub import snapshot_download

    try:
        folder = snapshot_download(
            repo_id=repo_id,
            repo_type=repo_type,
            revision=revision,
            allow_patterns=allow_patterns,
            **_hub_options(),
        )
    except Exception as e:
        raise DownloadError(
            f"Hub {repo_type} {repo_id}: cannot fetch the repository: {type(e).__name__}: {e}"
        ) from e
    folder = Path(folder)
    placed = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or rel.startswith(".cache/"):
            continue
        # the cached snapshot folder also holds files an earlier call fetched with other patterns
        if allow_patterns is not None and not any(fnmatch.fnmatch(rel, pat) for pat in allow_patterns):
            continue
        target = Path(dest) / rel
        if replace or not target.exists():
            _place(path, target)
        placed[rel] = f"hf://{repo_type}s/{repo_id}@{folder.name}/{rel}"
    if not placed:
        raise DownloadError(f"Hub {repo_type} {repo_id}: the snapshot at {folder} holds no file")
    return placed


def _commit_of(cached: Path) -> str:
    parts = cached.parts
    return parts[parts.index("snapshots") + 1] if "snapshots" in parts else "unknown"


def _place(cached: Path, dest: Path) -> None:
    """Hard-link the cache blob (no second copy of a multi-GB file); copy when the link is impossible."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    link_or_copy_atomic(cached.resolve(), dest)


# ---------------------------------------------------------------------------------------------------
# archives


def unpack_archive(
    archive: Path, dest: Path, *, into: str = ".", members: str | None = None, flatten: bool = False
) -> int:
    """Unpack a zip or tar(.gz/.bz2/.xz) under ``dest/into``; returns the number of files written.

    ``members`` keeps only files whose base name matches the glob; ``flatten`` drops their folders.
    Refused (ArchiveError naming the archive and member): absolute names, ``..``, links, devices, and
    archives that end early or fail their CRC. macOS metadata (``__MACOSX/``, ``._*``) is skipped and
    counted in the log.
    """
    archive, dest = Path(archive), Path(dest)
    target_root = (dest / into).resolve()
    target_root.mkdir(parents=True, exist_ok=True)
    lowered = archive.name.lower()
    if lowered.endswith(".zip"):
        return _unpack_zip(archive, target_root, members, flatten)
    if lowered.endswith(_TAR_SUFFIXES):
        return _unpack_tar(archive, target_root, members, flatten)
    raise ArchiveError(f"{archive}: unknown archive type (expected .zip or one of {_TAR_SUFFIXES})")


def _member_target(archive: Path, name: str, target_root: Path, members: str | None, flatten: bool):
    """Where member ``name`` goes, ``None`` to skip it; raises for names that escape ``target_root``."""
    pure = PurePosixPath(name.replace("\\", "/"))
    parts = [p for p in pure.parts if p not in ("", ".")]
    if pure.is_absolute() or ".." in parts or (parts and ":" in parts[0]):
        raise ArchiveError(
            f"{archive}: member {name!r} would be written outside {target_root}; refusing to unpack"
        )
    if not parts or "__MACOSX" in parts or parts[-1].startswith("._"):
        return None
    if members is not None and not fnmatch.fnmatchcase(parts[-1], members):
        return None
    target = target_root.joinpath(*(parts[-1:] if flatten else parts))
    # a folder already under target_root may be a symlink pointing elsewhere
    if not target.parent.resolve().is_relative_to(target_root) and target.parent.exists():
        raise ArchiveError(f"{archive}: member {name!r} resolves outside {target_root}; refusing to unpack")
    return target


def _write_member(source, target: Path, target_root: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.parent.resolve().is_relative_to(target_root):
        raise ArchiveError(f"{target} resolves outside {target_root}; refusing to unpack")
    tmp = target.with_name(target.name + ".unpacking")
    with open(tmp, "wb") as out:
        shutil.copyfileobj(source, out, _CHUNK)
    os.replace(tmp, target)


def _unpack_tar(archive: Path, target_root: Path, members: str | None, flatten: bool) -> int:
    written, skipped, current = 0, 0, None
    try:
        # "r:*" reads gz through GzipFile, which checks the CRC and length trailer when drained below
        with tarfile.open(archive, "r:*") as tar, tqdm(desc=f"unpack {archive.name}", unit="file") as bar:
            while (member := tar.next()) is not None:
                current = member.name
                if not (member.isfile() or member.isdir()):
                    kind = "link" if member.issym() or member.islnk() else "special file"
                    raise ArchiveError(f"{archive}: member {member.name!r} is a {kind}; refusing to unpack")
                target = _member_target(archive, member.name, target_root, members, flatten)
                if target is None:
                    skipped += member.isfile()
                    continue
                if member.isdir():
                    if not flatten:
                        target.mkdir(parents=True, exist_ok=True)
                    continue
                with tar.extractfile(member) as source:
                    _write_member(source, target, target_root)
                written += 1
                bar.update()
            current = "<end of archive>"
            while tar.fileobj.read(_CHUNK):
                pass
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, lzma.LZMAError) as e:
        raise ArchiveError(
            f"{archive}: truncated or corrupt archive (at member {current!r}): {type(e).__name__}: {e}"
        ) from e
    _log_unpacked(archive, written, skipped)
    return written


def _unpack_zip(archive: Path, target_root: Path, members: str | None, flatten: bool) -> int:
    written, skipped, current = 0, 0, None
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in tqdm(zf.infolist(), desc=f"unpack {archive.name}", unit="file"):
                current = info.filename
                if stat.S_ISLNK(info.external_attr >> 16):
                    raise ArchiveError(f"{archive}: member {info.filename!r} is a link; refusing to unpack")
                target = _member_target(archive, info.filename, target_root, members, flatten)
                if target is None:
                    skipped += not info.is_dir()
                    continue
                if info.is_dir():
                    if not flatten:
                        target.mkdir(parents=True, exist_ok=True)
                    continue
                with zf.open(info) as source:
                    _write_member(source, target, target_root)
                written += 1
    except (zipfile.BadZipFile, EOFError, zlib.error) as e:
        raise ArchiveError(
            f"{archive}: truncated or corrupt zip archive (at member {current!r}): {type(e).__name__}: {e}"
        ) from e
    _log_unpacked(archive, written, skipped)
    return written


def _log_unpacked(archive: Path, written: int, skipped: int) -> None:
    log.info(
        "unpacked %s: %d files written, %d skipped (filtered or macOS metadata)",
        archive.name,
        written,
        skipped,
    )


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
) -> Path:
    """Make ``dest`` hold source ``name``'s files as its publisher distributes them, archives unpacked.

    Files already present are re-hashed and checked against ``lock_path``; missing ones are fetched,
    checked against the lock (or recorded in it on first download) and, for archives, unpacked once
    per archive checksum. Raises ChecksumMismatchError naming the file and both hashes,
    ManualDownloadRequired with instructions for licence-gated files, DownloadError or ArchiveError.
    """
    sources = load_sources() if sources is None else sources
    if name not in sources:
        raise ValueError(f"unknown source {name!r}; known: {', '.join(sorted(sources))}")
    entry = sources[name]
    # a root holding a user's own files is refused before anything is fetched (hnclip.data.roots)
    dest = claim_root(dest, f"download of {name!r}", known=root_entries(entry))
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
    sha256: str | None = None,
) -> Path:
    """A checkpoint source's weights (locked like any benchmark file); returns the file, or the folder of
    a whole-repository source (SAM in transformers format).

    ``revision`` (a Hub commit) and ``sha256`` (of a single-file source) override the sources table's
    pins: the workflow config pins them (``backbone.revision``/``backbone.sha256``), and a file that
    differs stops the run naming the file, the revision and both hashes.
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
        if "hub_snapshot" in spec:
            raise ValueError(f"{name}: a whole-repository source takes no single sha256 pin")
        spec["sha256"] = sha256
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
