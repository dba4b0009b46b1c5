"""The rehearsal's stand-ins: a Long-CLIP checkpoint in Long-CLIP's format, each benchmark's publisher files
through the real fetch-and-checksum path and adapters, and the guards that keep fixtures off real data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from hnclip.data import load_benchmark
from hnclip.data.adapter_utils import CountMismatchError
from hnclip.data.fetch import fetch_benchmark
from hnclip.data.prepare import prepare_split
from hnclip.preprocess.sentences import token_offsets
from hnclip.rehearsal.benchmarks import write_rehearsal_benchmark
from hnclip.rehearsal.checkpoint import (
    LONGCLIP_L,
    longclip_arch,
    longclip_shapes,
    longclip_state_dict,
    write_longclip_checkpoint,
)
from hnclip.rehearsal.make import MARKER, make_rehearsal_files
from hnclip.rehearsal.publisher_files import write_docci

# a small architecture of the same layout: 2 heads per tower, a 2 x 2 patch grid
SMALL = {"embed_dim": 64, "image_resolution": 28, "vision_layers": 2, "vision_width": 128, "vision_patch_size": 14,
         "transformer_width": 128, "transformer_layers": 2}
# per split, and per test-split variant of the protocol table (counted by hand from the files the writers lay
# out: DOCCI's test_goal adds its one qual_test record, DCI's test_all is train + test, Long-DCI's
# test_keep_empty keeps its one empty-caption row)
COUNTS = {"docci": {"train": 4, "test": 3, "test_goal": 4}, "dci": {"train": 3, "test": 2, "test_all": 5},
          "long_dci": {"test": 3, "test_keep_empty": 4}, "urban1k": {"test": 2}, "vg": {"train": 3},
          # Karpathy's splits: manifest rows, five captions for each of 2 test images
          "coco": {"test": 10}, "flickr30k": {"test": 10}}


def test_long_clip_l_state_dict_has_openai_vit_l14_weights_plus_two_248_row_position_tables():
    shapes = longclip_shapes()
    # OpenAI's ViT-L/14 CLIP has 427,616,513 parameters with a 77-row text position table; Long-CLIP
    # replaces it by two 248-row tables (positional_embedding, positional_embedding_res), width 768
    total = sum(torch.Size(s).numel() for s in shapes.values())
    assert total == 427_616_513 - 77 * 768 + 2 * 248 * 768
    # 12 tensors per residual block (packed in_proj, out_proj, two LayerNorms, c_fc, c_proj), 24 + 12 blocks
    assert len(shapes) == 15 + 12 * (24 + 12)
    assert shapes["visual.conv1.weight"] == (1024, 3, 14, 14)
    assert shapes["visual.positional_embedding"] == (16 * 16 + 1, 1024)
    assert shapes["positional_embedding"] == shapes["positional_embedding_res"] == (248, 768)
    assert shapes["logit_scale"] == ()
    assert LONGCLIP_L["context_length"] == 248


def test_random_checkpoint_is_a_plain_state_dict_that_converts_through_the_longclip_path(tmp_path):
    from hnclip.cli import main
    from hnclip.models import load_model

    path = write_longclip_checkpoint(tmp_path / "longclip.pt", seed=3, arch=SMALL)
    saved = torch.load(path, map_location="cpu", weights_only=True)  # what Long-CLIP's train.py writes
    assert isinstance(saved, dict) and all(isinstance(v, torch.Tensor) for v in saved.values())
    assert all(v.dtype == torch.float32 for v in saved.values())
    assert "positional_embedding_res" in saved and "mask1" not in saved  # masks are not buffers there
    assert main(["convert-checkpoint", "--format", "longclip", "--source", str(path),
                 "--download-dir", str(tmp_path / "dl"), "--out", str(tmp_path / "model")]) == 0
    model = load_model(tmp_path / "model")
    assert not (tmp_path / "dl").exists()  # a local file is not a known download: nothing locked
    # Long-CLIP's encode_text adds rows [0, 20) of positional_embedding and rows [20, 248) of _res
    table = torch.cat([model.positional_embedding_frozen, model.positional_embedding_trainable.detach()])
    expected = torch.cat([saved["positional_embedding"][:20], saved["positional_embedding_res"][20:]])
    assert torch.equal(table, expected)
    assert model.frozen_positions == 20 and model.context_length == 248
    state = model.clip.state_dict()
    for key in ("visual.conv1.weight", "visual.transformer.resblocks.1.attn.in_proj_weight",
                "transformer.resblocks.0.mlp.c_proj.weight", "token_embedding.weight", "text_projection"):
        assert torch.equal(state[key], saved[key]), key
    assert float(model.logit_scale.detach()) == pytest.approx(float(saved["logit_scale"]))


def test_random_weights_follow_long_clips_initialisation_scales():
    state = longclip_state_dict(seed=0, arch=SMALL)
    width, layers = SMALL["transformer_width"], SMALL["transformer_layers"]
    in_proj = state["transformer.resblocks.0.attn.in_proj_weight"]
    assert in_proj.std().item() == pytest.approx(width ** -0.5, rel=0.05)
    c_proj = state["transformer.resblocks.1.mlp.c_proj.weight"]
    assert c_proj.std().item() == pytest.approx(width ** -0.5 * (2 * layers) ** -0.5, rel=0.05)
    assert torch.equal(state["ln_final.weight"], torch.ones(width))
    assert not state["transformer.resblocks.0.attn.in_proj_bias"].any()
    assert torch.equal(longclip_state_dict(seed=0, arch=SMALL)["token_embedding.weight"],
                       state["token_embedding.weight"])


@pytest.fixture
def offline_hub(tmp_path, monkeypatch):
    import huggingface_hub.constants

    cache = tmp_path / "hf-cache"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    return cache


def _settings(name: str, root: Path) -> dict:
    return {"adapter": name, "root": str(root), "expected_counts": COUNTS[name]}


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_fixtures_go_through_fetch_and_the_adapter_with_the_configured_counts(name, tmp_path, offline_hub):
    root = tmp_path / name
    made = write_rehearsal_benchmark(name, _settings(name, root), offline_hub, seed=0)
    source = fetch_benchmark(name, name, root, _settings(name, root))
    lock = json.loads(Path(source["origin"]["lock"]).read_text())["files"]
    for rel in made["placed"]:  # every placed file is locked with its sha256
        if rel != "DCI_test.json":  # GOAL's split file is placed by hand, outside the sources table
            assert lock[f"{name}/{rel}"]["sha256"] == hashlib.sha256((root / rel).read_bytes()).hexdigest()
    if made.get("hub"):
        assert any(r["source"].startswith("hf://datasets/") for r in lock.values())
    for split in COUNTS[name]:
        manifest = load_benchmark(name, root, split, expected_count=COUNTS[name][split])
        assert len(manifest) == COUNTS[name][split]
        assert all(Path(p).is_file() for p in manifest["image_path"])
    fetch_benchmark(name, name, root, _settings(name, root))  # a second run re-verifies the same bytes


def test_long_dci_fixture_lists_an_empty_caption_that_its_protocol_drops(tmp_path, offline_hub):
    root = tmp_path / "long_dci"
    write_rehearsal_benchmark("long_dci", _settings("long_dci", root), offline_hub, seed=0)
    fetch_benchmark("long_dci", "long_dci", root, _settings("long_dci", root))
    manifest = load_benchmark("long_dci", root, "test", expected_count=3)
    assert manifest.attrs["dropped_empty_captions"] == 1


def test_dci_fixture_splits_by_goals_file_and_docci_skips_its_qualitative_records(tmp_path, offline_hub):
    dci, docci = tmp_path / "dci", tmp_path / "docci"
    for name, root in (("dci", dci), ("docci", docci)):
        write_rehearsal_benchmark(name, _settings(name, root), offline_hub, seed=0)
        fetch_benchmark(name, name, root, _settings(name, root))
    test, train = (load_benchmark("dci", dci, s, expected_count=None) for s in ("test", "train"))
    assert test.attrs["protocol"] == "goal" and not set(test["image_id"]) & set(train["image_id"])
    records = [json.loads(line) for line in (docci / "docci_descriptions.jsonlines").read_text().splitlines()]
    assert {"qual_dev", "qual_test"} <= {r["split"] for r in records}
    assert len(records) == 4 + 3 + 2


@pytest.mark.parametrize("name, variant, wrong", [("docci", "test_goal", 3), ("dci", "test_all", None),
                                                  ("long_dci", "test_keep_empty", 3)])
def test_a_test_variant_count_other_than_the_files_hold_is_refused_before_writing(name, variant, wrong, tmp_path):
    root = tmp_path / name
    counts = {k: v for k, v in COUNTS[name].items() if k != variant}
    if wrong is not None:
        counts[variant] = wrong
    with pytest.raises(ValueError, match=rf"benchmarks\.{name}\.expected_counts\.{variant} must be "
                                         rf"{COUNTS[name][variant]} .*got {wrong}"):
        write_rehearsal_benchmark(name, {**_settings(name, root), "expected_counts": counts}, tmp_path / "hub", 0)
    assert not root.exists()

def test_some_fixture_captions_are_longer_than_the_248_token_text_tower(tmp_path, offline_hub):
    root = tmp_path / "docci"
    write_rehearsal_benchmark("docci", {**_settings("docci", root),
                                        "expected_counts": {"train": 8, "test": 4, "test_goal": 5}},
                              offline_hub, seed=0)
    fetch_benchmark("docci", "docci", root, _settings("docci", root))
    lengths = [len(token_offsets(c)) + 2 for c in load_benchmark("docci", root, "train", expected_count=None)["caption"]]
    assert max(lengths) > 248 and min(lengths) < 77  # truncation and padding both happen


def test_fixture_files_are_byte_identical_across_runs(tmp_path):
    digests = []
    for attempt in ("a", "b"):
        made = {n: write_rehearsal_benchmark(n, _settings(n, tmp_path / attempt / n), tmp_path / attempt / "hub", 0)
                for n in COUNTS}
        files = sorted(p for p in (tmp_path / attempt).rglob("*") if p.is_file() and not p.is_symlink())
        digests.append({p.relative_to(tmp_path / attempt).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                        for p in files})
        assert made["urban1k"]["hub"] == ["datasets/BeichenZhang/Urban1k"]
    assert digests[0] == digests[1]


def _make(tmp_path, monkeypatch, benchmarks, layers=None):
    import hnclip.rehearsal.checkpoint as checkpoint

    small = checkpoint.write_longclip_checkpoint
    monkeypatch.setattr(checkpoint, "write_longclip_checkpoint",
                        lambda path, seed=0, arch=None: small(path, seed, SMALL))
    return make_rehearsal_files(benchmarks, tmp_path / "r/longclip.pt", tmp_path / "r/sam", tmp_path / "r",
                                sam_image_size=64, layers=layers)


def test_make_writes_everything_once_and_refuses_other_settings(tmp_path, monkeypatch):
    benchmarks = {"docci": _settings("docci", tmp_path / "docci")}
    record = _make(tmp_path, monkeypatch, benchmarks)
    assert (tmp_path / "r/longclip.pt").is_file() and (tmp_path / "r/sam/config.json").is_file()
    assert (tmp_path / "docci" / MARKER).is_file() and record["benchmarks"]["docci"]["records"] == COUNTS["docci"]
    stamp = (tmp_path / "docci/docci_images.tar.gz").stat().st_mtime_ns
    _make(tmp_path, monkeypatch, benchmarks)  # the same settings: nothing is rewritten
    assert (tmp_path / "docci/docci_images.tar.gz").stat().st_mtime_ns == stamp
    benchmarks["docci"]["expected_counts"] = {"train": 5, "test": 3}
    with pytest.raises(RuntimeError, match=r"made from other settings.*delete"):
        _make(tmp_path, monkeypatch, benchmarks)


def test_make_never_writes_into_a_root_holding_files_it_did_not_make(tmp_path, monkeypatch):
    real = tmp_path / "docci"
    write_docci(real, [{"example_id": "test_0", "split": "test", "image_file": "test_0.jpg", "description": "x"}])
    before = sorted(p.name for p in real.iterdir())
    with pytest.raises(FileExistsError, match=r"did not make .*refusing"):
        _make(tmp_path, monkeypatch, {"docci": _settings("docci", real)})
    assert sorted(p.name for p in real.iterdir()) == before
    assert not (tmp_path / "r/longclip.pt").exists()


def test_configured_count_replaces_the_protocol_count_in_prepare(tmp_path):
    root = write_docci(tmp_path / "docci", [
        {"example_id": f"test_{i}", "split": "test", "image_file": f"test_{i}.jpg", "description": f"caption {i}"}
        for i in range(3)])
    source = {"benchmark": "docci", "adapter": "docci", "root": str(root), "expected_counts": {"test": 3}}
    prepare_split(source, "test", 32, tmp_path / "test.csv", tmp_path / "store")
    assert len((tmp_path / "test.csv").read_text().splitlines()) == 1 + 3
    with pytest.raises(CountMismatchError, match="found 3 records, the protocol lists 5000"):
        prepare_split({**source, "expected_counts": {}}, "test", 32, tmp_path / "t2.csv", tmp_path / "s2")
    with pytest.raises(ValueError, match=r"found 3 records, the config's expected_counts says 4"):
        prepare_split({**source, "expected_counts": {"test": 4}}, "test", 32, tmp_path / "t3.csv", tmp_path / "s3")


def test_karpathy_fixtures_skip_restval_and_keep_five_of_six_sentences(tmp_path, offline_hub):
    root = tmp_path / "coco"
    write_rehearsal_benchmark("coco", _settings("coco", root), offline_hub, seed=0)
    fetch_benchmark("coco", "coco", root, _settings("coco", root))
    data = json.loads((root / "dataset_coco.json").read_text())["images"]
    assert [r["split"] for r in data] == ["test", "test", "restval", "val"]
    assert len(data[0]["sentences"]) == 6
    manifest = load_benchmark("coco", root, "test", expected_count=10)
    assert list(manifest["caption"][:5]) == [s["raw"] for s in data[0]["sentences"][:5]]
    assert manifest["image_id"].nunique() == 2
    with pytest.raises(ValueError, match="multiple of 5"):
        write_rehearsal_benchmark("flickr30k", {**_settings("flickr30k", tmp_path / "f"), "expected_counts": {"test": 7}},
                                  offline_hub, seed=0)


def test_rehearsal_layers_keep_every_shape_of_long_clip_l_but_the_depth():
    shapes = longclip_shapes(longclip_arch({"vision": 1, "text": 2}))
    full = longclip_shapes()
    blocks = {k for k in full if ".resblocks." in k}
    kept = {k for k in blocks if k.startswith(("visual.transformer.resblocks.0.", "transformer.resblocks.0.",
                                              "transformer.resblocks.1."))}
    # the same tensors at the same shapes, less the blocks past the configured depth: 12 per block
    assert {k: v for k, v in full.items() if k not in blocks or k in kept} == shapes
    assert len(blocks) - len(kept) == 12 * (23 + 10)
    assert longclip_arch(None) == LONGCLIP_L
    for bad in ({"vision": 0, "text": 2}, {"vision": 2, "text": 13}):
        with pytest.raises(ValueError, match="rehearsal.layers"):
            longclip_arch(bad)


def test_make_passes_the_configured_depth_and_records_it(tmp_path, monkeypatch):
    import hnclip.rehearsal.checkpoint as checkpoint

    written = []

    def record_arch(path, seed=0, arch=None):
        written.append(arch)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"stand-in")

    monkeypatch.setattr(checkpoint, "write_longclip_checkpoint", record_arch)
    benchmarks = {"docci": _settings("docci", tmp_path / "docci")}
    record = make_rehearsal_files(benchmarks, tmp_path / "r/longclip.pt", tmp_path / "r/sam", tmp_path / "r",
                                  sam_image_size=64, layers={"vision": 2, "text": 2})
    assert (written[0]["vision_layers"], written[0]["transformer_layers"]) == (2, 2)
    assert written[0]["vision_width"] == 1024 and written[0]["context_length"] == 248
    assert record["settings"]["layers"] == {"vision": 2, "text": 2}
    with pytest.raises(RuntimeError, match="made from other settings"):  # the full depth is another file
        make_rehearsal_files(benchmarks, tmp_path / "r/longclip.pt", tmp_path / "r/sam", tmp_path / "r",
                             sam_image_size=64)
