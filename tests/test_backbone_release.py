"""The released backbone: installing it against its pin, writing a release and its card, comparing two."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch

from hnclip.backbone.release import compare_releases, recipe_digest, write_release
from hnclip.backbone.released import install_released, read_release
from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.models import create_model, load_model, save_model


@pytest.fixture()
def released(tmp_path):
    folder = tmp_path / "release"
    save_model(create_model("micro", context_length=248, frozen_positions=20, seed=0), folder)
    return folder


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _record(folder) -> None:
    """A release.json recording the sha256 of the folder's two model files (computed here with hashlib)."""
    (folder / "release.json").write_text(json.dumps({"weights_sha256": _sha(folder / "model.safetensors"),
                                                     "spec_sha256": _sha(folder / "model.json")}))


def test_install_copies_the_pinned_weights_byte_for_byte(released, tmp_path):
    _record(released)  # a pinned folder needs its record (the next tests)
    digest = _sha(released / "model.safetensors")
    out = tmp_path / "installed"
    assert install_released(released, out, sha256=digest.upper(), image_size=32, context_length=248) == digest
    assert _sha(out / "model.safetensors") == digest
    assert (out / "model.json").read_bytes() == (released / "model.json").read_bytes()
    model = load_model(out)
    assert torch.equal(model.positional_embedding(), load_model(released).positional_embedding())


def test_install_refuses_other_weights_naming_the_file_and_both_hashes(released, tmp_path):
    wrong = "0" * 64
    with pytest.raises(ChecksumMismatchError) as error:
        install_released(released, tmp_path / "out", sha256=wrong, image_size=32, context_length=248)
    text = str(error.value)
    assert str(released / "model.safetensors") in text and wrong in text and _sha(released / "model.safetensors") in text
    assert "backbone.sha256" in text and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("key", "kwargs"), [("backbone.image_size", {"image_size": 64, "context_length": 248}),
                                              ("backbone.context_length", {"image_size": 32, "context_length": 77})])
def test_install_names_the_config_key_an_architecture_mismatch_breaks(released, tmp_path, key, kwargs):
    with pytest.raises(ValueError, match=key):
        install_released(released, tmp_path / "out", sha256=None, **kwargs)


SHIPPED = Path(__file__).resolve().parents[1] / "resources" / "backbones" / "hnclip-toy-mini-grid"


@pytest.fixture()
def shipped_copy(tmp_path):
    """A copy of the shipped toy release (tests never write into the checkout)."""
    folder = tmp_path / "hnclip-toy-mini-grid"
    shutil.copytree(SHIPPED, folder)
    return folder


def test_the_shipped_release_records_the_sha256_of_its_model_files():
    release = json.loads((SHIPPED / "release.json").read_text())
    assert release["spec_sha256"] == _sha(SHIPPED / "model.json")
    assert release["weights_sha256"] == _sha(SHIPPED / "model.safetensors")


def test_an_edited_model_json_of_a_release_stops_the_install_naming_the_file_and_both_hashes(shipped_copy, tmp_path,
                                                                                          capsys):
    from hnclip.cli import main

    recorded = json.loads((shipped_copy / "release.json").read_text())["spec_sha256"]
    spec_path = shipped_copy / "model.json"
    spec = json.loads(spec_path.read_text())
    assert spec["spec"]["config"]["quick_gelu"] is False
    spec["spec"]["config"]["quick_gelu"] = True  # another model around the same (pinned) weights
    spec_path.write_text(json.dumps(spec))
    edited = _sha(spec_path)
    assert edited != recorded
    pinned = _sha(shipped_copy / "model.safetensors")  # the weights still match their pin
    args = ["install-backbone", "--source", str(shipped_copy), "--sha256", pinned, "--image-size", "48",
            "--context-length", "248", "--out", str(tmp_path / "out")]
    with pytest.raises(ChecksumMismatchError) as error:
        main(args)
    text = str(error.value)
    assert str(spec_path) in text and edited in text and recorded in text and "spec_sha256" in text
    assert str(shipped_copy / "release.json") in text and not (tmp_path / "out").exists()
    # the unedited release installs as before
    shutil.copyfile(SHIPPED / "model.json", spec_path)
    assert main(args) == 0 and _sha(tmp_path / "out" / "model.json") == recorded


