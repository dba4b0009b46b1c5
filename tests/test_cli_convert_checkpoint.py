"""`hnclip convert-checkpoint` on the paper's backbone id: fetched through the Hub cache into a checksum
lock, converted to a model folder (offline: the cache is pre-populated by the test)."""

import hashlib
import json
import shutil

import pytest
import torch
from test_models_checkpoints import _longclip_state_dict

from hnclip.cli import main
from hnclip.models import load_model


def _populate(cache, data: bytes, commit: str = "d" * 40):
    repo = cache / "models--BeichenZhang--LongCLIP-L"
    blob = hashlib.sha256(data).hexdigest()
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    (repo / "blobs" / blob).write_bytes(data)
    (repo / "snapshots" / commit).mkdir(parents=True)
    (repo / "snapshots" / commit / "longclip-L.pt").symlink_to(f"../../blobs/{blob}")


def test_paper_backbone_is_downloaded_locked_and_converted(tmp_path, monkeypatch):
    import huggingface_hub.constants

    source = tmp_path / "longclip.pt"
    torch.save(_longclip_state_dict(), source)
    cache = tmp_path / "hub"
    _populate(cache, source.read_bytes())
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("HF_TOKEN", raising=False)

    download = tmp_path / "checkpoints"
    args = ["convert-checkpoint", "--format", "longclip", "--source", "hf://BeichenZhang/LongCLIP-L/longclip-L.pt",
            "--download-dir", str(download), "--out", str(tmp_path / "model")]
    assert main(args) == 0
    lock = json.loads((download / "longclip_l" / "hnclip-checksums.json").read_text())
    assert hashlib.sha256(source.read_bytes()).hexdigest() in json.dumps(lock)
    model = load_model(tmp_path / "model")
    assert model.context_length == 248 and model.frozen_positions == 20

    # a file changed after it was locked is refused, naming it
    shutil.rmtree(tmp_path / "model")
    (download / "longclip_l" / "longclip-L.pt").unlink()
    (download / "longclip_l" / "longclip-L.pt").write_bytes(b"tampered")
    with pytest.raises(Exception, match="longclip-L.pt"):
        main(args)


def test_the_configs_pins_reach_the_download(tmp_path, monkeypatch):
    import huggingface_hub.constants

    data = b"not the pinned file"
    _populate(tmp_path / "hub", data)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    args = ["convert-checkpoint", "--format", "longclip", "--source", "hf://BeichenZhang/LongCLIP-L/longclip-L.pt",
            "--download-dir", str(tmp_path / "checkpoints"), "--out", str(tmp_path / "model"),
            "--revision", "d" * 40, "--sha256", "0" * 64]
    with pytest.raises(Exception, match="0{64}") as info:
        main(args)
    assert "d" * 40 in str(info.value) and hashlib.sha256(data).hexdigest() in str(info.value)
