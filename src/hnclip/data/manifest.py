"""Manifests on disk: CSV files that round-trip every caption exactly.

Captions are free text (commas, quotes, newlines, "NA"), so every column is read back as ``str``
with pandas' missing-value guessing off: ``"NA"`` stays ``"NA"`` and ``"000123"`` keeps its zeros.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from . import MANIFEST_COLUMNS

__all__ = ["read_manifest", "write_manifest"]


def write_manifest(df: pd.DataFrame, path) -> None:
    """Write all columns of ``df`` in row order as UTF-8 CSV; atomic, so a reader never sees half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # "\n" line ends on every OS; fields holding "\r" or "\n" are quoted by the csv writer.
    df.to_csv(tmp, index=False, encoding="utf-8", lineterminator="\n")
    os.replace(tmp, path)


def read_manifest(path) -> pd.DataFrame:
    """Read a manifest written by :func:`write_manifest`; every column is ``str``, row order kept.

    Raises ValueError naming the file and the column when a required column is missing.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"manifest {path} does not exist")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, encoding="utf-8")
    except pd.errors.EmptyDataError as e:
        raise ValueError(f"manifest {path} is empty (no header row)") from e
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ValueError(f"manifest {path} is not a readable UTF-8 CSV: {e}") from e
    missing = [c for c in MANIFEST_COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"manifest {path} lacks required column(s) {missing}; it has {list(df.columns)}")
    return df
