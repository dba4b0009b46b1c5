"""Fetching files: plain URLs over resumable HTTP, and Hugging Face Hub files and whole repositories.

A URL is fetched into ``<dest>.part`` and renamed once the announced byte count has arrived; a break
resumes with an HTTP Range request (a ``.part`` left by an earlier call is resumed too). Hub files go
through ``huggingface_hub`` (its cache, offline mode and token handling apply) and are hard-linked from
the cache. Nothing here checks what the bytes are: :mod:`hnclip.data.checksum_lock` does, in
:mod:`hnclip.data.download`.

The Hub token comes only from the ``HF_TOKEN`` environment variable and is never logged; plain URLs
are fetched without any credential.
"""

from __future__ import annotations

import fnmatch
import http.client
import logging
import os
import re
import time
import urllib.error
import urllib.request
from pathlib import Path

from tqdm import tqdm

from hnclip.fileio import link_or_copy_atomic

__all__ = ["DownloadError", "download_file", "download_hub_file", "download_hub_snapshot"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
# HTTP statuses worth retrying (the server may recover); any other 4xx/5xx is final
_RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}


class DownloadError(RuntimeError):
    """A file could not be fetched."""


class _Transient(Exception):
    """A failure a retry that resumes the ``.part`` file may get past."""


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
