"""Run-level behaviour: NaN stops, refused and superseded resumes, what stays of a finished run's checkpoint,
outputs and summary, dynamics logging is side-effect free."""

from __future__ import annotations

import hashlib
import json
import math

import pandas as pd
import pytest
import torch
from safetensors.torch import load_file
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

import hnclip.training.objective as objective_module
from hnclip.data.manifest import read_manifest
from hnclip.data.subsets import write_subset
from hnclip.models import DualEncoder, load_model
from hnclip.training.logs import EPOCH_COLUMNS


def test_nan_loss_names_step_epoch_and_micro_batch_and_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path, n=32)  # 4 steps per epoch
    real_objective = objective_module.compute_objective
    calls = [0]

    def poisoned(*args, **kwargs):
        calls[0] += 1
        loss, standard = real_objective(*args, **kwargs)
        if calls[0] == 6:  # step 3, second micro-batch
            loss = loss * float("nan")
        return loss, standard

    monkeypatch.setattr(objective_module, "compute_objective", poisoned)
    with pytest.raises(FloatingPointError, match=r"step 3 \(epoch 1, micro-batch 2 of 2") as error:
        run_training(paths, tmp_path, small_config(checkpoint_every=2))
    assert "last.pt is kept" in str(error.value)
    checkpoint = torch.load(tmp_path / "ckpt" / "last.pt", weights_only=True)
    assert checkpoint["state"]["step"] == 2
    assert [int(r["step"]) for r in read_csv_rows(tmp_path / "out" / "dynamics.csv")] == [1, 2]
    assert not (tmp_path / "out" / "summary.json").exists()


def unfinished_run(paths, root, cfg, monkeypatch) -> None:
    """A run that dies on a NaN in step 2, after its step-1 checkpoint: an unfinished run on disk."""
    real_objective = objective_module.compute_objective
    calls = [0]

    def poisoned(*args, **kwargs):
        calls[0] += 1
        loss, standard = real_objective(*args, **kwargs)
        return (loss * float("nan") if calls[0] == cfg.accum_steps + 1 else loss), standard

    with monkeypatch.context() as patch:
        patch.setattr(objective_module, "compute_objective", poisoned)
        with pytest.raises(FloatingPointError):
            run_training(paths, root, cfg)
    assert torch.load(root / "ckpt" / "last.pt", weights_only=True)["finished"] is False


def test_an_unfinished_run_under_another_config_is_refused_naming_the_checkpoint(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path, n=16)
    unfinished_run(paths, tmp_path, small_config(gamma=0.5, checkpoint_every=1), monkeypatch)
    checkpoint = tmp_path / "ckpt" / "last.pt"
    with pytest.raises(RuntimeError, match="gamma: 0.5 -> 0.25") as error:
        run_training(paths, tmp_path, small_config(gamma=0.25, checkpoint_every=1))
    assert str(checkpoint) in str(error.value) and f"rm {checkpoint}" in str(error.value)


def test_an_unfinished_run_with_other_training_data_is_refused(tmp_path, monkeypatch):
    paths = make_dataset(tmp_path, n=16)
    unfinished_run(paths, tmp_path, small_config(checkpoint_every=1), monkeypatch)
    manifest = read_manifest(paths["train_manifest"])
    manifest.loc[0, "caption"] = "a different caption"
    manifest.to_csv(paths["train_manifest"], index=False)
    with pytest.raises(RuntimeError, match="other training data"):
        run_training(paths, tmp_path, small_config(checkpoint_every=1))


def test_a_finished_run_whose_config_changed_retrains_from_scratch(tmp_path, caplog):
    """Snakemake's case: a changed config deletes the outputs and reruns the job on the same checkpoint folder."""
    paths = make_dataset(tmp_path, n=16)
    run_training(paths, tmp_path, small_config(gamma=0.5, epochs=2))
    changed = small_config(gamma=0.25, epochs=2)
    with caplog.at_level("WARNING", logger="hnclip.training.checkpoint"):
        summary = run_training(paths, tmp_path, changed)
    assert "finished run of other settings or data (gamma: 0.5 -> 0.25)" in caplog.text
    assert summary["config_hash"] == changed.config_hash() and summary["steps"] == 4
    fresh = run_training(paths, tmp_path / "fresh", changed)  # the same run in folders of its own
    assert summary["checkpoint_sha256"] == fresh["checkpoint_sha256"]
    assert (tmp_path / "out" / "dynamics.csv").read_text() == (tmp_path / "fresh" / "out" / "dynamics.csv").read_text()


