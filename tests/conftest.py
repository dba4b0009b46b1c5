"""Shared test settings: tests run on CPU with few threads so parallel helpers and CI stay predictable."""

import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "2")
