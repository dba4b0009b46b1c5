"""Data-parallel training under torchrun: two CPU processes (gloo) must train like one process.

The configured micro_batch is the global micro-batch: two ranks holding 4 samples each of a global
micro-batch of 8, with the HN margins and the negatives gathered over both, must end with the weights
of one process training on micro-batches of 8. A run whose ranks only saw their own 4 samples
(one process, micro_batch 4, twice the accumulation) is the foil that shows the comparison can fail.
AdamW's eps is set near the gradients' size so the updates follow the gradients' magnitude, not only
their sign: a wrong averaging factor over ranks would show in the weights.

The two-process runs are one real ``torchrun`` launch that calls the training function for each job
in turn: the first starts the process group from torchrun's environment, the later ones reuse it.
Also pinned: the frozen-margin variant, a NaN on one rank stopping both at the same micro-batch, and
only rank 0 writing (rank 1 is given folders of its own, which must stay absent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from test_train_support import make_dataset, read_csv_rows, run_training, small_config

from hnclip.training.distributed import DistributedContext, check_world_size, read_launch_env

WORLD_SIZE = 2
N_TRAIN = 32  # 2 optimizer steps of 8 x 2 per epoch
ATOL = 1e-5

SETTINGS = dict(micro_batch=8, accum_steps=2, gamma=0.5, token_weight=0.0, epochs=2, lr=2e-2, eps=1.0,
                dynamics_every=1, checkpoint_every=3, warmup_steps=1)
FROZEN = dict(SETTINGS, margin="frozen", dynamics_every=0)
NAN_CALL = 6  # the objective's 6th call: step 3 (epoch 2), micro-batch 2 of 2

# One torchrun launch runs every training job in turn: starting two interpreters with torch costs most of
# the test's time.
RANK_SCRIPT = r'''
import json, os, sys, traceback
from pathlib import Path
import torch
torch.set_num_threads(1)  # two ranks share a small CPU
import hnclip.train as T
import hnclip.training.objective as O
from hnclip.config.train import TrainConfig
args = json.loads(sys.argv[1])
rank = int(os.environ["RANK"])
real_objective = O.compute_objective
for job in args["jobs"]:
    calls = [0]

    def objective(*a, poison=job.get("poison_call") if rank == 1 else None, **k):
        calls[0] += 1
        loss, standard = real_objective(*a, **k)
        return (loss * float("nan") if calls[0] == poison else loss), standard

    O.compute_objective = objective
    try:
        report = {"summary": T.train(TrainConfig(**job["config"]), **{k: Path(v) for k, v in job["paths"][rank].items()})}
    except Exception as error:
        report = {"error": type(error).__name__, "message": str(error), "trace": traceback.format_exc()}
    Path(args["reports"], f"{job['name']}.rank{rank}.json").write_text(json.dumps(report, sort_keys=True))
'''


def launch(tmp_path: Path, jobs: list[dict], world_size: int = WORLD_SIZE, timeout: float = 180.0) -> Path:
    """Run the training jobs under torchrun; returns the folder of the per-job, per-rank reports."""
    import hnclip

    script, reports = tmp_path / "rank.py", tmp_path / "reports"
    script.write_text(RANK_SCRIPT)
    reports.mkdir()
    src = str(Path(hnclip.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    payload = json.dumps({"jobs": jobs, "reports": str(reports)})
    result = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world_size}",
         str(script), payload], capture_output=True, text=True, env=env, timeout=timeout)
    if result.returncode != 0:
        raise AssertionError(f"torchrun exited {result.returncode}; stderr tail:\n{result.stderr[-4000:]}")
    return reports


def ddp_job(name: str, root: Path, paths: dict, cfg, **extra) -> dict:
    """A job whose rank r works in ``root/name{r}``: rank 1's folders must stay absent."""
    import dataclasses

    evaluation = {"eval_manifest": paths["train_manifest"], "eval_store_dir": paths["store_dir"]}
    rank_paths = [{k: str(v) for k, v in dict(paths, **evaluation, out_dir=root / f"{name}{rank}" / "out",
                                              checkpoint_dir=root / f"{name}{rank}" / "ckpt").items()}
                  for rank in range(WORLD_SIZE)]
    return {"name": name, "config": dataclasses.asdict(cfg), "paths": rank_paths, **extra}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The two-process runs and their single-process references, all from one dataset and initial model."""
    root = tmp_path_factory.mktemp("ddp_train")
    paths = make_dataset(root / "data", n=N_TRAIN)
    evaluation = {"eval_manifest": paths["train_manifest"], "eval_store_dir": paths["store_dir"]}
    cfg = small_config(**SETTINGS)
    reports = launch(root, [ddp_job("ddp", root, paths, cfg),
                            ddp_job("frozen", root, paths, small_config(**FROZEN)),
                            ddp_job("nan", root, paths, small_config(**dict(SETTINGS, checkpoint_every=2)),
                                    poison_call=NAN_CALL),
                            ddp_job("finelip", root, paths, small_config(**dict(SETTINGS, framework="finelip",
                                                                                gamma=0.0, max_steps=2)))])
    run_training(paths, root / "single", cfg, **evaluation)
    run_training(paths, root / "local_only", small_config(**dict(SETTINGS, micro_batch=4, accum_steps=4)),
                 **evaluation)
    run_training(paths, root / "frozen_single", small_config(**FROZEN), **evaluation)

    def report(job, rank):
        return json.loads((reports / f"{job}.rank{rank}.json").read_text())

    for job in ("ddp", "frozen", "finelip"):
        for rank in range(WORLD_SIZE):
            assert "error" not in report(job, rank), report(job, rank)["trace"]
    return {"root": root, "paths": paths, "cfg": cfg, "ddp": root / "ddp0", "rank1": root / "ddp1",
            "single": root / "single", "local_only": root / "local_only", "frozen": root / "frozen0",
            "frozen_single": root / "frozen_single", "nan": root / "nan0",
            "report": report}


def weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "out" / "model" / "model.safetensors"))


def max_difference(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a if a[k].numel())


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_two_processes_end_with_the_weights_of_one_process_on_the_global_micro_batch(runs):
    single, ddp = weights(runs["single"]), weights(runs["ddp"])
    initial = load_file(str(runs["paths"]["init_model_dir"] / "model.safetensors"))
    assert max_difference(single, initial) > 100 * ATOL  # training moved the weights far beyond the tolerance
    # negatives and margins from the local 4 samples only: what a missing gather would give
    assert max_difference(weights(runs["local_only"]), single) > 10 * ATOL
    for key in single:
        torch.testing.assert_close(ddp[key], single[key], rtol=0, atol=ATOL, msg=lambda m, k=key: f"{k}: {m}")


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_two_processes_log_the_dynamics_of_the_global_micro_batch(runs):
    single = read_csv_rows(runs["single"] / "out" / "dynamics.csv")
    ddp = read_csv_rows(runs["ddp"] / "out" / "dynamics.csv")
    local_only = read_csv_rows(runs["local_only"] / "out" / "dynamics.csv")
    assert len(single) == len(ddp) == 4
    assert abs(float(local_only[0]["loss"]) - float(single[0]["loss"])) > 1e-2  # the loss depends on the batch
    for expected, got in zip(single, ddp, strict=True):
        assert (got["step"], got["epoch"]) == (expected["step"], expected["epoch"])
        for column in ("lr", "logit_scale", "loss", "infonce", "grad_norm_standard", "grad_norm_boosted",
                       "grad_cosine"):
            assert float(got[column]) == pytest.approx(float(expected[column]), rel=1e-4, abs=1e-7), column
    # evaluation after each epoch, by rank 0: recall may move by at most one hit of 32 on float noise
    for expected, got in zip(read_csv_rows(runs["single"] / "out" / "epochs.csv"),
                             read_csv_rows(runs["ddp"] / "out" / "epochs.csv"), strict=True):
        assert (got["epoch"], got["step"]) == (expected["epoch"], expected["step"])
        for column in ("i2t_r1", "t2i_r1", "i2t_r5", "t2i_r5"):
            assert abs(float(got[column]) - float(expected[column])) <= 100 / N_TRAIN + 1e-9, column


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_frozen_margin_rows_are_those_each_rank_holds(runs):
    single, frozen = weights(runs["frozen_single"]), weights(runs["frozen"])
    assert max_difference(single, weights(runs["single"])) > 10 * ATOL  # frozen G differs from the live one
    for key in single:
        torch.testing.assert_close(frozen[key], single[key], rtol=0, atol=ATOL, msg=lambda m, k=key: f"{k}: {m}")


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_a_nan_on_one_rank_stops_every_rank_at_the_same_micro_batch(runs):
    order = np.random.default_rng([0, 1]).permutation(N_TRAIN)  # epoch 2's documented order, seed 0
    rows = order[8:16].tolist()  # step 3 is epoch 2's first step; this is its second global micro-batch
    for rank in range(WORLD_SIZE):
        report = runs["report"]("nan", rank)
        assert report.get("error") == "FloatingPointError", report
        assert "loss is nan at step 3 (epoch 2, micro-batch 2 of 2" in report["message"]
        assert f"training-set rows {rows}" in report["message"]
    from hnclip.training.checkpoint import load_checkpoint

    assert load_checkpoint(runs["nan"] / "ckpt" / "last.pt")["state"]["step"] == 2  # the last good one
    assert [int(r["step"]) for r in read_csv_rows(runs["nan"] / "out" / "dynamics.csv")] == [1, 2]
    assert not (runs["nan"] / "out" / "summary.json").exists()


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_only_rank_zero_writes_and_every_rank_returns_its_summary(runs):
    out = runs["ddp"] / "out"
    assert sorted(p.name for p in out.iterdir()) == ["dynamics.csv", "epoch_ranks.csv", "epochs.csv", "model", "summary.json"]
    assert (runs["ddp"] / "ckpt" / "last.pt").is_file()
    for job in ("ddp", "frozen", "nan", "finelip"):  # rank 1 was given folders of its own and created none
        assert not (runs["root"] / f"{job}1").exists(), job
    rank0, rank1 = (runs["report"]("ddp", rank)["summary"] for rank in range(WORLD_SIZE))
    assert rank0 == rank1 == json.loads((out / "summary.json").read_text())
    assert rank0["world_size"] == WORLD_SIZE and rank0["samples_seen"] == 4 * 16


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_finelip_without_a_global_term_trains_under_ddp(runs):
    """Plain FineLIP reads no logit scale: it is frozen, so DDP finds a gradient for every trainable parameter."""
    summaries = [runs["report"]("finelip", rank)["summary"] for rank in range(WORLD_SIZE)]
    assert summaries[0] == summaries[1] and summaries[0]["steps"] == 2
    assert {g["name"] for g in summaries[0]["recipe"]["groups"]} >= {"module_decay", "module_no_decay"}


@pytest.mark.slow  # torchrun, two processes (a module fixture, ~50 s)
def test_checkpoint_records_the_world_size_and_resume_with_another_refuses(runs):
    from hnclip.training.checkpoint import load_checkpoint

    ckpt = runs["ddp"] / "ckpt"
    checkpoint = load_checkpoint(ckpt / "last.pt")
    assert checkpoint["world_size"] == WORLD_SIZE and len(checkpoint["rng_by_rank"]) == WORLD_SIZE
    with pytest.raises(RuntimeError) as refused:
        run_training(runs["paths"], runs["ddp"], runs["cfg"])  # this process: a world of one
    message = str(refused.value)
    assert str(ckpt / "last.pt") in message and "2 process(es), this run has 1" in message
    assert "rm " in message  # how to proceed


def test_global_micro_batch_splits_into_contiguous_shares_in_rank_order():
    rows = np.arange(10, 18)
    shares = [DistributedContext(rank, 4).shard(rows) for rank in range(4)]
    assert [s.tolist() for s in shares] == [[10, 11], [12, 13], [14, 15], [16, 17]]
    with pytest.raises(ValueError, match=r"TrainConfig.micro_batch=6 .* 4 processes"):
        DistributedContext(0, 4).local_batch(6)


def test_launch_environment_is_read_and_checked():
    assert read_launch_env({}) == DistributedContext(0, 1, 0)
    assert read_launch_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1"}) == DistributedContext(3, 4, 1)
    with pytest.raises(ValueError, match="RANK=4 and WORLD_SIZE=4"):
        read_launch_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        read_launch_env({"WORLD_SIZE": "two"})


def test_checkpoint_without_a_world_size_counts_as_one_process(tmp_path):
    check_world_size(tmp_path / "last.pt", {}, 1)
    with pytest.raises(RuntimeError, match=r"1 process\(es\), this run has 2"):
        check_world_size(tmp_path / "last.pt", {}, 2)