@pytest.mark.parametrize("keep", ["full", "weights", "none"])
def test_keep_checkpoint_decides_what_a_finished_run_leaves_and_what_a_rerun_costs(tmp_path, monkeypatch, keep):
    paths = make_dataset(tmp_path, n=16)
    cfg = small_config(epochs=2, checkpoint_every=1, keep_checkpoint=keep)
    first = run_training(paths, tmp_path, cfg)
    checkpoint = tmp_path / "ckpt" / "last.pt"
    dynamics = (tmp_path / "out" / "dynamics.csv").read_text()
    if keep == "none":
        assert not checkpoint.exists()
    else:
        payload = torch.load(checkpoint, weights_only=True)
        assert payload["finished"] is True and ("optimizer" in payload) == (keep == "full")
        # the outputs are gone (Snakemake deleted them): the same config rebuilds them without a training step
        for name in ("summary.json", "dynamics.csv", "epochs.csv"):
            (tmp_path / "out" / name).unlink()
        monkeypatch.setattr(objective_module, "compute_objective", lambda *a, **k: pytest.fail("trained again"))
    again = run_training(paths, tmp_path, small_config(epochs=2, checkpoint_every=1, keep_checkpoint=keep))
    assert again["checkpoint_sha256"] == first["checkpoint_sha256"] and again["steps"] == 4
    assert (tmp_path / "out" / "dynamics.csv").read_text() == dynamics


