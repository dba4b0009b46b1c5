"""save_model / load_model: exact round trips, adapters merged on a copy, safetensors + JSON only."""

import json
from pathlib import Path

import pytest
import torch

from hnclip.models import (
    DualEncoder,
    apply_adapters,
    create_model,
    is_adapted,
    load_model,
    merge_adapters,
    save_model,
    stretch_model,
)


def count_trainable_parameters(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _assert_same_state(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for key in sa:
        assert sa[key].dtype == sb[key].dtype and torch.equal(sa[key], sb[key]), key


def test_round_trip_of_a_stretched_model_is_exact(tmp_path):
    model = stretch_model(create_model("micro", seed=0))
    with torch.no_grad():
        model.logit_scale.fill_(3.3)
    save_model(model, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["model.json", "model.safetensors"]
    spec = json.loads((tmp_path / "run" / "model.json").read_text())["spec"]
    assert spec["context_length"] == 248 and spec["frozen_positions"] == 20 and spec["name"] == "micro"
    loaded = load_model(tmp_path / "run")
    assert type(loaded) is DualEncoder and loaded.spec == model.spec
    _assert_same_state(model, loaded)
    tokens = model.tokenize(["word " * 40, "a cat"])
    images = torch.randn(2, 3, 32, 32)
    expected = model.eval()(images, tokens)
    got = loaded.eval()(images, tokens)
    assert torch.equal(got["text_features"], expected["text_features"])
    assert torch.equal(got["image_features"], expected["image_features"])
    assert loaded.positional_embedding_frozen.shape == (20, 32)
    assert count_trainable_parameters(loaded) == count_trainable_parameters(model)


def test_saving_an_adapted_model_merges_a_copy_and_leaves_training_state_alone(tmp_path):
    adapted = apply_adapters(create_model("micro", seed=0), "lora", r=4)
    with torch.no_grad():
        for name, param in adapted.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.1)
    trainable_before = count_trainable_parameters(adapted)
    save_model(adapted, tmp_path / "adapted")
    assert is_adapted(adapted) and count_trainable_parameters(adapted) == trainable_before
    loaded = load_model(tmp_path / "adapted").eval()
    adapted.eval()
    images = torch.randn(2, 3, 32, 32)
    tokens = adapted.tokenize(["a red cube", "two blue balls near a tree"])
    with torch.no_grad():
        expected = adapted(images, tokens)
        got = loaded(images, tokens)
    for key in ("image_features", "text_features"):
        torch.testing.assert_close(got[key], expected[key], rtol=0, atol=1e-5)
    _assert_same_state(loaded, merge_adapters(adapted))


def test_spec_of_a_checkpoint_without_registry_name_rebuilds_from_its_config(tmp_path):
    config = create_model("micro").spec["config"]
    config["text_cfg"]["layers"] = 2  # not in the registry: the spec must carry the full config
    model = DualEncoder(config, context_length=40, frozen_positions=5)
    save_model(model, tmp_path / "custom")
    loaded = load_model(tmp_path / "custom")
    assert len(loaded.clip.transformer.resblocks) == 2 and loaded.context_length == 40
    _assert_same_state(model, loaded)


def test_load_model_names_missing_files(tmp_path):
    save_model(create_model("micro", seed=0), tmp_path / "m")
    (tmp_path / "m" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_model(tmp_path / "m")


# one script per process: a model, its framework's modules (two metadata keys), open_clip's export and a JSON
# record whose dict is built in the process's set order (PYTHONHASHSEED), each saved twice in the process
_SAVE_SCRIPT = r"""
import sys
from pathlib import Path

import torch

from hnclip.export.open_clip_format import write_open_clip
from hnclip.fileio import write_json_atomic
from hnclip.models import create_model, save_model
from hnclip.models.io import save_framework_files

out = Path(sys.argv[1])
model = create_model("micro", seed=0)
modules = {"aggregator.weight": torch.arange(6.0).reshape(2, 3), "aggregator.bias": torch.zeros(2, dtype=torch.float16)}
for copy in ("a", "b"):
    folder = save_model(model, out / copy / "model")
    save_framework_files(folder, "finelip", {"module_lr": 0.002, "aggregators": 2}, modules)
    write_open_clip(model, out / copy / "open_clip", "hnclip-test")
    write_json_atomic(out / copy / "record.json", {name: len(name) for name in {"alpha", "beta", "gamma", "delta"}})
"""


@pytest.mark.slow  # two processes
def test_the_same_model_saved_in_two_processes_has_the_same_bytes(tmp_path):
    """Every file of a saved model (weights, framework modules, open_clip export, a JSON record) has one
    sha256, written twice in each of two processes: safetensors' metadata order, which Rust seeds per map
    and per process, and a dict's insertion order no longer reach the bytes."""
    import hashlib
    import os
    import subprocess
    import sys

    script = tmp_path / "save.py"
    script.write_text(_SAVE_SCRIPT)
    src = str(Path(__file__).resolve().parents[1] / "src")
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONPATH=src, PYTHONHASHSEED=seed)
        done = subprocess.run([sys.executable, str(script), str(tmp_path / f"p{seed}")], env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
    hashes: dict[str, set[str]] = {}
    for copy in ("p1/a", "p1/b", "p2/a", "p2/b"):
        root = tmp_path / copy
        files = sorted(p for p in root.rglob("*") if p.is_file())
        assert {p.name for p in files} >= {"model.safetensors", "framework.safetensors", "framework.json",
                                          "open_clip_model.safetensors", "record.json"}
        for path in files:
            hashes.setdefault(path.relative_to(root).as_posix(), set()).add(
                hashlib.sha256(path.read_bytes()).hexdigest())
    assert {name: len(found) for name, found in hashes.items()} == {name: 1 for name in hashes}


def test_saved_weights_have_sorted_metadata_and_load_back_identical(tmp_path):
    """The header safetensors wrote, rewritten: metadata keys sorted, the tensors as saved, any key order in."""
    import struct

    from hnclip.models.weights_files import load_weights, save_weights

    tensors = {"b": torch.arange(5, dtype=torch.int64), "a": torch.randn(3, 2), "c": torch.ones(1, dtype=torch.float16)}
    metadata = {k: f"value {k}" for k in ("zeta", "alpha", "mid", "beta", "omega", "kappa")}
    paths = [save_weights(tensors, tmp_path / f"w{i}.safetensors", metadata) for i in range(4)]
    assert len({p.read_bytes() for p in paths}) == 1
    raw = paths[0].read_bytes()
    (size,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + size])
    assert list(header["__metadata__"]) == sorted(metadata) and size % 8 == 0
    loaded = load_weights(paths[0])
    assert sorted(loaded) == sorted(tensors) and all(torch.equal(loaded[k], tensors[k]) for k in tensors)
