"""Your own captions in a table: CSV, TSV, JSON lines or Parquet with an image-path and a caption column.

open_clip's convention (``--csv-img-key filepath --csv-caption-key title --csv-separator "\\t"``): one row
per (image, caption) pair, the image column a path (relative paths are taken against the table's own
folder), tab-separated by default whatever the extension. Configured by ``benchmarks.<name>.table``::

    benchmarks:
      mine:
        adapter: table
        root: /data/mine                     # the table names below are relative to it
        train_set: mine
        table:
          files: {train: train.csv, test: test.csv}
          img_key: filepath                  # open_clip's --csv-img-key
          caption_key: title                 # open_clip's --csv-caption-key
          separator: "\\t"                    # open_clip's --csv-separator (.csv/.tsv only)

Formats, by the file's extension (a further ``.gz`` is decompressed): ``.csv``/``.tsv`` (a header row,
then one row per pair, read with Python's csv module: ``"`` quotes a field that holds the separator or
a line break), ``.jsonl``/``.jsonlines``/``.ndjson`` (one JSON object per line), ``.parquet`` (pandas with
pyarrow, which hnclip does not pin: install it to read Parquet). In JSON lines and Parquet a caption may
be a list of strings: several captions of one image in one row.

Several captions per image, the image ids and the check that no image is in two splits: see
:mod:`hnclip.data.own`. An image's id is its path relative to ``root`` (POSIX separators) when it lies
inside it, else its absolute path (symlinks resolved in both).
"""

from __future__ import annotations

import csv
import gzip
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pandas as pd

from .adapter_utils import make_manifest, not_utf8_where
from .own import OwnFilesError, check_disjoint, check_image_bytes, split_files, split_settings

__all__ = ["FORMATS", "SEVERAL_CAPTIONS_PER_IMAGE", "load", "load_table", "table_rows"]

FORMATS = {".csv": "csv", ".tsv": "csv", ".jsonl": "jsonl", ".jsonlines": "jsonl", ".ndjson": "jsonl",
           ".parquet": "parquet"}
# test/val manifests may repeat an image id (one row per caption): hnclip.data.load_benchmark allows it
SEVERAL_CAPTIONS_PER_IMAGE = True
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_OTHER_SEPARATORS = (",", "\t", ";", "|")


def load_table(root: Path, split: str, *, settings: dict | None = None, benchmark: str = "table",
               verify_images: bool = True) -> pd.DataFrame:
    """Split ``split`` of the table benchmark at ``root`` as a manifest (rows in file order).

    ``settings``: the ``benchmarks.<name>.table`` block. Raises FileNotFoundError for a missing table,
    :class:`~hnclip.data.own.OwnFilesError` naming the file and the line (or row) for a missing column or
    field, a missing or undecodable image, an empty caption, and for an image that another split holds too.
    ``verify_images``: decode every image of the split (and hash those of the other splits) here, so such
    errors name the table row; False skips both (the image store decodes everything anyway).
    """
    settings = split_settings("table", settings, benchmark)
    files = split_files("table", root, settings, benchmark)
    if split not in files:
        raise ValueError(f"{benchmark}: split {split!r} has no table; benchmarks.{benchmark}.table.files lists "
                         f"{sorted(files)}")
    root = Path(root).expanduser().absolute()
    path = files[split][0]
    entries = list(table_rows(path, settings))
    if not entries:
        raise OwnFilesError(f"{benchmark}: {path} has no rows")
    ids, digests = {}, {}
    for where, image, _ in entries:
        if image in ids:
            continue
        ids[image] = _image_id(image, root)
        if verify_images:
            digests.setdefault(_digest(image, where), f"{where}: image {image}")
    if verify_images:
        others = ((other, _split_digests(files[other][0], settings)) for other in files if other != split)
        check_disjoint(benchmark, split, digests, others)
    rows, seen = [], {}
    for _, image, caption in entries:
        k = seen[image] = seen.get(image, 0) + 1
        image_id = ids[image] if split != "train" or k == 1 else f"{ids[image]}#{k}"
        rows.append((image_id, image, caption))
    # repeated ids (test/val: several captions of one image) are fine; in train they would be a clash of
    # a "<id>#k" with another image's id, which make_manifest names
    if split == "train":
        return make_manifest(rows, benchmark, path)
    return _grouped_manifest(rows)


load = load_table


