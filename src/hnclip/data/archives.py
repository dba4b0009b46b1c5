"""Archive safety: unpack a zip or tar only into its destination, refusing what could land elsewhere.

Refused (:class:`ArchiveError`, naming the archive and member): absolute names, ``..``, drive letters,
links, devices and other special files, folders that resolve outside the destination through a symlink,
and archives that end early or fail their CRC. Each member is written under a temporary name and renamed,
so an interrupted unpack leaves no half-written file under its real name.
"""

from __future__ import annotations

import fnmatch
import gzip
import logging
import lzma
import os
import shutil
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path, PurePosixPath

from tqdm import tqdm

from hnclip.data.transport import DownloadError

__all__ = ["ArchiveError", "unpack_archive"]

log = logging.getLogger(__name__)

_CHUNK = 1 << 20
_TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")


class ArchiveError(DownloadError):
    """An archive is truncated, corrupt, or holds a member that must not be unpacked."""


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
