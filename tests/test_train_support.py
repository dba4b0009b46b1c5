"""Shared fixtures of the training tests: a micro model folder, a random image store and a manifest.

Named ``test_train_*`` to sit with the training tests; it holds no tests itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

WORDS = ("red", "blue", "green", "small", "large", "cube", "ball", "left", "right", "of", "the", "a", "near",
         "above", "below", "shiny", "matte", "tree", "car", "dog")


def write_store(directory: Path, image_ids: list[str], image_size: int = 32, seed: int = 0) -> Path:
    """An image store in the on-disk format (images.npy uint8 [N, H, W, 3] + index.json)."""
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(len(image_ids), image_size, image_size, 3), dtype=np.uint8)
    np.save(directory / "images.npy", images)
    (directory / "index.json").write_text(json.dumps(
        {"image_ids": image_ids, "image_size": image_size, "count": len(image_ids)}))
    return directory


def make_captions(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed + 1000)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(6, 20)))) for _ in range(n)]


def make_dataset(root: Path, n: int = 16, seed: int = 0, model_seed: int = 0) -> dict[str, Path]:
    """A micro model folder, a store and a manifest of ``n`` random images with random captions."""
    from hnclip.data.manifest import write_manifest
    from hnclip.models import create_model, save_model

    root = Path(root)
    image_ids = [f"img{i:03d}" for i in range(n)]
    store = write_store(root / "images", image_ids, seed=seed)
    manifest = pd.DataFrame({"image_id": image_ids, "image_path": [str(root / f"{i}.jpg") for i in image_ids],
                             "caption": make_captions(n, seed)})
    write_manifest(manifest, root / "train.csv")
    model_dir = save_model(create_model("micro", seed=model_seed), root / "init_model")
    return {"init_model_dir": model_dir, "train_manifest": root / "train.csv", "store_dir": store}


def small_config(**overrides):
    """A fast CPU config: 2-sample accumulation of 4-sample micro-batches, no warmup, clipping or decay noise."""
    from hnclip.config.train import TrainConfig

    # no progress lines: the subprocess helpers below read the trainer's stdout for their own markers
    settings = dict(micro_batch=4, accum_steps=2, epochs=1, lr=1e-2, weight_decay=0.0, grad_clip=0.0, warmup_steps=0,
                    dynamics_every=0, checkpoint_every=100, device="cpu", seed=0, progress_every=0)
    settings.update(overrides)
    return TrainConfig(**settings)


def run_training(paths: dict, root: Path, cfg, **kwargs) -> dict:
    from hnclip.train import train

    return train(cfg, out_dir=Path(root) / "out", checkpoint_dir=Path(root) / "ckpt", **paths, **kwargs)


def read_csv_rows(path: Path) -> list[dict]:
    import csv

    with Path(path).open(newline="") as handle:
        return list(csv.DictReader(handle))


# ------------------------------------------------------------------ killing a training run in a subprocess
TRAIN_SCRIPT = r'''
import json, sys, time
from pathlib import Path
import torch
args = json.loads(sys.argv[1])
torch.set_num_threads(args["threads"])
import hnclip.train as T
import hnclip.training.objective as O
import hnclip.training.checkpoint as C
from hnclip.config.train import TrainConfig
pause = args.get("pause") or {}
real_save, real_objective, calls = C.save_checkpoint, O.compute_objective, [0]

def save(path, payload):
    real_save(path, payload)
    print("CHECKPOINT", payload["state"]["step"], flush=True)
    if pause.get("after_checkpoint") == payload["state"]["step"]:
        print("PAUSED", flush=True)
        time.sleep(600)

def objective(*a, **k):
    calls[0] += 1
    if pause.get("objective_call") == calls[0]:
        print("PAUSED", flush=True)
        time.sleep(600)
    return real_objective(*a, **k)

C.save_checkpoint, O.compute_objective = save, objective
T.train(TrainConfig(**args["config"]), **{k: Path(v) for k, v in args["paths"].items()})
print("DONE", flush=True)
'''


def run_training_process(script: Path, config: dict, paths: dict, pause: dict | None = None,
                         timeout: float = 120.0) -> list[str]:
    """Run the training script; with ``pause``, SIGKILL it once it reports the pause point.

    Returns its stdout lines. The kill lands while the process sleeps at the pause point, right after
    a checkpoint or inside a step (before a micro-batch's loss), i.e. with work not yet checkpointed.
    """
    import os
    import signal
    import subprocess
    import sys
    import threading

    import torch

    import hnclip

    script.write_text(TRAIN_SCRIPT)
    src = str(Path(hnclip.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
    payload = json.dumps({"config": config, "paths": {k: str(v) for k, v in paths.items()}, "pause": pause,
                          "threads": torch.get_num_threads()})
    log_path = script.with_suffix(".log")
    with log_path.open("w") as log:  # stderr (tracebacks, tqdm) for the failure message
        proc = subprocess.Popen([sys.executable, str(script), payload], stdout=subprocess.PIPE, stderr=log,
                                text=True, env=env)
    watchdog = threading.Timer(timeout, proc.kill)
    watchdog.start()
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line.strip())
            if pause and line.strip() == "PAUSED":
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait()
    finally:
        watchdog.cancel()
        proc.stdout.close()
    expected = (-signal.SIGKILL, "PAUSED") if pause else (0, "DONE")
    if (proc.returncode, lines[-1] if lines else None) != expected:
        raise AssertionError(f"training process: exit {proc.returncode}, stdout {lines}, stderr tail:\n"
                             f"{log_path.read_text()[-3000:]}")
    return lines


def assert_same_run(reference_dir, resumed_dir):
    """Final weights exactly equal; dynamics and epoch logs equal line for line."""
    import torch
    from safetensors.torch import load_file

    expected = load_file(str(reference_dir / "model" / "model.safetensors"))
    got = load_file(str(resumed_dir / "model" / "model.safetensors"))
    assert expected.keys() == got.keys()
    for key in expected:
        assert torch.equal(expected[key], got[key]), key
    for log in ("dynamics.csv", "epochs.csv"):
        assert (resumed_dir / log).read_text() == (reference_dir / log).read_text(), log


def interrupted_run(tmp_path, cfg, paths, pauses, delete_outputs: bool = False):
    """Sessions of one run in ``tmp_path/interrupted``, killed at each of ``pauses``, then run to the end.

    ``delete_outputs`` removes the output folder before each restart, as Snakemake does with a failed
    job's declared outputs; the checkpoint folder survives.
    """
    import dataclasses
    import shutil

    run_dir = tmp_path / "interrupted"
    run_paths = dict(paths, out_dir=run_dir / "out", checkpoint_dir=run_dir / "ckpt",
                     eval_manifest=paths["train_manifest"], eval_store_dir=paths["store_dir"])
    config = dataclasses.asdict(cfg)
    outputs = []
    for i, pause in enumerate(pauses + [None]):
        if i and delete_outputs:
            shutil.rmtree(run_dir / "out")
        outputs.append(run_training_process(tmp_path / f"session{i}.py", config, run_paths, pause))
    return run_dir / "out", outputs
