"""Hub weights pinned like the benchmarks: offline, on a Hugging Face cache written in tmp_path.

Two commits of a fake BeichenZhang/LongCLIP-L stand for Long-CLIP's two releases of one file name
(longclip-L.pt before and after the 2024-05-21 re-release); every expected hash is hashlib's on the
bytes the test put into the cache.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.data.weights import fetch_weights
from hnclip.rehearsal.hub_cache import populate_hub_cache, repo_cache_dir

REPO = "BeichenZhang/LongCLIP-L"
SOURCE = f"hf://{REPO}/longclip-L.pt"
FIRST, SECOND = "a" * 40, "b" * 40
OLD, NEW = b"longclip-L before the re-release" * 100, b"longclip-L after the DDP fix" * 100


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def hub(tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    populate_hub_cache(cache, "model", REPO, {"longclip-L.pt": OLD}, FIRST)
    populate_hub_cache(cache, "model", REPO, {"longclip-L.pt": NEW}, SECOND)  # refs/main -> SECOND
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    return cache


def _lock(download) -> dict:
    return json.loads((download / "longclip_l" / "hnclip-checksums.json").read_text())["files"]


def test_a_matching_pin_passes_and_the_lock_records_revision_and_sha256(hub, tmp_path):
    download = tmp_path / "checkpoints"
    path = fetch_weights(SOURCE, download, revision=FIRST, sha256=_sha(OLD))
    assert path == download / "longclip_l" / "longclip-L.pt" and path.read_bytes() == OLD
    entry = _lock(download)["longclip_l/longclip-L.pt"]
    assert (entry["sha256"], entry["revision"], entry["size"]) == (_sha(OLD), FIRST, len(OLD))
    assert entry["source"] == f"hf://models/{REPO}@{FIRST}/longclip-L.pt"
    # a second call re-verifies the file in place, without the Hub
    (repo_cache_dir(hub, "model", REPO) / "snapshots" / FIRST / "longclip-L.pt").unlink()
    assert fetch_weights(SOURCE, download, revision=FIRST, sha256=_sha(OLD)) == path


def test_a_file_that_differs_from_its_pin_is_refused_naming_file_revision_and_both_hashes(hub, tmp_path):
    download = tmp_path / "checkpoints"
    with pytest.raises(ChecksumMismatchError) as info:
        fetch_weights(SOURCE, download, revision=SECOND, sha256=_sha(OLD))
    message = str(info.value)
    assert "longclip-L.pt" in message and SECOND in message
    assert _sha(NEW) in message and _sha(OLD) in message
    assert not (download / "longclip_l" / "hnclip-checksums.json").exists()  # nothing refused is locked


def test_without_a_pin_the_first_file_is_locked_and_a_later_different_one_refused(hub, tmp_path):
    download = tmp_path / "checkpoints"
    fetch_weights(SOURCE, download, revision=FIRST)
    assert _lock(download)["longclip_l/longclip-L.pt"]["sha256"] == _sha(OLD)
    # the config moves to the other commit: its file is fetched and refused against the lock
    with pytest.raises(ChecksumMismatchError) as info:
        fetch_weights(SOURCE, download, revision=SECOND)
    message = str(info.value)
    assert "longclip-L.pt" in message and SECOND in message and FIRST in message
    assert _sha(NEW) in message and _sha(OLD) in message
    # so is the file main serves once the copy in place is gone (no revision pinned at all)
    (download / "longclip_l" / "longclip-L.pt").unlink()
    with pytest.raises(ChecksumMismatchError, match=_sha(NEW)):
        fetch_weights(SOURCE, download)


def test_a_changed_file_in_place_is_refused(hub, tmp_path):
    download = tmp_path / "checkpoints"
    path = fetch_weights(SOURCE, download, revision=FIRST, sha256=_sha(OLD))
    path.unlink()
    path.write_bytes(b"tampered")
    with pytest.raises(ChecksumMismatchError) as info:
        fetch_weights(SOURCE, download, revision=FIRST, sha256=_sha(OLD))
    assert _sha(b"tampered") in str(info.value) and _sha(OLD) in str(info.value) and FIRST in str(info.value)


def test_a_sam_repository_is_locked_file_by_file_against_its_published_safetensors_hash(hub, tmp_path, monkeypatch):
    from hnclip.data import download as dl

    files = {"config.json": b"{}", "preprocessor_config.json": b"{}", "model.safetensors": b"weights",
             "pytorch_model.bin": b"a pickle, never fetched"}
    populate_hub_cache(hub, "model", "facebook/sam-vit-huge", files, "c" * 40)
    table = dl.load_sources()
    table["sam_vit_huge"]["files"][0]["sha256"] = {"model.safetensors": _sha(b"weights")}
    monkeypatch.setattr("hnclip.data.weights.load_sources", lambda: table)
    folder = fetch_weights("hf://facebook/sam-vit-huge", tmp_path / "checkpoints", revision="c" * 40)
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(("hnclip", "HNCLIP"))) == [
        "config.json", "model.safetensors", "preprocessor_config.json"]
    lock = json.loads((folder / "hnclip-checksums.json").read_text())["files"]
    assert lock["sam_vit_huge/model.safetensors"]["revision"] == "c" * 40

    table["sam_vit_huge"]["files"][0]["sha256"] = {"model.safetensors": "0" * 64}
    (folder / "model.safetensors").unlink()
    (folder / "hnclip-checksums.json").unlink()
    with pytest.raises(ChecksumMismatchError, match="0{64}"):
        fetch_weights("hf://facebook/sam-vit-huge", tmp_path / "checkpoints", revision="c" * 40)


def test_the_shipped_sam_entry_fetches_safetensors_only_and_pins_them():
    from hnclip.data.download import load_sources

    spec = load_sources()["sam_vit_huge"]["files"][0]
    assert spec["hub_snapshot"]["allow_patterns"] == ["config.json", "preprocessor_config.json", "model.safetensors"]
    assert set(spec["sha256"]) == {"model.safetensors"}


def test_a_local_file_is_checked_against_a_pin_and_otherwise_loaded_as_given(tmp_path):
    local = tmp_path / "mine.pt"
    local.write_bytes(OLD)
    assert fetch_weights(local, tmp_path / "checkpoints") == local
    assert fetch_weights(local, tmp_path / "checkpoints", sha256=_sha(OLD)) == local
    with pytest.raises(ChecksumMismatchError, match=_sha(NEW)):
        fetch_weights(local, tmp_path / "checkpoints", sha256=_sha(NEW))
    assert not (tmp_path / "checkpoints").exists()