def test_dynamics_logging_does_not_change_the_trained_weights(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    settings = dict(gamma=0.5, token_weight=0.5, grad_clip=1.0, weight_decay=0.1)
    run_training(paths, tmp_path / "probed", small_config(dynamics_every=1, **settings))
    run_training(paths, tmp_path / "plain", small_config(dynamics_every=0, **settings))
    probed = load_file(str(tmp_path / "probed" / "out" / "model" / "model.safetensors"))
    plain = load_file(str(tmp_path / "plain" / "out" / "model" / "model.safetensors"))
    assert all(torch.equal(probed[k], plain[k]) for k in plain)
    rows = read_csv_rows(tmp_path / "probed" / "out" / "dynamics.csv")
    assert all(r["grad_norm_boosted"] for r in rows)
    assert [r["loss"] for r in rows] == [r["loss"] for r in read_csv_rows(tmp_path / "plain" / "out" / "dynamics.csv")]


def test_lora_run_on_a_subset_writes_merged_model_logs_and_summary(tmp_path):
    paths = make_dataset(tmp_path, n=20)
    subset = [f"img{i:03d}" for i in range(20) if i % 5]  # 16 of 20 images
    write_subset(subset, tmp_path / "subset.txt")
    cfg = small_config(framework="lora", framework_settings={"r": 4}, gamma=0.5, epochs=2, max_steps=3,
                       dynamics_every=2, checkpoint_every=100)
    summary = run_training(paths, tmp_path, cfg, subset_path=tmp_path / "subset.txt",
                           eval_manifest=paths["train_manifest"], eval_store_dir=paths["store_dir"])
    out = tmp_path / "out"
    written = json.loads((out / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary))
    # 16 samples / 8 per step = 2 steps per epoch; max_steps 3 stops in the middle of epoch 2
    assert (written["steps"], written["epochs"], written["samples_seen"], written["n_train"]) == (3, 1, 24, 16)
    assert written["config"] == cfg.to_dict() and written["config_hash"] == cfg.config_hash()
    assert written["framework"] == "lora" and "HN objective" in written["hn_plugin"]
    recipe = written["recipe"]
    assert (recipe["lr"], recipe["weight_decay"], recipe["label_smoothing"], recipe["total_steps"]) == (1e-2, 0.0, 0.0, 3)
    assert {g["lr"] for g in recipe["groups"]} == {1e-2} and sum(g["parameters"] for g in recipe["groups"]) > 0
    assert written["seed"] == 0 and written["device"] == "cpu" and written["torch_version"] == torch.__version__
    assert written["peak_memory_mb"] > 0 and written["wall_time_s"] > 0
    assert written["samples_per_s"] == pytest.approx(24 / written["wall_time_s"])
    assert math.isfinite(written["final_loss"])
    assert written["final_loss"] == pytest.approx(float(read_csv_rows(out / "dynamics.csv")[-1]["loss"]))
    weights = (out / "model" / "model.safetensors").read_bytes()
    assert written["checkpoint_sha256"] == hashlib.sha256(weights).hexdigest()
    merged = load_model(out / "model")
    assert type(merged) is DualEncoder  # adapters merged: a plain model with the base model's keys
    assert merged.state_dict().keys() == load_model(paths["init_model_dir"]).state_dict().keys()
    assert not all(torch.equal(a, b) for a, b in zip(merged.state_dict().values(),
                                                      load_model(paths["init_model_dir"]).state_dict().values(),
                                                      strict=True))
    epochs = pd.read_csv(out / "epochs.csv")
    assert list(epochs["epoch"]) == [1] and list(epochs["step"]) == [2]
    assert list(epochs.columns) == list(EPOCH_COLUMNS)
    dynamics_rows = read_csv_rows(out / "dynamics.csv")
    assert [int(r["epoch"]) for r in dynamics_rows] == [1, 1, 2]
    assert [bool(r["grad_norm_boosted"]) for r in dynamics_rows] == [True, False, True]

    # a rerun after completion resumes at the end: same model, logs untouched
    dynamics = (out / "dynamics.csv").read_text()
    again = run_training(paths, tmp_path, cfg, subset_path=tmp_path / "subset.txt",
                         eval_manifest=paths["train_manifest"], eval_store_dir=paths["store_dir"])
    assert again["checkpoint_sha256"] == written["checkpoint_sha256"]
    assert (out / "dynamics.csv").read_text() == dynamics


def test_too_small_training_set_is_an_error(tmp_path):
    paths = make_dataset(tmp_path, n=6)
    with pytest.raises(ValueError, match="6 samples, fewer than one effective batch"):
        run_training(paths, tmp_path, small_config())


def test_subset_naming_unknown_ids_is_an_error(tmp_path):
    paths = make_dataset(tmp_path, n=8)
    write_subset(["img000", "nope"], tmp_path / "subset.txt")
    with pytest.raises(ValueError, match="names image_id 'nope'"):
        run_training(paths, tmp_path, small_config(), subset_path=tmp_path / "subset.txt")


def test_the_summary_counts_the_training_captions_cut_at_the_context_length(tmp_path):
    """The micro model's tower has 77 positions: 75 one-token words and SOT/EOT fit, 76 are cut, and a
    100,000-character caption is cut; the summary says how many of the training captions were."""
    from hnclip.data.manifest import write_manifest

    paths = make_dataset(tmp_path / "data", n=16)
    manifest = read_manifest(paths["train_manifest"])
    assert load_model(paths["init_model_dir"]).context_length == 77
    captions = list(manifest["caption"])
    captions[0], captions[1], captions[2] = " ".join(["cat"] * 75), " ".join(["cat"] * 76), "word " * 20_000
    write_manifest(manifest.assign(caption=captions), paths["train_manifest"])
    summary = run_training(paths, tmp_path / "run", small_config())
    # the other captions are make_captions' 6 to 19 words: far from 77 positions
    assert summary["captions_truncated"]["count"] == 2
    assert summary["captions_truncated"]["share"] == pytest.approx(2 / 16)
    assert summary["captions_truncated"]["context_length"] == 77
    assert json.loads((tmp_path / "run" / "out" / "summary.json").read_text())["captions_truncated"]["count"] == 2
