"""The checksum lock: what each downloaded file's bytes must be, and where they came from.

The lock file (JSON: ``"<source>/<path>" -> {sha256, size, source}``, plus the Hub commit where there is
one) records each file on its first download and is checked on every later call: a file whose sha256
differs stops the run, naming the file and both hashes. Re-hashing costs a read of every file per call
(tens of seconds for DOCCI's 7 GB archive), which is the price of knowing the bytes under a result are
the bytes that were locked.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
from pathlib import Path

from hnclip.data.transport import DownloadError
from hnclip.fileio import write_json_atomic
from hnclip.hashing import sha256_file

__all__ = ["LOCK_VERSION", "ChecksumLock", "ChecksumMismatchError"]

log = logging.getLogger(__name__)

LOCK_VERSION = 1


class ChecksumMismatchError(DownloadError):
    """A file's sha256 differs from the one locked (or pinned) for it."""


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
        digest = sha256_file(path, progress=True)
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
