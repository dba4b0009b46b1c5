"""hnclip.hashing.weights_digest: a saved model's weights, not its file, decide the digest."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from safetensors.numpy import save_file

from hnclip.hashing import weights_digest


def _save(folder, tensors, metadata=None):
    folder.mkdir(parents=True)
    save_file(tensors, str(folder / "model.safetensors"), metadata=metadata)
    return folder


def test_the_digest_is_sha256_over_names_dtypes_shapes_and_bytes_in_name_order(tmp_path):
    b = np.array([[1.5, -2.0]], dtype=np.float32)
    a = np.arange(3, dtype=np.int64)
    folder = _save(tmp_path / "m", {"b": b, "a": a})
    expected = hashlib.sha256(b"a int64 (3,)\n" + a.tobytes() + b"b float32 (1, 2)\n" + b.tobytes()).hexdigest()[:16]
    assert weights_digest(folder) == expected


def test_file_metadata_does_not_enter_and_one_changed_weight_does(tmp_path):
    tensors = {"x": np.linspace(0, 1, 8, dtype=np.float32), "y": np.ones((2, 2), dtype=np.float32)}
    plain = _save(tmp_path / "plain", tensors)
    tagged = _save(tmp_path / "tagged", dict(reversed(list(tensors.items()))), metadata={"writer": "other"})
    assert (plain / "model.safetensors").read_bytes() != (tagged / "model.safetensors").read_bytes()
    assert weights_digest(plain) == weights_digest(tagged)
    nudged = dict(tensors, x=np.nextafter(tensors["x"], np.float32(2)))  # one ulp on every entry
    assert weights_digest(_save(tmp_path / "nudged", nudged)) != weights_digest(plain)


def test_a_folder_without_weights_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="no model.safetensors in"):
        weights_digest(tmp_path)


def test_bfloat16_weights_are_hashed_by_their_bytes(tmp_path):
    import torch
    from safetensors.torch import save_file as save_torch

    folder = tmp_path / "bf16"
    folder.mkdir()
    weights = torch.tensor([1.0, -0.5, 3.0], dtype=torch.bfloat16)
    save_torch({"w": weights}, str(folder / "model.safetensors"))
    raw = bytes(weights.view(torch.int16).numpy().tobytes())
    assert weights_digest(folder) == hashlib.sha256(b"w bfloat16 (3,)\n" + raw).hexdigest()[:16]