def test_a_pinned_release_without_its_record_is_refused_so_an_edited_model_json_cannot_install(shipped_copy,
                                                                                               tmp_path):
    # release.json deleted and quick_gelu flipped: the weights still match backbone.sha256, but nothing pins
    # the architecture any more; the install must refuse, naming the folder, the missing file and the key
    from hnclip.cli import main

    (shipped_copy / "release.json").unlink()
    spec_path = shipped_copy / "model.json"
    spec = json.loads(spec_path.read_text())
    spec["spec"]["config"]["quick_gelu"] = True
    spec_path.write_text(json.dumps(spec))
    pinned = _sha(shipped_copy / "model.safetensors")
    args = ["install-backbone", "--source", str(shipped_copy), "--sha256", pinned, "--image-size", "48",
            "--context-length", "248", "--out", str(tmp_path / "out")]
    with pytest.raises(FileNotFoundError) as error:
        main(args)
    text = str(error.value)
    assert text.startswith(f"released backbone {shipped_copy}: no release.json, but backbone.sha256 pins its weights")
    assert str(spec_path) in text and "\n" not in text and not (tmp_path / "out").exists()
    # a record that lacks the architecture's sha256 is refused too
    (shipped_copy / "release.json").write_text(json.dumps({"weights_sha256": pinned}))
    with pytest.raises(FileNotFoundError, match=r"release\.json records no spec_sha256, but backbone\.sha256 pins"):
        main(args)


def test_an_unpinned_folder_without_a_record_installs_as_it_is(released, tmp_path):
    # backbone.sha256 null (the DAG's own pretrained folder): nothing is pinned, nothing to cover
    digest = install_released(released, tmp_path / "out", sha256=None, image_size=32, context_length=248)
    assert digest == _sha(released / "model.safetensors") and not (tmp_path / "out" / "release.json").exists()


def _timing(path, seconds):
    path.write_text("s\th:m:s\tmax_rss\n" + f"{seconds}\t0:00:00\t1.0\n")
    return path


def test_a_release_states_its_recipe_provenance_minutes_and_figures(released, tmp_path):
    stages = {}
    for stage, loss in (("short", 0.5), ("long", 0.01)):
        stages[stage] = tmp_path / f"{stage}.json"
        stages[stage].write_text(json.dumps({
            "steps": 10, "samples_seen": 640, "world_size": 2, "final_loss": loss, "git_commit": "abc123",
            "torch_version": "2.14.1", "device": "cpu",
            "cpu_kernels": {"setting": "avx2", "capability": "AVX2", "cpu": "Test CPU (no AVX512, AVX2)"}}))
    figures = {"logit_scale": 100.0, "zeroshot": {"synthetic/test": {"i2t_r1": 61.25, "t2i_r1": 58.5, "n_images": 1024}},
               "train": {"mean_offdiag": 0.84, "mean_hardest": 0.93, "frac_ge_0.8": 0.9, "pair_share": 1.0,
                         "infonce_median": 4e-4, "saturated_share": 0.62, "effective_dimensions": 6.5}}
    recipe = {"pretrain": {"pool": {"size": 10}}, "seed": 0}
    timings = {"pool": _timing(tmp_path / "pool.tsv", 30), "short": _timing(tmp_path / "s.tsv", 90),
               "long": _timing(tmp_path / "l.tsv", 3600)}
    out = tmp_path / "hnclip-toy"
    release = write_release("hnclip-toy", released, out, recipe, figures, stages, timings)
    assert read_release(out) == release
    assert release["weights_sha256"] == _sha(released / "model.safetensors")
    assert release["recipe_sha256"] == hashlib.sha256(
        b'{"pretrain":{"pool":{"size":10}},"seed":0}').hexdigest() == recipe_digest(recipe)
    assert release["built"]["minutes"] == {"pool": 0.5, "short": 1.5, "long": 60.0, "total": 62.0}
    assert release["architecture"]["parameters"] == sum(p.numel() for p in load_model(released).state_dict().values())
    card = (out / "README.md").read_text()
    for text in ("Toy scale", "61.2 / 58.5", "62.0%", "0.840", "Test CPU", "`avx2`", "abc123", "Limitations",
                 "license: mit", release["weights_sha256"]):
        assert text in card, text


def test_the_comparison_sets_figures_side_by_side_and_says_when_weights_differ():
    base = {"name": "t", "weights_sha256": "a" * 64, "recipe_sha256": "r" * 64,
            "figures": {"logit_scale": 100.0, "zeroshot": {"b/test": {"i2t_r1": 50.0, "t2i_r1": 40.0, "n_images": 8}},
                        "train": {"saturated_share": 0.5}}}
    other = json.loads(json.dumps(base))
    other["weights_sha256"] = "b" * 64
    other["figures"]["train"]["saturated_share"] = 0.25
    text = compare_releases(other, base)
    line = next(row for row in text.splitlines() if "saturated" in row)
    assert "25.0%" in line and "50.0%" in line
    assert "different weights" in text and "identical weights" not in compare_releases(base, None)
    assert "identical weights" in compare_releases(base, base)