def table_rows(path: Path, settings: dict) -> Iterator[tuple[str, Path, str]]:
    """(where, absolute image path, caption) per caption in ``path``, in file order; checks each row.

    ``where`` names the file and the line (CSV/TSV, JSON lines) or the row (Parquet). An image that does
    not exist is an error here; its contents are checked by the caller.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"table {path} does not exist")
    kind = _kind(path)
    reader = {"csv": _csv_records, "jsonl": _jsonl_records, "parquet": _parquet_records}[kind]
    img_key, caption_key = settings["img_key"], settings["caption_key"]
    for where, record in reader(path, settings):
        image = _image_path(record[img_key], path, where, img_key)
        captions = record[caption_key]
        captions = list(captions) if isinstance(captions, list | tuple) or _is_array(captions) else [captions]
        if not captions:
            raise OwnFilesError(f"{where}: column {caption_key!r} is an empty list (no caption)")
        for i, caption in enumerate(captions):
            label = caption_key if len(captions) == 1 else f"{caption_key}[{i}]"
            if caption is None or (isinstance(caption, float) and caption != caption):
                raise OwnFilesError(f"{where}: column {label!r} has no caption (null)")
            if not isinstance(caption, str):
                raise OwnFilesError(f"{where}: column {label!r} is {type(caption).__name__} {caption!r}, not text")
            if not caption.strip():
                raise OwnFilesError(f"{where}: column {label!r} is an empty caption")
            yield where, image, caption.strip()


def _kind(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    ext = suffixes[-1] if suffixes else ""
    if ext not in FORMATS or (FORMATS[ext] == "parquet" and path.suffix.lower() == ".gz"):
        raise OwnFilesError(f"table {path}: unknown format {ext or '(no extension)'!r}; known: "
                            f"{', '.join(FORMATS)} (CSV, TSV and JSON lines may end in .gz)")
    return FORMATS[ext]


def _open_text(path: Path):
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _not_utf8(path: Path, error: UnicodeDecodeError) -> OwnFilesError:
    """The error for a table that is not UTF-8, naming its line (read again whole: the decoder's position
    is a byte within a chunk)."""
    try:
        with (gzip.open(path, "rb") if path.suffix.lower() == ".gz" else open(path, "rb")) as f:
            where = not_utf8_where(f.read())
    except (OSError, EOFError):
        where = f"byte {error.start} of a chunk"
    return OwnFilesError(f"table {path} {where}: not UTF-8 text ({error.reason}); a table saved as Latin-1 or "
                         "Windows-1252? Save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)")


def _missing_columns(path: Path, columns: list[str], settings: dict, where: str | None = None) -> None:
    wanted = [(k, settings[k]) for k in ("img_key", "caption_key")]
    missing = [(k, c) for k, c in wanted if c not in columns]
    if not missing:
        return
    names = ", ".join(f"{c!r} ({k})" for k, c in missing)
    hint = ""
    if len(columns) == 1 and settings.get("separator") is not None:
        found = [s for s in _OTHER_SEPARATORS if s != settings["separator"] and s in columns[0]]
        if found:
            hint = (f"; the header reads as one column, so the separator may be {found[0]!r} rather than "
                    f"{settings['separator']!r} (set table.separator)")
    raise OwnFilesError(f"{where or path}: no column {names}; the columns there are {columns}{hint}")


def _csv_records(path: Path, settings: dict) -> Iterator[tuple[str, dict]]:
    try:
        with _open_text(path) as f:
            reader = csv.reader(f, delimiter=settings["separator"], strict=True)
            try:
                header = next(reader)
            except StopIteration:
                raise OwnFilesError(f"table {path} is empty (no header row)") from None
            except csv.Error as e:
                raise OwnFilesError(f"table {path} (header, line 1): not valid CSV ({e})") from e
            _missing_columns(path, header, settings, f"table {path} (header, line 1)")
            for column in (settings["img_key"], settings["caption_key"]):
                if header.count(column) > 1:
                    raise OwnFilesError(f"table {path} (header, line 1): column {column!r} appears "
                                        f"{header.count(column)} times")
            index = {settings[k]: header.index(settings[k]) for k in ("img_key", "caption_key")}
            line = reader.line_num + 1
            while True:
                try:
                    fields = next(reader)
                except StopIteration:
                    break
                except csv.Error as e:
                    raise OwnFilesError(f"table {path} line {line}: not valid CSV ({e})") from e
                where = f"table {path} line {line}"
                line = reader.line_num + 1
                if not fields:  # a blank line is no row (as pandas' skip_blank_lines)
                    continue
                if len(fields) != len(header):
                    raise OwnFilesError(f"{where}: {len(fields)} field(s), the header has {len(header)} "
                                        f"(separator {settings['separator']!r})")
                yield where, {column: fields[i] for column, i in index.items()}
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from e
    except (OSError, EOFError) as e:  # gzip: not a gzip file, truncated
        raise OwnFilesError(f"table {path} cannot be read ({e})") from e


def _jsonl_records(path: Path, settings: dict) -> Iterator[tuple[str, dict]]:
    try:
        with _open_text(path) as f:
            for line_no, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                where = f"table {path} line {line_no}"
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as e:
                    raise OwnFilesError(f"{where}: not valid JSON ({e.msg})") from e
                if not isinstance(record, dict):
                    raise OwnFilesError(f"{where}: a JSON {type(record).__name__}, not an object")
                _missing_columns(path, list(record), {**settings, "separator": None}, where)
                yield where, record
    except UnicodeDecodeError as e:
        raise _not_utf8(path, e) from e
    except (OSError, EOFError) as e:
        raise OwnFilesError(f"table {path} cannot be read ({e})") from e


def _parquet_records(path: Path, settings: dict) -> Iterator[tuple[str, dict]]:
    try:
        frame = pd.read_parquet(path)
    except ImportError as e:
        raise OwnFilesError(f"table {path}: reading Parquet needs pyarrow, which hnclip does not pin "
                            f"(pip install pyarrow), or convert the table to CSV/TSV/JSON lines ({e})") from e
    except Exception as e:  # pyarrow's errors for a file that is not Parquet
        raise OwnFilesError(f"table {path} cannot be read as Parquet ({type(e).__name__}: {e})") from e
    _missing_columns(path, [str(c) for c in frame.columns], {**settings, "separator": None}, f"table {path}")
    img, cap = settings["img_key"], settings["caption_key"]
    for row, (image, caption) in enumerate(zip(frame[img], frame[cap], strict=True), start=1):
        yield f"table {path} row {row}", {img: image, cap: caption}


def _is_array(value) -> bool:
    return type(value).__name__ == "ndarray"  # Parquet list columns arrive as numpy arrays


def _image_path(value, table: Path, where: str, column: str) -> Path:
    if value is None or (isinstance(value, float) and value != value):
        raise OwnFilesError(f"{where}: column {column!r} has no image path (null)")
    if not isinstance(value, str):
        raise OwnFilesError(f"{where}: column {column!r} is {type(value).__name__} {value!r}, not a path")
    if not value.strip():
        raise OwnFilesError(f"{where}: column {column!r} is empty (no image path)")
    if _URL.match(value):
        raise OwnFilesError(f"{where}: image {value!r} is a URL; hnclip reads local files (download the "
                            "images first, e.g. with img2dataset, which writes WebDataset shards)")
    image = Path(os.path.normpath(table.parent.absolute() / Path(value).expanduser()))
    if not image.is_file():
        relative = f" ({value!r} relative to the table's folder {table.parent})" if not Path(value).is_absolute() else ""
        raise OwnFilesError(f"{where}: image {image} does not exist{relative}")
    return image.resolve()  # two paths to one file (a link) are one image


def _image_id(image: Path, root: Path) -> str:
    """The image's path relative to ``root`` (both with symlinks resolved), else its resolved path."""
    image, root = image.resolve(), root.resolve()
    try:
        return image.relative_to(root).as_posix()
    except ValueError:
        return str(image)


