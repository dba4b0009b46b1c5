"""Append-only CSV logs (dynamics.csv, epochs.csv) that stay consistent across kill and resume.

Rows are appended and flushed as they are produced. Each checkpoint carries the logs' text as of its
step, and a resumed run rewrites the files from it: rows written after the checkpoint (about to be
recomputed) disappear, and logs that Snakemake deleted with the job's other outputs before a rerun
come back. A resumed run's logs thus equal an uninterrupted one's line for line. A log deleted while the
run trains (by a second Snakemake starting the same job) stops the run instead of being started afresh
without its first rows.
"""

from __future__ import annotations

import csv
import math
import os
from pathlib import Path

from hnclip.fileio import write_text_atomic

__all__ = ["EPOCH_COLUMNS", "EPOCH_RANK_COLUMNS", "CsvLog"]

# ``benchmark``: which test split the row scores (a run may be evaluated on several after each epoch: DOCCI's
# runs on DOCCI and Long-DCI); empty in logs written before the column, which scored one split
EPOCH_COLUMNS = ("epoch", "step", "i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "benchmark")
# per-query outcomes of each epoch's evaluation (space-separated ranks), which the per-epoch claims resample
EPOCH_RANK_COLUMNS = ("epoch", "i2t", "t2i", "text_image", "benchmark")


def _format(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return repr(value)  # shortest string that reads back to the same double
    return str(value)


class CsvLog:
    def __init__(self, path, columns: tuple[str, ...]):
        self.path = Path(path)
        self.columns = tuple(columns)

    @property
    def header(self) -> str:
        return ",".join(self.columns) + "\n"

    def start(self, text: str | None = None) -> None:
        """Begin a fresh log (header only), or restore ``text`` saved by :meth:`read_text`.

        A log saved by a loop that wrote fewer columns, all of them the first of this one's (columns are
        only ever added at the end), is restored with the new columns empty in its rows.
        """
        if text is None:
            text = self.header
        elif not text.startswith(self.header):
            text = self._upgraded(text)
        write_text_atomic(self.path, text)

    def _upgraded(self, text: str) -> str:
        first, _, rows = text.partition("\n")
        saved = tuple(first.split(","))
        if len(saved) >= len(self.columns) or self.columns[:len(saved)] != saved:
            raise ValueError(f"saved log for {self.path} starts with {first!r}, expected "
                             f"{self.header.strip()!r}; the checkpoint comes from another version of the loop")
        padding = "," * (len(self.columns) - len(saved))
        return self.header + "".join(f"{line}{padding}\n" for line in rows.splitlines() if line)

    def read_text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def append(self, row: dict) -> None:
        unknown = set(row) - set(self.columns)
        if unknown:
            raise KeyError(f"{self.path}: no column(s) {sorted(unknown)}")
        try:  # appended to, never created here: a log that vanished mid-run is an error, not a fresh file
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        except FileNotFoundError:
            raise RuntimeError(
                f"{self.path} was deleted while this run trained: another process removed the run's outputs (a "
                "second Snakemake starting this job, README 'After a crash'); stopping rather than writing a log "
                "without its first rows. Run again: the run resumes from its last checkpoint, logs restored") from None
        with open(fd, "a", newline="", encoding="utf-8") as handle:
            csv.writer(handle, lineterminator="\n").writerow([_format(row.get(c)) for c in self.columns])
