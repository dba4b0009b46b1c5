"""A truncated last.pt falls back to the checkpoint before it: the run resumes from previous.pt, says so,
and still ends bit-identical to an uninterrupted run (hnclip.training.checkpoint)."""

from __future__ import annotations

import dataclasses
import os

import pytest
from test_train_support import assert_same_run, make_dataset, run_training, run_training_process, small_config

from hnclip.training.checkpoint import (
    CHECKPOINT_NAME,
    PREVIOUS_NAME,
    CheckpointUnreadableError,
    load_checkpoint,
)


def test_truncated_last_checkpoint_resumes_from_the_previous_and_matches_uninterrupted(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    # 2 steps per epoch, 2 epochs; a checkpoint after every step
    cfg = small_config(gamma=0.5, epochs=2, checkpoint_every=1, dynamics_every=1, warmup_steps=1)
    run_training(paths, tmp_path / "reference", cfg)
    run_dir = tmp_path / "interrupted"
    run_paths = dict(paths, out_dir=run_dir / "out", checkpoint_dir=run_dir / "ckpt")
    config = dataclasses.asdict(cfg)
    first = run_training_process(tmp_path / "session0.py", config, run_paths, {"after_checkpoint": 3})
    assert first[-2:] == ["CHECKPOINT 3", "PAUSED"]
    last, previous = run_dir / "ckpt" / CHECKPOINT_NAME, run_dir / "ckpt" / PREVIOUS_NAME
    assert load_checkpoint(previous)["state"]["step"] == 2  # the one before step 3's
    os.truncate(last, last.stat().st_size // 3)  # a copy cut short, a full disk
    with pytest.raises(CheckpointUnreadableError):
        load_checkpoint(last)
    second = run_training_process(tmp_path / "session1.py", config, run_paths)
    assert second[0] == "CHECKPOINT 3"  # resumed at step 2: step 3 is trained again
    stderr = (tmp_path / "session1.log").read_text()
    assert "resuming from the checkpoint before it" in stderr and str(previous) in stderr
    assert (run_dir / "ckpt" / (CHECKPOINT_NAME + ".unreadable")).is_file()
    assert not previous.exists()  # a finished run keeps no fallback
    assert_same_run(tmp_path / "reference" / "out", run_dir / "out")


def test_an_unreadable_last_checkpoint_without_a_previous_one_still_names_the_file(tmp_path):
    paths = make_dataset(tmp_path / "data", n=16)
    cfg = small_config(epochs=1, checkpoint_every=100)
    (tmp_path / "run" / "ckpt").mkdir(parents=True)
    (tmp_path / "run" / "ckpt" / CHECKPOINT_NAME).write_bytes(b"PK\x03\x04 cut short")
    with pytest.raises(CheckpointUnreadableError, match=r"last\.pt.*rm "):
        run_training(paths, tmp_path / "run", cfg)


def _checkpoint(directory):
    from hnclip.training.checkpoint import RunCheckpoint
    from hnclip.training.distributed import DistributedContext

    return RunCheckpoint(directory, {"lr": 1.0}, "hash", "data", DistributedContext())


def test_a_second_rank_reads_the_same_fallback_because_reading_renames_nothing(tmp_path):
    from hnclip.training.checkpoint import RunCheckpoint, save_checkpoint
    from hnclip.training.distributed import DistributedContext

    save_checkpoint(tmp_path / PREVIOUS_NAME, {"config": {"lr": 1.0}, "config_hash": "hash", "data_fingerprint": "data",
                                               "state": {"step": 4}, "world_size": 2, "finished": False})
    (tmp_path / CHECKPOINT_NAME).write_bytes(b"cut short")
    ranks = [RunCheckpoint(tmp_path, {"lr": 1.0}, "hash", "data", DistributedContext(rank, 2)) for rank in (0, 1)]
    assert [r.read()["state"]["step"] for r in ranks] == [4, 4]
    assert (tmp_path / CHECKPOINT_NAME).is_file()  # moved aside by the first save, not by a read


def test_a_last_checkpoint_deleted_by_hand_starts_over_and_drops_the_previous_one(tmp_path):
    from hnclip.training.checkpoint import save_checkpoint

    save_checkpoint(tmp_path / PREVIOUS_NAME, {"state": {"step": 4}})
    assert _checkpoint(tmp_path).read() is None
    assert not (tmp_path / PREVIOUS_NAME).exists()
