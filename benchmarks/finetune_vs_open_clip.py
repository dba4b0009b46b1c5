"""Fine-tuning on your own data: the config/finetune.yaml DAG against open_clip_train.main, same data and model.

Both fine-tune the same open_clip model (an architecture open_clip knows, or the small one below in open_clip's
local-dir: format; its "pretrained" weights a seeded random init saved to one file that both load) on the same tab-separated CSV (filepath<TAB>title, open_clip's
--csv-img-key/--csv-caption-key), for the same epochs, batch size, learning rate, weight decay and warmup, in
float32 on the same CPU threads, and both score the test CSV after every epoch:

- open_clip: ``python -m open_clip_train.main --train-data train.csv --val-data test.csv ...`` (its defaults
  otherwise: a checkpoint per epoch, AdamW, cosine);
- hnclip: ``snakemake --configfile config/finetune.yaml <overlay>`` in a fresh working directory: fetch, convert,
  prepare, train (R@K after each epoch), the zero-shot and final evaluations, the tables, the per-epoch figure,
  the export in open_clip's and transformers' formats with model cards, and the report: everything the config
  promises, start to end, Snakemake's own start-up included.

Wall time of each whole command, and the ratio hnclip / open_clip (the target: at most 2), beside their CPU time
(user + system of every process each command waited for), which other load on a shared machine moves far less.
Where hnclip's time goes is printed from Snakemake's per-job benchmark files. Needs open_clip_train's imports (``pip install -e
.[bench]``: braceexpand and webdataset). Run from the repository root:

    python benchmarks/finetune_vs_open_clip.py                 # 1,000 training images, 3 epochs (tens of minutes)
    python benchmarks/finetune_vs_open_clip.py --quick         # 64 images, 1 epoch: a smoke run
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange", "white", "black")
SHAPES = ("square", "circle", "triangle", "bar")
PLACES = ("top left", "top right", "bottom left", "bottom right", "centre")


def _draw(draw, shape: str, box: tuple[int, int, int, int], rgb) -> None:
    left, top, right, bottom = box
    if shape == "square":
        draw.rectangle(box, fill=rgb)
    elif shape == "circle":
        draw.ellipse(box, fill=rgb)
    elif shape == "triangle":
        draw.polygon([(left, bottom), (right, bottom), ((left + right) // 2, top)], fill=rgb)
    else:
        draw.rectangle((left, top + 18, right, bottom - 18), fill=rgb)


def write_data(folder: Path, n_train: int, n_test: int, seed: int = 0) -> tuple[Path, Path]:
    """JPEG scenes (256 x 192, one to three coloured shapes) with a caption each; two tables of absolute paths."""
    import numpy as np
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(seed)
    images = folder / "images"
    images.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n_train + n_test):
        image = Image.new("RGB", (256, 192), tuple(int(v) for v in rng.integers(0, 80, 3)))
        draw = ImageDraw.Draw(image)
        words = []
        for _ in range(int(rng.integers(1, 4))):
            colour, shape, place = (int(rng.integers(len(COLOURS))), int(rng.integers(len(SHAPES))),
                                    int(rng.integers(len(PLACES))))
            x, y = (40 + 150 * (place % 2), 30 + 100 * (place // 2 % 2)) if place < 4 else (128, 96)
            rgb = tuple(int(c) for c in (np.array([[255, 0, 0], [0, 200, 0], [0, 0, 255], [250, 230, 0], [160, 0, 200],
                                                   [255, 140, 0], [250, 250, 250], [10, 10, 10]])[colour]))
            _draw(draw, SHAPES[shape], (x - 25, y - 25, x + 25, y + 25), rgb)
            words.append(f"a {COLOURS[colour]} {SHAPES[shape]} at the {PLACES[place]}")
        path = images / f"{i:05d}.jpg"
        image.save(path, quality=90)
        rows.append((str(path.resolve()), "A dark picture with " + ", ".join(words) + "."))
    tables = []
    for name, part in (("train.csv", rows[:n_train]), ("test.csv", rows[n_train:])):
        with open(folder / name, "w", newline="") as handle:
            writer = csv.writer(handle, delimiter="\t")
            writer.writerow(("filepath", "title"))
            writer.writerows(part)
        tables.append(folder / name)
    return tables[0], tables[1]


# --model small: an architecture sized so that a 2-core CPU shared with other work runs 1,000 images x 3 epochs in
# minutes (ViT at 64 px, patch 16, width 256, 6 blocks a tower), given to both as open_clip's local-dir: folder
SMALL = {"embed_dim": 256, "quick_gelu": False,
         "vision_cfg": {"image_size": 64, "patch_size": 16, "width": 256, "layers": 6, "head_width": 64},
         "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 256, "heads": 4, "layers": 6}}


def write_model(model: str, folder: Path, seed: int = 0) -> tuple[str, str | None, int]:
    """The model both trainers start from, seeded random weights: (open_clip model name, weights file or None for
    a local-dir: folder, image size). ``small``: :data:`SMALL` in an open_clip local-dir: folder."""
    import open_clip
    import torch
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    if model == "small":
        folder.mkdir(parents=True, exist_ok=True)
        created = open_clip.model.CLIP(**SMALL)
        save_file({k: v.contiguous() for k, v in created.state_dict().items()}, str(folder / "open_clip_model.safetensors"))
        (folder / "open_clip_config.json").write_text(json.dumps({"model_cfg": SMALL, "preprocess_cfg": {}}))
        return f"local-dir:{folder}", None, SMALL["vision_cfg"]["image_size"]
    created = open_clip.create_model(model)
    weights = folder.with_suffix(".safetensors")
    save_file({k: v.contiguous() for k, v in created.state_dict().items()}, str(weights))
    return model, str(weights), open_clip.get_model_config(model)["vision_cfg"]["image_size"]


def _timed(cmd: list[str], cwd: Path, env: dict, log: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and every process it waited for: user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    with open(log, "w") as handle:
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:  # the log's tail here too: the default working folder is removed on exit
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed (exit {proc.returncode}); {log} ends:\n{tail}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _job_seconds(workdir: Path) -> dict[str, float]:
    """Seconds per kind of job, from Snakemake's benchmark files (the jobs that declare one)."""
    totals: dict[str, float] = {}
    for path in (workdir / "results/benchmarks").rglob("*.tsv"):
        kind = path.relative_to(workdir / "results/benchmarks").parts[0]
        rows = path.read_text().splitlines()
        if len(rows) >= 2:
            totals[kind] = totals.get(kind, 0.0) + float(rows[1].split("\t")[0])
    return {kind: round(seconds, 2) for kind, seconds in sorted(totals.items())}


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=1000, help="training images (one caption each)")
    parser.add_argument("--test-images", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--model", default="small",
                        help="an open_clip architecture (ViT-B-32, ViT-S-32, ...) or small (SMALL); random weights")
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--wd", type=float, default=0.2)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="CPU threads of either trainer (snakemake --cores, torch's threads)")
    parser.add_argument("--workers", type=int, default=1, help="open_clip_train's data-loader workers")
    parser.add_argument("--out", default=None, help="working folder (default: a temporary one, removed)")
    parser.add_argument("--quick", action="store_true", help="64 images, 32 test images, 1 epoch, batch 16")
    args = parser.parse_args()
    if args.quick:
        args.images, args.test_images, args.epochs, args.batch_size = 64, 32, 1, 16

    tmp = None if args.out else tempfile.TemporaryDirectory(prefix="finetune-vs-open-clip-")
    out = Path(args.out or tmp.name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    train_csv, test_csv = write_data(out / "data", args.images, args.test_images)
    model, weights, image_size = write_model(args.model, out / "model")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)
    load_before = os.getloadavg()[0]

    open_clip_cmd = [sys.executable, "-m", "open_clip_train.main", "--train-data", str(train_csv), "--val-data",
                     str(test_csv), "--dataset-type", "csv", "--csv-img-key", "filepath", "--csv-caption-key", "title",
                     "--csv-separator", "\t", "--model", model, *(["--pretrained", weights] if weights else []), "--batch-size",
                     str(args.batch_size), "--epochs", str(args.epochs), "--lr", str(args.lr), "--wd", str(args.wd),
                     "--warmup", str(args.warmup), "--workers", str(args.workers), "--precision", "fp32", "--device",
                     "cpu", "--seed", "0", "--logs", str(out / "open_clip_logs"), "--name", "run"]
    open_clip_s, open_clip_cpu = _timed(open_clip_cmd, out, env, out / "open_clip.log")

    overlay = {
        "backbone": {"source": "open_clip", "model": model, "checkpoint": weights, "image_size": image_size,
                     "context_length": 77},
        "benchmarks": {"my_captions": {"root": str(out / "data")}},
        "train": {"epochs": args.epochs, "micro_batch": args.batch_size, "accum_steps": 1, "lr": args.lr,
                  "weight_decay": args.wd, "warmup_steps": args.warmup, "precision": "fp32", "device": "cpu"},
    }
    (out / "overlay.yaml").write_text(json.dumps(overlay))  # JSON is YAML
    workdir = out / "hnclip"
    hnclip_cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                  str(workdir), "--cores", str(args.threads), "--configfile", str(REPO / "config/finetune.yaml"),
                  str(out / "overlay.yaml")]
    hnclip_s, hnclip_cpu = _timed(hnclip_cmd, REPO, env, out / "hnclip.log")

    summary = json.loads(next((workdir / "results/runs").rglob("summary.json")).read_text())
    record = json.loads(next((workdir / "results/evals/my_captions").rglob("my_captions.json")).read_text())
    # open_clip_train writes its evaluations beside its checkpoints (train.evaluate: args.checkpoint_path)
    results_file = out / "open_clip_logs/run/checkpoints/results.jsonl"
    results = [json.loads(line) for line in results_file.read_text().splitlines()] if results_file.is_file() else []
    if not results:
        print(f"warning: open_clip_train wrote no evaluation ({results_file} missing or empty; see "
              f"{out / 'open_clip.log'})", file=sys.stderr)
    report = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpu": _cpu(), "cores": os.cpu_count(), "platform": platform.platform(),
                    "load_average_before": round(load_before, 2), "load_average_after": round(os.getloadavg()[0], 2)},
        "settings": {k: getattr(args, k) for k in ("images", "test_images", "epochs", "batch_size", "model", "lr", "wd",
                                                    "warmup", "threads", "workers")},
        "open_clip_s": round(open_clip_s, 1), "hnclip_s": round(hnclip_s, 1), "ratio": round(hnclip_s / open_clip_s, 2),
        # CPU seconds: what the work costs whatever else the machine runs (a shared machine moves wall times)
        "open_clip_cpu_s": round(open_clip_cpu, 1), "hnclip_cpu_s": round(hnclip_cpu, 1),
        "cpu_ratio": round(hnclip_cpu / open_clip_cpu, 2),
        "hnclip_training_s": round(summary["wall_time_s"], 1), "hnclip_jobs_s": _job_seconds(workdir),
        "hnclip_r1": {k: round(record["metrics"][k], 1) for k in ("i2t_r1", "t2i_r1")},
        # open_clip_train's results.jsonl: fractions, one line per evaluation
        "open_clip_r1": {k: round(100 * results[-1].get(k, float("nan")), 1) for k in ("image_to_text_R@1",
                                                                                     "text_to_image_R@1")}
        if results else None,
    }
    print(json.dumps(report, indent=2))
    print(f"open_clip_train.main: {open_clip_s:.1f} s; hnclip (config/finetune.yaml, {args.threads} cores): "
          f"{hnclip_s:.1f} s, of which training {summary['wall_time_s']:.1f} s; ratio {hnclip_s / open_clip_s:.2f} "
          f"(target <= 2); CPU time {open_clip_cpu:.1f} s vs {hnclip_cpu:.1f} s, ratio {hnclip_cpu / open_clip_cpu:.2f}")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
