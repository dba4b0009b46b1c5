"""`hnclip train --test-*`: a training job that evaluates its saved run on its train set's own test split
(workflow/rules/train.smk) writes the record an evaluate job on the saved folder writes, number for number."""

from __future__ import annotations

import json

import pytest
from test_train_support import make_dataset

from hnclip.cli import main

SETTINGS = ["micro_batch=4", "accum_steps=2", "epochs=1", "lr=1e-2", "weight_decay=0", "grad_clip=0",
            "warmup_steps=0", "dynamics_every=0", "device=cpu", "seed=0"]
RUN = {"train_set": "toy", "method": "hnclip", "gamma": 0.5, "fraction": 1.0, "seed": 0}


def train_args(paths, root) -> list[str]:
    args = ["train", "--init", str(paths["init_model_dir"]), "--manifest", str(paths["train_manifest"]),
            "--images", str(paths["store_dir"]), "--out", str(root / "out"), "--checkpoint-dir", str(root / "ckpt"),
            "--threads", "1"]
    return args + [item for s in SETTINGS for item in ("--set", s)]


def test_the_training_job_writes_the_record_an_evaluate_job_writes_of_the_saved_run(tmp_path):
    paths = make_dataset(tmp_path / "train", n=16)
    test = make_dataset(tmp_path / "test", n=12, seed=1)  # other images and captions, the same image size
    own_test = ["--test-manifest", str(test["train_manifest"]), "--test-images", str(test["store_dir"]),
                "--test-benchmark", "toy", "--test-out", str(tmp_path / "in_job.json"),
                "--test-batch-size", "5", "--run-info", json.dumps(RUN)]
    assert main(train_args(paths, tmp_path) + own_test) == 0
    assert main(["evaluate", "--model", str(tmp_path / "out" / "model"), "--manifest", str(test["train_manifest"]),
                 "--images", str(test["store_dir"]), "--eval-benchmark", "toy", "--run-info", json.dumps(RUN),
                 "--batch-size", "5", "--threads", "1", "--out", str(tmp_path / "job.json")]) == 0
    in_job = json.loads((tmp_path / "in_job.json").read_text())
    job = json.loads((tmp_path / "job.json").read_text())
    assert in_job.pop("wall_time_s") > 0 and job.pop("wall_time_s") > 0
    assert in_job == job  # metrics, per-query ranks, cut-offs, counts and the run's record
    assert in_job["run"] == RUN and in_job["n_images"] == 12 and in_job["ks"] == [1, 5, 10, 25, 50]
    # a trained model, not the initial one: the record is of the saved run
    assert main(["evaluate", "--model", str(paths["init_model_dir"]), "--manifest", str(test["train_manifest"]),
                 "--images", str(test["store_dir"]), "--eval-benchmark", "toy", "--batch-size", "5",
                 "--out", str(tmp_path / "init.json")]) == 0
    assert json.loads((tmp_path / "init.json").read_text())["ranks"] != in_job["ranks"]


def test_a_partial_set_of_test_options_is_refused_naming_the_missing_ones(tmp_path):
    paths = make_dataset(tmp_path / "train", n=16)
    with pytest.raises(SystemExit, match="also needs --test-images, --test-benchmark, --test-batch-size"):
        main(train_args(paths, tmp_path) + ["--test-manifest", "x.csv", "--test-out", "y.json"])
    assert not (tmp_path / "out").exists()  # refused before training
