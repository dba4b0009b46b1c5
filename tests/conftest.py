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


# The default suite's per-test budget, in seconds of wall time (setup, call and teardown together, so a module
# fixture that runs a whole DAG counts against the test that first asks for it). A test that needs more carries
# the `slow` or `e2e` marker, which the default run deselects and `.ci/run` runs; tests/test_zz_suite_budget.py,
# collected last, fails naming every test of the session over the budget.
SLOWEST_TEST_BUDGET_S = 60.0
# markers whose tests are outside the budget: whole-DAG runs, multi-process and long runs, the cluster, the rehearsal
UNBUDGETED_MARKERS = ("e2e", "slow", "slurm", "rehearsal")
_DURATIONS: dict[str, float] = {}
_UNBUDGETED: set[str] = set()


def pytest_collection_modifyitems(config, items):
    _UNBUDGETED.update(i.nodeid for i in items if any(i.get_closest_marker(m) for m in UNBUDGETED_MARKERS))


def pytest_runtest_logreport(report):
    if report.nodeid not in _UNBUDGETED:
        _DURATIONS[report.nodeid] = _DURATIONS.get(report.nodeid, 0.0) + report.duration


@pytest.fixture
def session_durations() -> dict[str, float]:
    """nodeid -> seconds spent so far in this session by each budgeted test that has run (setup + call +
    teardown)."""
    return _DURATIONS
