"""Your own captions in WebDataset shards: tars of ``<key>.jpg`` + ``<key>.txt``, as img2dataset writes them.

The layout webdataset, open_clip (``--train-data 'shards/{00000..00012}.tar'``) and img2dataset
(``--output_format webdataset``) share: each tar member is ``<key>.<ext>``, where the key is the member's
path up to the first dot of its file name and the extension the rest, lower-cased; the members of one
sample are adjacent. A sample is one image (``image_exts``, default jpg/jpeg/png/webp: open_clip's
``jpg;png;jpeg;webp``) and its caption (``caption_ext``, default ``txt``: UTF-8 text, the whole file with
surrounding white space stripped, as open_clip reads it). Other members of a sample (img2dataset's
``<key>.json``) are not read; img2dataset's ``*_stats.json`` and ``*.parquet`` lie beside the tars.
Configured by ``benchmarks.<name>.webdataset``::

    benchmarks:
      mine:
        adapter: webdataset
        root: /data/mine
        train_set: mine
        webdataset:
          shards: {train: "train/{00000..00003}.tar", test: "test/00000.tar"}

Each split is a shard pattern (brace-expanded, :func:`hnclip.data.own.expand_braces`; no dependency) or
a list of them, relative to ``root``. ``.tar.gz``/``.tgz`` shards are read too.

The image id is the sample's key (unique within a split: a key in two shards of a split is an error);
a sample's image is unpacked to ``work_dir/<key>.<ext>`` (the prepare step passes
``results/data/<name>/<split>_images/originals``), which the manifest then points at. One image per
sample, so one caption per image. The check that no image is in two splits compares the images' bytes:
see :mod:`hnclip.data.own`.
"""

from __future__ import annotations

import os
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .adapter_utils import make_manifest, safe_relative_path
from .own import OwnFilesError, check_disjoint, check_image_bytes, split_files, split_settings

__all__ = ["load", "load_webdataset", "shard_members", "split_key"]

_KEY = re.compile(r"^((?:.*/|)[^./][^.]*)\.([^/]*)$")  # webdataset's base_plus_ext (a hidden file has no key)


def split_key(name: str) -> tuple[str, str] | None:
    """(key, lower-cased extension) of a tar member name, or None when it has no ``key.ext`` form."""
    m = _KEY.match(name)
    return (m.group(1), m.group(2).lower()) if m else None


