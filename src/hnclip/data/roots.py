"""Whose folder is this? One rule for every writer of benchmark files, so a typo'd root never costs data.

A benchmark's ``root`` comes from the config, a person types it, and ``hnclip fetch`` renders, downloads
or unpacks into it. A writer may only write into a root that is

- absent or empty (it becomes ours),
- ours: it holds one of our markers (:data:`MARKER`, written by :func:`claim_root` and naming the
  writer; the rehearsal's ``REHEARSAL.txt``), or
- a copy of the publisher's files a person placed by hand: every entry at its top level is a name the
  writer declares (``known``; the downloader's sources table lists them), so placing ``sa_000138.tar``
  before the first download keeps working.

Anything else is refused, naming the folder: it may be a user's own data, and a rendered ``README.txt``
or ``captions.jsonl``, or an archive unpacked into ``images/``, would overwrite theirs. The root is
resolved first (symlinks followed), so a link to ``/`` or to the home folder is judged as what it points
at. The filesystem root, the home folder (and its parents) and the repository holding this package (and
its parents) are never a benchmark root, marker or not: the config validator refuses them by key
(:func:`unsafe_root_reason`) before any job, and the writers refuse them again for direct CLI calls.
"""

from __future__ import annotations

import datetime as _dt
import os
import socket
from collections.abc import Iterable
from pathlib import Path

__all__ = ["MARKER", "MARKERS", "REHEARSAL_MARKER", "RootRefusedError", "check_root", "claim_root", "is_ours",
           "root_key", "unsafe_root_reason"]

MARKER = "HNCLIP-ROOT.txt"
REHEARSAL_MARKER = "REHEARSAL.txt"  # the rehearsal's stand-ins (hnclip.rehearsal.make) claim roots with it
MARKERS = (MARKER, REHEARSAL_MARKER)
# the package's checkout: src/hnclip/data/roots.py -> the repository (when run from a checkout)
_CHECKOUT = Path(__file__).resolve().parents[3]


class RootRefusedError(FileExistsError):
    """A benchmark root that is not ours to write into; the message names the folder and what to do."""


def root_key(benchmark: str) -> str:
    """The config key of ``benchmark``'s root, which every refusal of that folder names."""
    return f"benchmarks.{benchmark}.root"


def _repository(repository) -> Path | None:
    if repository is not None:
        return Path(repository).resolve()
    return _CHECKOUT if (_CHECKOUT / "pyproject.toml").is_file() else None


def unsafe_root_reason(root, repository=None) -> str | None:
    """Why ``root`` (resolved, symlinks followed) can never be a benchmark root, or None when it can be.

    ``repository``: the workflow's checkout (default: the checkout this package runs from, if any).
    """
    path = Path(root).expanduser().resolve()
    if path == Path(path.anchor):
        return f"{path} is the filesystem root"
    home = Path.home().resolve()
    if path == home or path in home.parents:
        return f"{path} is the home folder" + ("" if path == home else f" {home} or a folder above it")
    repo = _repository(repository)
    if repo is not None and (path == repo or path in repo.parents):
        return f"{path} is the repository {repo}" + ("" if path == repo else " or a folder above it")
    return None


def _marker_text(writer: str) -> str:
    when = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return (f"Written by {writer} (hnclip) on {socket.gethostname()} at {when}.\n"
            "This folder holds benchmark files hnclip fetched, rendered or unpacked; hnclip writes into it "
            "again on later runs. Delete the folder to start over.\n")


def is_ours(root) -> bool:
    """Whether ``root`` holds one of our markers (a plain file: a planted link does not count)."""
    root = Path(root)
    return any((root / name).is_file() and not (root / name).is_symlink() for name in MARKERS)


def check_root(root, writer: str, *, known: Iterable[str] = (), key: str | None = None) -> Path:
    """``root`` resolved (symlinks followed) if a writer may write there, else :class:`RootRefusedError`.

    Args:
        root: the benchmark folder.
        writer: who writes, named in errors (``"hnclip fetch --adapter synthetic"``).
        known: top-level names the publisher's files occupy (a root holding only these is a placed copy).
        key: the config key the root came from, named in the error (``benchmarks.docci.root``).
    """
    given = Path(root)
    path = given.expanduser().resolve()
    where = f"{key} = {str(given)!r}" if key else f"root {str(given)!r}"
    link = f" (a link to {path})" if path != given.expanduser().absolute() else ""
    reason = unsafe_root_reason(path)
    if reason:
        raise RootRefusedError(f"{writer}: refusing to write benchmark files into {where}{link}: {reason}. "
                               "Point it at a folder of its own")
    if path.exists() and not path.is_dir():
        raise RootRefusedError(f"{writer}: {where}{link} is a file, not a folder")
    if path.is_dir() and not is_ours(path):
        allowed = {*known, *MARKERS}
        foreign = sorted(p.name for p in path.iterdir() if p.name not in allowed)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise RootRefusedError(
                f"{writer}: {where}{link} holds files hnclip did not make ({shown}) and no {MARKER}; refusing "
                "to write benchmark files over what may be your data. Move them away, or point the root at an "
                "empty folder")
    return path


def claim_root(root, writer: str, *, known: Iterable[str] = (), key: str | None = None,
               marker: str = MARKER, text: str | None = None) -> Path:
    """:func:`check_root`, then create the folder and write ``marker`` (``text``, default: one naming
    ``writer``, the host and the time) unless one of our markers is there; returns the resolved root."""
    path = check_root(root, writer, known=known, key=key)
    path.mkdir(parents=True, exist_ok=True)
    if not is_ours(path):
        tmp = path / f".{marker}.{os.getpid()}.tmp"
        tmp.write_text(text if text is not None else _marker_text(writer), encoding="utf-8")
        os.replace(tmp, path / marker)
    return path