def _digest(image: Path, where: str) -> str:
    try:
        data = image.read_bytes()
    except OSError as e:
        raise OwnFilesError(f"{where}: image {image} cannot be read ({e})") from e
    return check_image_bytes(data, f"{where}: image {image}")


def _split_digests(path: Path, settings: dict) -> dict[str, str]:
    """sha256 of each image another split's table lists -> where (hashing only: that split's own prepare
    step decodes them)."""
    import hashlib

    out, seen = {}, set()
    for where, image, _ in table_rows(path, settings):
        if image in seen:
            continue
        seen.add(image)
        try:
            digest = hashlib.sha256(image.read_bytes()).hexdigest()
        except OSError as e:
            raise OwnFilesError(f"{where}: image {image} cannot be read ({e})") from e
        out.setdefault(digest, f"{where}: image {image}")
    return out


def _grouped_manifest(rows: list[tuple[str, Path, str]]) -> pd.DataFrame:
    from . import MANIFEST_COLUMNS

    return pd.DataFrame(
        {"image_id": pd.Series([r[0] for r in rows], dtype=object),
         "image_path": pd.Series([str(Path(r[1]).resolve()) for r in rows], dtype=object),
         "caption": pd.Series([r[2] for r in rows], dtype=object)},
        columns=list(MANIFEST_COLUMNS))