def load_webdataset(root: Path, split: str, *, settings: dict | None = None, work_dir=None,
                    benchmark: str = "webdataset", verify_images: bool = True) -> pd.DataFrame:
    """Split ``split`` of the shards at ``root`` as a manifest (shard order, then member order).

    ``settings``: the ``benchmarks.<name>.webdataset`` block; ``work_dir``: the folder the images are
    unpacked into (required). Raises FileNotFoundError for a missing shard and
    :class:`~hnclip.data.own.OwnFilesError` naming the shard and the member for a sample without its
    image or caption, two images under one key, an empty or non-UTF-8 caption, an undecodable image, a
    member that is a link, a key repeated in the split, and an image that another split holds too.
    """
    settings = split_settings("webdataset", settings, benchmark)
    shards = split_files("webdataset", root, settings, benchmark)
    if split not in shards:
        raise ValueError(f"{benchmark}: split {split!r} has no shards; benchmarks.{benchmark}.webdataset.shards "
                         f"lists {sorted(shards)}")
    if work_dir is None:
        raise ValueError(f"{benchmark}: the webdataset adapter needs a work_dir to unpack the images into")
    work_dir = Path(work_dir)
    image_exts = {e.lower().lstrip(".") for e in settings["image_exts"]}
    caption_ext = settings["caption_ext"].lower().lstrip(".")
    samples: dict[str, dict] = {}
    for shard in shards[split]:
        for member, key, ext, data in shard_members(shard, image_exts | {caption_ext}):
            where = f"shard {shard} member {member!r}"
            sample = samples.setdefault(key, {"shard": shard, "members": []})
            if sample["shard"] != shard:
                raise OwnFilesError(f"webdataset: key {key!r} is in shard {sample['shard']} and again in {where}; "
                                    "keys must be unique within a split")
            sample["members"].append(member)
            if data is None:  # a member hnclip does not read (img2dataset's <key>.json)
                continue
            if ext == caption_ext:
                if "caption" in sample:
                    raise OwnFilesError(f"{where}: a second caption for key {key!r}")
                sample["caption"] = _caption(data, where)
                sample["caption_member"] = member
                continue
            if "image" in sample:
                raise OwnFilesError(f"{where}: key {key!r} already has the image {sample['image_member']!r}; "
                                    "a sample holds one image")
            digest = check_image_bytes(data, where) if verify_images else ""
            target = work_dir / f"{safe_relative_path(key, where)}.{ext}"
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            sample.update(image=target, image_member=member, digest=digest)
    if not samples:
        raise OwnFilesError(f"webdataset: the shards of split {split!r} ({', '.join(map(str, shards[split]))}) "
                            f"hold no sample (members named <key>.<{'|'.join(sorted(image_exts))}> and "
                            f"<key>.{caption_ext})")
    rows, digests = [], {}
    for key, sample in samples.items():
        if "image" not in sample and "caption" not in sample:
            raise OwnFilesError(f"shard {sample['shard']} member {sample['members'][0]!r}: key {key!r} has neither "
                                f"an image (<key>.<{'|'.join(sorted(image_exts))}>) nor a caption "
                                f"(<key>.{caption_ext}), only {sample['members']}")
        if "image" not in sample:
            raise OwnFilesError(f"shard {sample['shard']} member {sample['caption_member']!r}: caption without an "
                                f"image (no {key}.<{'|'.join(sorted(image_exts))}> in the shard)")
        if "caption" not in sample:
            raise OwnFilesError(f"shard {sample['shard']} member {sample['image_member']!r}: image without a "
                                f"caption (no {key}.{caption_ext} in the shard)")
        rows.append((key, sample["image"], sample["caption"]))
        digests.setdefault(sample["digest"], f"shard {sample['shard']} member {sample['image_member']!r}")
    if verify_images:
        others = ((other, _split_digests(shards[other], image_exts)) for other in shards if other != split)
        check_disjoint(benchmark, split, digests, others)
    return make_manifest(rows, benchmark, shards[split][0])


load = load_webdataset


def shard_members(shard: Path, exts: set[str]) -> Iterator[tuple[str, str, str, bytes | None]]:
    """(member name, key, extension, bytes) of each file member of ``shard``; the bytes are read only for
    the extensions in ``exts`` (None for the others).

    Folders are skipped; a member that is not a regular file (a link) or has no ``key.ext`` name is an
    error, so nothing in a shard is passed over unseen.
    """
    if not Path(shard).is_file():
        raise FileNotFoundError(f"shard {shard} does not exist")
    try:
        with tarfile.open(shard, mode="r|*") as tar:
            for info in tar:
                if info.isdir():
                    continue
                where = f"shard {shard} member {info.name!r}"
                if not info.isfile():
                    raise OwnFilesError(f"{where} is a link or special file, not a file")
                parts = split_key(info.name)
                if parts is None:
                    raise OwnFilesError(f"{where} is not named <key>.<extension>")
                key, ext = parts
                if ext not in exts:
                    yield info.name, key, ext, None
                    continue
                handle = tar.extractfile(info)
                yield info.name, key, ext, handle.read() if handle is not None else b""
    except (tarfile.TarError, EOFError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise OwnFilesError(f"shard {shard} cannot be read as a tar archive ({type(e).__name__}: {e})") from e


def _caption(data: bytes, where: str) -> str:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise OwnFilesError(f"{where}: the caption is not UTF-8 text ({e})") from e
    if not text.strip():
        raise OwnFilesError(f"{where}: empty caption")
    return text.strip()


def _split_digests(shards: list[Path], image_exts: set[str]) -> dict[str, str]:
    """sha256 of each image in another split's shards -> where (hashing only: that split's own prepare
    step decodes them)."""
    import hashlib

    out = {}
    for shard in shards:
        for member, _, _, data in shard_members(shard, image_exts):
            if data is None:
                continue
            out.setdefault(hashlib.sha256(data).hexdigest(), f"shard {shard} member {member!r}")
    return out
