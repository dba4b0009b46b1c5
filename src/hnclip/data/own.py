"""Your own captions: what the ``table`` and ``webdataset`` adapters share.

Both read files a person already has, configured by name alone (``benchmarks.<name>.table`` or
``benchmarks.<name>.webdataset``): each split is one table file or a list of shard patterns, relative to
the benchmark's ``root``. hnclip never writes into that root; ``hnclip fetch`` only checks that the files
are there and records them, and the images of WebDataset shards are unpacked under the prepared split's
folder (``results/data/<name>/<split>_images/originals/``).

Rules both adapters follow (docs/own-data.md, "Your own captions"):

- every row is one (image, caption) pair and nothing is dropped: a missing column or field, a missing,
  unreadable or undecodable image, an empty caption, a shard member without its pair stops the prepare
  step with an error naming the file and the row (line, row or tar member);
- several captions of one image (rows naming the same image file; a JSONL/Parquet caption that is a list
  of strings) are all kept. In a ``test`` or ``val`` split each caption is one query and the image's id
  groups them (the image is encoded once; image->text counts a hit when any of its captions ranks in the
  top k, as :func:`hnclip.evaluate.recall_at_k` does). In the ``train`` split each caption is one training
  pair: the image's k-th caption (k >= 2) gets the image id ``<id>#k``, so that every training pair has
  its own image-store row (the trainer, the fraction subsets and GOAL's segments are keyed by image id);
  two captions of one image in one micro-batch are then negatives of each other, as in open_clip;
- one image in two splits is an error naming both places: the same file, or byte-identical image files
  (WebDataset keys are the writer's counters, which restart in every img2dataset output folder, so
  only the bytes tell whether a test image was trained on). The check reads every image of the other
  splits once per prepared split.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections.abc import Iterable
from pathlib import Path

from . import SPLITS as _SPLITS
from .adapter_utils import BenchmarkFormatError

__all__ = ["ADAPTERS", "DEFAULTS", "OwnFilesError", "check_disjoint", "check_image_bytes", "expand_braces",
           "split_files", "split_settings"]

ADAPTERS = ("table", "webdataset")
# every key of each adapter's config block and its default (the schema repeats them;
# tests/test_data_own_captions.py checks that they agree)
DEFAULTS: dict[str, dict] = {
    "table": {"files": {}, "img_key": "filepath", "caption_key": "title", "separator": "\t"},
    "webdataset": {"shards": {}, "image_exts": ["jpg", "jpeg", "png", "webp"], "caption_ext": "txt"},
}
_FILES_KEY = {"table": "files", "webdataset": "shards"}


class OwnFilesError(BenchmarkFormatError):
    """Own captions that do not have the documented layout; the message names the file and the row."""


def split_settings(adapter: str, settings: dict | None, benchmark: str = "") -> dict:
    """The adapter's config block with its defaults filled in; an unknown key or a wrong type is an error."""
    if adapter not in DEFAULTS:
        raise ValueError(f"no own-captions adapter {adapter!r}; known: {', '.join(ADAPTERS)}")
    settings = dict(settings or {})
    where = f"benchmarks.{benchmark}.{adapter}" if benchmark else adapter
    unknown = sorted(set(settings) - set(DEFAULTS[adapter]))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; known: {sorted(DEFAULTS[adapter])}")
    merged = {**DEFAULTS[adapter], **settings}
    files = merged[_FILES_KEY[adapter]]
    if not isinstance(files, dict) or not files:
        raise ValueError(f"{where}.{_FILES_KEY[adapter]}: give each split's "
                         f"{'table file' if adapter == 'table' else 'shards'}, e.g. {{train: ..., test: ...}}")
    for split, value in files.items():
        if split not in _SPLITS:
            raise ValueError(f"{where}.{_FILES_KEY[adapter]}: unknown split {split!r}; known: {', '.join(_SPLITS)}")
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, str) and v.strip() for v in values) or (
                adapter == "table" and isinstance(value, list)):
            kind = "a file name" if adapter == "table" else "a shard pattern or a list of them"
            raise ValueError(f"{where}.{_FILES_KEY[adapter]}.{split}: expected {kind}, got {value!r}")
    if adapter == "table" and len(merged["separator"]) != 1:
        raise ValueError(f"{where}.separator: one character, got {merged['separator']!r}")
    return merged


