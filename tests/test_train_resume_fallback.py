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


class _RunsCode:
    """Pickled as a call of os.system: what a malicious checkpoint holds (never unpickled in these tests)."""

    def __reduce__(self):
        return (os.system, ("echo pwned > pwned.txt",))


@pytest.mark.slow  # a trainer subprocess
def test_a_last_checkpoint_that_needs_code_is_refused_in_one_line_and_its_advice_never_reaches_the_log(tmp_path):
    """torch refuses the pickle (weights_only=True) in a message of many lines that advises weights_only=False;
    the job's log (whose last line the console shows) says in one line that the file is refused because loading it
    would run code, names it, and keeps none of that advice. previous.pt is not fallen back to: the file is no
    damaged copy of ours."""
    import subprocess
    import sys
    from pathlib import Path

    import torch

    import hnclip
    from hnclip.job_errors import last_line
    from hnclip.training.checkpoint import save_checkpoint

    paths = make_dataset(tmp_path / "data", n=16)
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    torch.save({"state": _RunsCode()}, ckpt / CHECKPOINT_NAME)
    save_checkpoint(ckpt / PREVIOUS_NAME, {"state": {"step": 1}})
    command = [sys.executable, "-m", "hnclip", "train", "--init", str(paths["init_model_dir"]), "--manifest",
               str(paths["train_manifest"]), "--images", str(paths["store_dir"]), "--out", str(tmp_path / "out"),
               "--checkpoint-dir", str(ckpt), "--threads", "1", "--set", "micro_batch=4", "--set", "accum_steps=2",
               "--set", "device=cpu", "--set", "progress_every=0"]
    env = dict(os.environ, PYTHONPATH=str(Path(hnclip.__file__).resolve().parents[1]))
    log = tmp_path / "train.log"
    with open(log, "w") as stderr:
        proc = subprocess.run(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, cwd=tmp_path,
                              timeout=300)
    assert proc.returncode == 1 and not (tmp_path / "pwned.txt").exists()
    line = last_line(log)
    assert line.startswith(f"hnclip.training.checkpoint.CheckpointRefusedError: checkpoint {ckpt / CHECKPOINT_NAME} "
                           "refused: loading it would execute code (it asks for the Python object ")
    assert "system" in line and f"rm {ckpt / CHECKPOINT_NAME}" in line
    text = log.read_text()
    assert "weights_only" not in text and "will likely succeed" not in text and "resuming from" not in text


def test_a_file_torch_cannot_unpickle_at_all_is_unreadable_in_one_line_without_torchs_advice(tmp_path):
    (tmp_path / CHECKPOINT_NAME).write_bytes(bytes(range(200, 256)) * 20)  # no zip, no pickle
    with pytest.raises(CheckpointUnreadableError) as error:
        load_checkpoint(tmp_path / CHECKPOINT_NAME)
    text = str(error.value)
    assert text.startswith(f"cannot read checkpoint {tmp_path / CHECKPOINT_NAME} (") and "\n" not in text
    assert "weights_only" not in text and text.endswith(f"(rm {tmp_path / CHECKPOINT_NAME}) to start over")
