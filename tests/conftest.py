"""Shared test settings: tests run on CPU with few threads so parallel helpers and CI stay predictable."""

import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache in tmp_path that huggingface_hub (and open_clip's downloads through it) reads
    offline: HF_HUB_CACHE points there, HF_HUB_OFFLINE is on (also in huggingface_hub's constants, read at import),
    no HF_TOKEN. Fill it with :func:`hnclip.rehearsal.hub_cache.populate_hub_cache`."""
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return cache
