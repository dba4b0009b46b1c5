"""Migrate a tuning record written before a search's minutes summed its points (issue 61, item 13).

A record's ``provenance.minutes`` was the wall time of the invocation that wrote it, so a search resumed over
several sessions stated its last session only. Now ``minutes`` is the sum of every point's own training
minutes (each run's ``summary.json``, over all its sessions: the record's ``points[].minutes``), ``points``
their count, and ``session_minutes`` the wall time of the writing invocation, which the old ``minutes`` was.
Run once per record; a record already migrated is left as it is.

    python workflow/scripts/migrate_tuning_record.py resources/tuning/record.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def migrate(record: dict) -> bool:
    """Rewrite ``record``'s provenance in place; False when it already has the new fields."""
    provenance = record["provenance"]
    if "session_minutes" in provenance:
        return False
    points = [p for entry in record["methods"].values() for p in entry["points"]]
    provenance["session_minutes"] = provenance["minutes"]
    provenance["minutes"] = round(sum(p["minutes"] for p in points), 1)
    provenance["points"] = len(points)
    return True


def main(argv: list[str]) -> None:
    for name in argv:
        path = Path(name)
        record = json.loads(path.read_text(encoding="utf-8"))
        if migrate(record):
            path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
            print(f"{path}: minutes {record['provenance']['minutes']} over {record['provenance']['points']} "
                  f"points (the writing session: {record['provenance']['session_minutes']})")
        else:
            print(f"{path}: already migrated")


if __name__ == "__main__":
    main(sys.argv[1:])
