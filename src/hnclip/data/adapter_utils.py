"""Shared checks for the real-benchmark adapters (docci, dci, long_dci, urban1k, vg).

Every adapter reads a publisher's files and must fail the same way on bad input: the error names the
file and the record (line number, annotation file, example id) so a broken download is fixed in one
look. Counts are checked against each benchmark's protocol constant unless the caller passes
``expected_count=None`` (fixtures, subsets).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path, PurePosixPath

import pandas as pd
from tqdm import tqdm

from . import MANIFEST_COLUMNS

__all__ = [
    "PROTOCOL",
    "BenchmarkFormatError",
    "CountMismatchError",
    "check_count",
    "decode_all_images",
    "find_layout_root",
    "iter_json_lines",
    "make_manifest",
    "not_utf8_where",
    "read_json",
    "require_image",
    "require_text",
    "resolve_expected",
    "safe_relative_path",
]


class _UseProtocol:
    """Sentinel: 'use the benchmark's protocol count', distinct from ``None`` ('do not check')."""

    def __repr__(self) -> str:
        return "PROTOCOL"


PROTOCOL = _UseProtocol()


class BenchmarkFormatError(ValueError):
    """A publisher file does not have the documented format (malformed record, missing image, empty caption)."""


class CountMismatchError(ValueError):
    """A split has a different number of records than the evaluation protocol lists."""


def resolve_expected(expected_count, counts: dict[str, int], benchmark: str, split: str) -> int | None:
    """The count to enforce: the protocol's for ``PROTOCOL``, else the caller's (``None`` disables the check)."""
    if expected_count is PROTOCOL:
        if split not in counts:
            raise ValueError(f"{benchmark}: no protocol count for split {split!r}; known: {sorted(counts)}")
        return counts[split]
    if expected_count is not None and (
        isinstance(expected_count, bool) or not isinstance(expected_count, int)
    ):
        raise TypeError(f"{benchmark}: expected_count must be an int or None, got {expected_count!r}")
    return expected_count


def check_count(benchmark: str, split: str, actual: int, expected: int | None, source: Path) -> None:
    if expected is not None and actual != expected:
        raise CountMismatchError(
            f"{benchmark} ({split}) under {source}: found {actual} records, the protocol lists {expected}; "
            "the download is incomplete or a different release (pass expected_count=None only for subsets)"
        )


def find_layout_root(root: Path, marker: str, wrappers: Iterable[str], benchmark: str) -> Path:
    """The folder holding ``marker``: ``root`` itself or one of the archive's top-level ``wrappers`` inside it.

    Publishers' archives unpack into a top-level folder (``Urban1k/``, ``densely_captioned_images/``);
    accepting both the unpack folder and that top-level folder keeps "the files as distributed" one
    layout, not two.
    """
    root = Path(root)
    for candidate in (root, *(root / w for w in wrappers)):
        if (candidate / marker).exists():
            return candidate
    looked = [str(root / marker)] + [str(root / w / marker) for w in wrappers]
    raise FileNotFoundError(f"{benchmark}: none of {looked} exists; is {root} the unpacked download?")


def not_utf8_where(data: bytes) -> str:
    """Where ``data`` (a text file's bytes) stops being UTF-8: ``line N, column C (byte 0xE9)``.

    Python's UnicodeDecodeError gives a byte position, and, from a file read in chunks, one within the
    chunk: a person needs the line (and the likely cause, a file saved as Latin-1 or Windows-1252).
    """
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        return f"line {line}, column {column} (byte 0x{data[err.start]:02X})"
    return "(decodes as UTF-8 when read whole)"