def split_files(adapter: str, root, settings: dict | None, benchmark: str = "") -> dict[str, list[Path]]:
    """Split -> the files it reads (a table; the shards, brace patterns expanded), as absolute paths.

    Relative names are taken against ``root``; nothing is checked for existence here.
    """
    settings = split_settings(adapter, settings, benchmark)
    root = Path(root).expanduser().absolute()
    out = {}
    for split, value in settings[_FILES_KEY[adapter]].items():
        names = [value] if isinstance(value, str) else list(value)
        if adapter == "webdataset":
            names = [expanded for name in names for expanded in expand_braces(name)]
        out[split] = [_absolute(root / Path(name).expanduser()) for name in names]
    return out


def _absolute(path: Path) -> Path:
    """``path`` made absolute and normalised (``a/../b`` -> ``b``), symlinks kept as they are."""
    import os

    return Path(os.path.normpath(path.absolute()))


# ---------------------------------------------------------------------------------------- brace patterns
_BRACE = re.compile(r"\{([^{}]*)\}")
_NUMERIC_RANGE = re.compile(r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$")
_CHAR_RANGE = re.compile(r"^([A-Za-z])\.\.([A-Za-z])$")


def expand_braces(pattern: str) -> list[str]:
    """Shell-style brace expansion, as webdataset's and open_clip's shard URLs use it (``braceexpand``).

    ``train-{000000..000003}.tar`` -> four names, zero padding kept (the wider end sets the width);
    ``{a,b}`` alternatives, ``{0..10..2}`` steps, ``{a..e}`` letter ranges, several and nested groups.
    A brace without a range or a comma is kept as it is. The innermost group is expanded first.
    """
    match = _BRACE.search(pattern)
    if match is None:
        return [pattern]
    head, body, tail = pattern[:match.start()], match.group(1), pattern[match.end():]
    options = _brace_options(body)
    if options is None:  # not an expansion: keep the braces, expand what follows them
        return [head + "{" + body + "}" + rest for rest in expand_braces(tail)] if "{" in tail else [pattern]
    return [expanded for option in options for expanded in expand_braces(head + option + tail)]


def _brace_options(body: str) -> list[str] | None:
    if m := _NUMERIC_RANGE.match(body):
        start, end = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3))) if m.group(3) else 1
        if step == 0:
            raise ValueError(f"brace pattern {{{body}}}: step 0")
        width = max(len(m.group(1).lstrip("-")), len(m.group(2).lstrip("-")))
        padded = any(g.lstrip("-").startswith("0") and len(g.lstrip("-")) > 1 for g in m.group(1, 2))
        values = range(start, end + 1, step) if start <= end else range(start, end - 1, -step)
        return [f"{v:0{width + (v < 0)}d}" if padded else str(v) for v in values]
    if m := _CHAR_RANGE.match(body):
        a, b = ord(m.group(1)), ord(m.group(2))
        return [chr(c) for c in (range(a, b + 1) if a <= b else range(a, b - 1, -1))]
    if "," in body:
        return body.split(",")
    return None


# ------------------------------------------------------------------------------------------- image checks
def check_image_bytes(data: bytes, where: str) -> str:
    """sha256 of an image file's bytes after decoding it fully (PIL); ``where`` names the file and row."""
    from PIL import Image, ImageFile

    tolerant = ImageFile.LOAD_TRUNCATED_IMAGES  # a truncated file must fail here, whatever another module set
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
        raise OwnFilesError(f"{where}: cannot be decoded as an image ({type(e).__name__}: {e})") from e
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = tolerant
    return hashlib.sha256(data).hexdigest()


def check_disjoint(adapter: str, split: str, digests: dict[str, str], others: Iterable[tuple[str, dict[str, str]]]
                   ) -> None:
    """Refuse an image of ``split`` that another split holds too (``digests``: sha256 -> where it is)."""
    for other, other_digests in others:
        for digest, where in digests.items():
            if digest in other_digests:
                raise OwnFilesError(
                    f"{adapter}: the same image is in split {split!r} ({where}) and split {other!r} "
                    f"({other_digests[digest]}); a test image seen in training inflates its recall: "
                    "remove it from one of the splits")
