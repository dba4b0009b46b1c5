"""Pretrained weights the workflow downloads (Long-CLIP-L, SAM), pinned like the benchmarks' files.

A weights source in the config is a local path, loaded as given (the rehearsal's stand-ins, a user's own
copy), or ``hf://OWNER/REPO/FILE`` (one file) / ``hf://OWNER/REPO`` (a whole repository: SAM in
transformers format). Hub sources go through :func:`hnclip.data.download.download_checkpoint`, so they
are hashed into a checksum lock (with the Hub commit they came from) on first use and refused when they
differ later, exactly as benchmark files are. Each source gets its own folder under ``download_dir``
(``resources/checkpoints/<name>/``), its lock beside the files; sources listed in ``sources.json`` keep
their table name and licence, any other Hub source is named after its repository.

A pinned ``revision`` is passed to the Hub (so a moved ``main`` cannot change the weights under a
result) and a pinned ``sha256`` is checked like a publisher's checksum: Long-CLIP re-released its
checkpoints on 2024-05-21, so ``longclip-L.pt`` names two different files and only the pin says which.

Several jobs may ask for the same weights at once (one SAM job per benchmark on a cluster), so each
source's fetch and lock update run under an exclusive ``flock`` of ``download_dir/.<name>.fetching``
(beside the folder, not in it: the folder holds only what the download places, see hnclip.data.roots).
A first fetch that fails (offline, no such repository) removes the folder it made, so a failed job leaves no
half-made ``resources/checkpoints/<name>/`` to be mistaken for a download.
"""

from __future__ import annotations

import fcntl
import logging
import re
import shutil
from pathlib import Path

from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.data.download import LOCK_FILE, download_checkpoint, load_sources
from hnclip.hashing import sha256_file

__all__ = ["HF_SCHEME", "fetch_weights", "parse_hub_source", "source_folder_name"]

log = logging.getLogger(__name__)

HF_SCHEME = "hf://"


def parse_hub_source(source: str) -> tuple[str, str | None]:
    """``hf://OWNER/REPO[/FILE]`` -> (``OWNER/REPO``, ``FILE`` or None for the whole repository)."""
    parts = source[len(HF_SCHEME):].split("/", 2)
    if len(parts) < 2 or not all(parts):
        raise ValueError(f"{source!r}: expected hf://OWNER/REPO/FILE or hf://OWNER/REPO")
    return f"{parts[0]}/{parts[1]}", parts[2] if len(parts) == 3 else None


def fetch_weights(source, download_dir, *, revision: str | None = None, sha256: str | dict | None = None,
                  allow_patterns: list[str] | None = None) -> Path:
    """The local path of ``source``'s weights, fetched and checked against the lock for a Hub source.

    Args:
        source: a local file or folder, or ``hf://OWNER/REPO/FILE`` / ``hf://OWNER/REPO``.
        download_dir: where Hub sources are placed, one folder each (``resources/checkpoints``).
        revision: the Hub commit to fetch (ignored for local paths, which have none).
        sha256: the file's expected hash; a local file is checked against it too. A whole repository takes
            ``{path: sha256}`` (its weights file, say), checked on the fetched files.
        allow_patterns: the files of a whole repository to fetch (default: every file).

    Raises ChecksumMismatchError naming the file, the revision and both hashes.
    """
    text = str(source)
    if not text.startswith(HF_SCHEME):
        path = Path(text).expanduser()
        pins = (sha256 if isinstance(sha256, dict) else {"": sha256}) if sha256 is not None else {}
        for rel, pinned in pins.items():
            target = path / rel if rel else path
            if target.is_file():
                digest = sha256_file(target, progress=True)
                if digest != pinned.lower():
                    raise ChecksumMismatchError(f"{target}: sha256 {digest} does not match the pinned "
                                                f"{pinned.lower()}; refusing to continue")
            elif rel:
                raise FileNotFoundError(f"{target} does not exist, but its sha256 is pinned")
        return path
    repo_id, filename = parse_hub_source(text)
    name, sources = _source_entry(repo_id, filename)
    dest = Path(download_dir) / name
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".{name}.fetching", "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # released when the file closes, or by the kernel if we die
        first = not dest.exists()
        try:
            return download_checkpoint(dest, dest / LOCK_FILE, name=name, sources=sources, revision=revision,
                                       sha256=sha256, allow_patterns=allow_patterns)
        except BaseException:
            if first:  # a first fetch that failed leaves no folder behind (its files stay in the Hub cache)
                shutil.rmtree(dest, ignore_errors=True)
            raise


def source_folder_name(repo_id: str, filename: str | None = None, sources: dict | None = None) -> str:
    """The folder a Hub source is placed in under the download folder: its sources table name, or one made
    from the repository (``OWNER--NAME``)."""
    sources = load_sources() if sources is None else sources
    for name, entry in sources.items():
        if entry.get("kind") != "checkpoint":
            continue
        spec = entry["files"][0]
        hub = spec.get("hub") or spec.get("hub_snapshot")
        if hub["repo_id"] == repo_id and hub.get("filename") == filename:
            return name
    return re.sub(r"[^A-Za-z0-9._-]", "--", repo_id)


def _source_entry(repo_id: str, filename: str | None) -> tuple[str, dict]:
    """The sources table entry of a Hub source, or one made for a repository the table does not list."""
    sources = load_sources()
    name = source_folder_name(repo_id, filename, sources)
    if name in sources:
        return name, sources
    spec = ({"path": filename, "hub": {"repo_id": repo_id, "repo_type": "model", "filename": filename}}
            if filename else {"hub_snapshot": {"repo_id": repo_id, "repo_type": "model"}})
    log.info("hf://%s%s is not in %s: locked without a recorded licence", repo_id,
             f"/{filename}" if filename else "", "hnclip/data/sources.json")
    entry = {"kind": "checkpoint", "licence": "unknown (not in hnclip/data/sources.json)",
             "homepage": f"https://huggingface.co/{repo_id}", "files": [spec]}
    return name, {**sources, name: entry}
