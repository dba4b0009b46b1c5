"""A Hugging Face Hub cache written by hand, so that ``huggingface_hub`` resolves files offline.

``hf_hub_download``/``snapshot_download`` with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointing here
read exactly this layout (huggingface_hub's ``file_download``): ``<type>s--<owner>--<name>/refs/main``
holding a commit hash, ``snapshots/<commit>/<file>`` symlinks into ``blobs/<sha256>``. The download
code then runs unchanged (cache lookup, provenance, hard-link into place, checksum lock) with no network.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

__all__ = ["populate_hub_cache", "repo_cache_dir"]


def repo_cache_dir(cache, repo_type: str, repo_id: str) -> Path:
    return Path(cache) / f"{repo_type}s--{repo_id.replace('/', '--')}"


def populate_hub_cache(cache, repo_type: str, repo_id: str, files: Mapping[str, bytes], commit: str) -> Path:
    """Put ``files`` (repository path -> bytes) at ``commit`` of ``repo_id``; returns the snapshot folder.

    ``commit`` must be 40 hex digits, as the Hub's are. Existing blobs and links are kept, so calling
    it again with the same files changes nothing.
    """
    if len(commit) != 40 or any(c not in "0123456789abcdef" for c in commit):
        raise ValueError(f"commit must be 40 lowercase hex digits, got {commit!r}")
    repo = repo_cache_dir(cache, repo_type, repo_id)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    snapshot = repo / "snapshots" / commit
    for name, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        blob = repo / "blobs" / digest
        blob.parent.mkdir(parents=True, exist_ok=True)
        if not blob.is_file():
            tmp = blob.with_name(blob.name + ".tmp")
            tmp.write_bytes(data)
            tmp.replace(blob)
        link = snapshot / name
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(Path("../" * (len(Path(name).parts) + 1)) / "blobs" / digest)
    return snapshot
