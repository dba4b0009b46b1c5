"""What the pre-resized image store saves per image against decoding the original JPEG, measured in one run.

Writes ``--n`` synthetic JPEGs of DOCCI/SA-1B size (default 2048x1536, every third one portrait) into
a temporary folder, builds an :class:`~hnclip.data.image_store.ImageStore` from them, then times, on
the same images in the same shuffled order, the two ways a training step can get one image:

- JPEG: open, full decode, RGB, the store's own ``resize_center_crop`` (open_clip's eval geometry),
  then ``to_model_input`` (float32, normalised): what a loader without the store pays every epoch;
- store: ``ImageStore.read([row])`` (a memory-map slice copy) then the same ``to_model_input``.

The two are timed image by image, alternating which goes first, so load from other processes falls on
both alike; every number is a median over images x rounds, and the ratio divides times taken in this
process. Both paths read from a warm page cache (the files were just written): a cold cache adds the
disk read of ~1 MB per JPEG and of 150 KB per store row, which favours the store further. The pixels
of both paths are checked to be identical, so the speed-up is not bought with a different image.

    python benchmarks/image_store_speed.py            # 50 images of 2048x1536, 3 rounds
    python benchmarks/image_store_speed.py --quick    # 10 images of 1400x1000, 1 round, seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image
from synthetic_jpegs import write_synthetic_jpegs  # benchmarks/ is on sys.path when run as a script
from tqdm import tqdm

from hnclip.data.image_store import ImageStore, build_store, resize_center_crop, to_model_input

# open_clip's OPENAI_DATASET_MEAN / _STD (Long-CLIP-L's normalisation); the values only set the
# arithmetic, which costs the same for any mean and std
MEAN = (0.48145466, 0.4578275, 0.40821073)
STD = (0.26862954, 0.26130258, 0.27577711)


def from_jpeg(path: Path, image_size: int) -> torch.Tensor:
    with Image.open(path) as image:
        image = image.convert("RGB")
    pixels = np.asarray(resize_center_crop(image, image_size), dtype=np.uint8)
    return to_model_input(pixels[None], MEAN, STD)


def from_store(store: ImageStore, row: int) -> torch.Tensor:
    return to_model_input(store.read([row]), MEAN, STD)


def time_per_image(paths: list[Path], store: ImageStore, image_size: int, rounds: int,
                   seed: int = 1) -> dict[str, list[float]]:
    rng = np.random.default_rng(seed)
    times: dict[str, list[float]] = {"jpeg": [], "store": []}
    steps = {"jpeg": lambda i: from_jpeg(paths[i], image_size), "store": lambda i: from_store(store, i)}
    for step in steps.values():  # first calls pay for imports, allocator growth and page-table setup
        step(0)
    for r in range(rounds):
        order = rng.permutation(len(paths))
        for k, i in enumerate(tqdm(order, desc=f"round {r + 1}/{rounds}", unit="img", leave=False)):
            labels = ("jpeg", "store") if (k + r) % 2 == 0 else ("store", "jpeg")
            for label in labels:
                start = time.perf_counter()
                steps[label](int(i))
                times[label].append(time.perf_counter() - start)
    return times


def time_batched_reads(store: ImageStore, batch: int, rounds: int, seed: int = 2) -> list[float]:
    """Seconds per image when a step reads ``batch`` random rows at once (the training loader's case)."""
    rng = np.random.default_rng(seed)
    per_image = []
    for _ in range(rounds * max(1, len(store) // batch)):
        rows = rng.choice(len(store), size=min(batch, len(store)), replace=False)
        start = time.perf_counter()
        to_model_input(store.read(rows), MEAN, STD)
        per_image.append((time.perf_counter() - start) / len(rows))
    return per_image


def check_identical_pixels(paths: list[Path], store: ImageStore, image_size: int) -> None:
    for row, path in enumerate(paths):
        with Image.open(path) as image:
            expected = np.asarray(resize_center_crop(image.convert("RGB"), image_size), dtype=np.uint8)
        if not np.array_equal(store.read([row])[0], expected):
            raise AssertionError(f"store row {row} differs from the JPEG path's pixels of {path}")


def format_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 images of 1400x1000, 1 round: a smoke run")
    parser.add_argument("--n", type=int, default=None, help="number of images (default 50; 10 with --quick)")
    parser.add_argument("--width", type=int, default=None, help="landscape width (default 2048; 1400 quick)")
    parser.add_argument("--height", type=int, default=None,
                        help="landscape height (default 1536; 1000 quick)")
    parser.add_argument("--image-size", type=int, default=224, help="store side (224: ViT-L/14 input)")
    parser.add_argument("--rounds", type=int, default=None,
                        help="passes over all images (default 3; 1 quick)")
    parser.add_argument("--batch", type=int, default=16, help="rows per read in the batched-store line")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: as in a DataLoader worker, and steadier timings)")
    args = parser.parse_args(argv)
    n = args.n or (10 if args.quick else 50)
    width = args.width or (1400 if args.quick else 2048)
    height = args.height or (1000 if args.quick else 1536)
    rounds = args.rounds or (1 if args.quick else 3)
    torch.set_num_threads(args.threads)

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
          f"({torch.get_num_threads()} thread), Pillow {Image.__version__}, {describe_load()}")
    with tempfile.TemporaryDirectory(prefix="hnclip-store-speed-") as tmp:
        folder = Path(tmp)
        paths = write_synthetic_jpegs(folder, n, width, height)
        mean_mb = statistics.mean(p.stat().st_size for p in paths) / 1e6
        manifest = pd.DataFrame({"image_id": [p.stem for p in paths], "image_path": [str(p) for p in paths]})
        start = time.perf_counter()
        build_store(manifest, folder / "store", args.image_size)
        build_seconds = time.perf_counter() - start
        store = ImageStore(folder / "store")
        check_identical_pixels(paths, store, args.image_size)
        times = time_per_image(paths, store, args.image_size, rounds)
        batched = time_batched_reads(store, args.batch, rounds)

    print(f"== {n} JPEGs of {width}x{height} ({width * height / 1e6:.1f} MP, every third portrait, "
          f"mean {mean_mb:.2f} MB), store rows {args.image_size}x{args.image_size}, warm page cache ==")
    print(f"  store build: {format_ms(build_seconds / n)} per image (1 worker), pixels identical to the "
          "JPEG path: yes")
    jpeg, row = statistics.median(times["jpeg"]), statistics.median(times["store"])
    row_batched = statistics.median(batched)
    print(f"  {'path (per image, to float32 model input)':<48}{'median':>12}{'mean':>12}{'samples':>9}")
    for label, values in (("JPEG decode + resize + centre crop", times["jpeg"]),
                          ("store row, read one at a time", times["store"]),
                          (f"store rows, read {args.batch} at a time", batched)):
        print(f"  {label:<48}{format_ms(statistics.median(values)):>12}"
              f"{format_ms(statistics.mean(values)):>12}{len(values):>9}")
    print(f"  speed-up of the store over the JPEG path: {jpeg / row:.1f}x one row at a time, "
          f"{jpeg / row_batched:.1f}x in batches of {args.batch} (issue target: >= 10x)")
    print(f"\nafter the run: {describe_load()}")


def describe_load() -> str:
    return f"load average (1 min) {os.getloadavg()[0]:.2f}"


if __name__ == "__main__":
    main()