def read_json(path: Path, benchmark: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{benchmark}: {path} does not exist") from e
    except json.JSONDecodeError as e:
        raise BenchmarkFormatError(
            f"{benchmark}: {path} is not valid JSON (line {e.lineno}, column {e.colno}: {e.msg})"
        ) from e
    except UnicodeDecodeError as e:
        raise BenchmarkFormatError(f"{benchmark}: {path} is not UTF-8 text at {not_utf8_where(Path(path).read_bytes())}"
                                   f" ({e.reason})") from e


def iter_json_lines(path: Path, benchmark: str) -> Iterator[tuple[int, dict]]:
    """(line number, object) for each non-blank line; a line that is not a JSON object is an error."""
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{benchmark}: {path} does not exist") from e
    with f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as e:
                raise BenchmarkFormatError(
                    f"{benchmark}: {path} line {line_no} is not valid JSON ({e.msg})"
                ) from e
            if not isinstance(record, dict):
                raise BenchmarkFormatError(
                    f"{benchmark}: {path} line {line_no} is a JSON {type(record).__name__}, not an object"
                )
            yield line_no, record


def require_text(record: dict, key: str, where: str, *, allow_empty: bool = False) -> str:
    """``record[key]`` as a string stripped at both ends; ``where`` names the file and record for errors."""
    if key not in record:
        raise BenchmarkFormatError(f"{where}: missing field {key!r} (fields: {sorted(record)})")
    value = record[key]
    if not isinstance(value, str):
        raise BenchmarkFormatError(
            f"{where}: field {key!r} is {type(value).__name__} {value!r}, not a string"
        )
    value = value.strip()
    if not value and not allow_empty:
        raise BenchmarkFormatError(f"{where}: field {key!r} is empty")
    return value


def safe_relative_path(name: str, where: str) -> PurePosixPath:
    """A file name from an annotation, refused when it could point outside the benchmark folder."""
    path = PurePosixPath(name.replace("\\", "/"))
    if not name or path.is_absolute() or ".." in path.parts:
        raise BenchmarkFormatError(
            f"{where}: image name {name!r} is not a relative path inside the benchmark"
        )
    return path


def require_image(path: Path, where: str) -> Path:
    if not path.is_file():
        raise BenchmarkFormatError(f"{where}: image {path} does not exist")
    return path


def make_manifest(rows: list[tuple[str, Path, str]], benchmark: str, source: Path) -> pd.DataFrame:
    """Rows (image_id, image path, caption) -> manifest; duplicate ids are an error naming both rows."""
    seen: dict[str, int] = {}
    for i, (image_id, _, _) in enumerate(rows):
        if image_id in seen:
            raise BenchmarkFormatError(
                f"{benchmark}: {source} lists image {image_id!r} twice (records {seen[image_id]} and {i})"
            )
        seen[image_id] = i
    frame = pd.DataFrame(
        {
            "image_id": pd.Series([r[0] for r in rows], dtype=object),
            "image_path": pd.Series([str(Path(r[1]).resolve()) for r in rows], dtype=object),
            "caption": pd.Series([r[2] for r in rows], dtype=object),
        },
        columns=list(MANIFEST_COLUMNS),
    )
    return frame


def decode_all_images(manifest: pd.DataFrame, benchmark: str) -> None:
    """Decode every image fully: catches truncated or corrupt JPEGs before a training run does.

    Costs one full decode per image (minutes for DOCCI's 15k photos), so adapters only call it when
    asked (``verify_images=True``); the image store decodes everything anyway.
    """
    from PIL import ImageFile

    # Another module may have switched on PIL's tolerance for truncated files; a check must not inherit it.
    tolerant = ImageFile.LOAD_TRUNCATED_IMAGES
    ImageFile.LOAD_TRUNCATED_IMAGES = False
    try:
        _decode_all(manifest, benchmark)
    finally:
        ImageFile.LOAD_TRUNCATED_IMAGES = tolerant


def _decode_all(manifest: pd.DataFrame, benchmark: str) -> None:
    from PIL import Image

    for image_id, path in tqdm(
        zip(manifest["image_id"], manifest["image_path"], strict=True),
        total=len(manifest),
        desc=f"verify {benchmark} images",
        unit="img",
        disable=len(manifest) < 100,
    ):
        try:
            with Image.open(path) as image:
                image.load()
        except Exception as e:  # PIL raises OSError, SyntaxError, ValueError... for broken files
            raise BenchmarkFormatError(
                f"{benchmark}: image {path} (record {image_id!r}) cannot be decoded: {e}"
            ) from e
