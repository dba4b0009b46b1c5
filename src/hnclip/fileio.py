"""Atomic writes: a reader (or a resumed job after a kill) sees the old file or the whole new one.

Write to a temporary name in the same folder, then ``os.replace`` it over the target; the rename is
atomic on one filesystem, which is why the temporary file never lives in /tmp.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

__all__ = ["write_json_atomic", "write_text_atomic"]


def write_text_atomic(path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as handle:
        handle.write(text)
    os.replace(tmp, path)
    return path


def write_json_atomic(path, data, sort_keys: bool = True) -> Path:
    """``data`` as indented JSON, keys sorted unless ``sort_keys`` is False (an order a reader relies on):
    the same data gives the same bytes whatever order a process built its dicts in."""
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=sort_keys) + "\n")


def link_or_copy_atomic(source, dest) -> Path:
    """Put ``source``'s file at ``dest`` without a moment where ``dest`` is partial: a hard link (no second
    copy of a multi-GB file) or, where links are impossible, a copy, renamed into place."""
    dest = Path(dest)
    tmp = dest.with_name(f"{dest.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    try:
        os.link(source, tmp)
    except OSError:
        shutil.copyfile(source, tmp)
    os.replace(tmp, dest)
    return dest
