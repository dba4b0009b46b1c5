"""How building the image store scales with the number of images: time per image and peak memory, per N.

Writes max(N) synthetic JPEGs once, then builds a store of the first N of them for each N in
``--sizes``, ``--repeats`` times, each build in a fresh Python process so that its peak memory is its
own; the time reported is the median over repeats, the memory growth the largest. A linear build
has a roughly constant time per image (wall clock, and CPU time, which other processes' load barely
moves); a streaming one has a peak memory growth that does not rise with N. Reported per build:

- ``ru_maxrss`` growth: the process's peak resident set (``resource.getrusage``) after the build minus
  before it (after imports and one warm-up decode). It counts file-backed pages too, and the store is
  written through a memory map, so the pages of ``images.npy`` the build touched are in it while they
  stay mapped; the kernel can drop them at any time (they are page cache, written back every 1,024
  rows), but while memory is plentiful it does not, so this number grows with the store's size;
- peak anonymous RSS growth (``RssAnon`` of ``/proc/self/status``, sampled every 2 ms): the heap,
  the memory the build cannot give back. This is the one that must stay flat in N.
- peak file-backed RSS growth (``RssFile``, same sampling), shown beside the store's size on disk.

    python benchmarks/prepare_scaling.py            # N = 200, 400, 800 of 1400x1000, 3 builds each
    python benchmarks/prepare_scaling.py --sizes 500 1000 2000 --width 2048 --height 1536
    python benchmarks/prepare_scaling.py --quick    # N = 20, 40, 80 of 640x480, one build each, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from PIL import Image
from synthetic_jpegs import write_synthetic_jpegs  # benchmarks/ is on sys.path when run as a script
from tqdm import tqdm


class RssSampler(threading.Thread):
    """Peak RssAnon / RssFile (bytes) seen while running; reading /proc costs ~20 us per sample."""

    def __init__(self, interval: float = 0.002):
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = read_rss()
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            now = read_rss()
            self.peak = {key: max(self.peak[key], now[key]) for key in now}
            time.sleep(self.interval)

    def stop(self) -> dict[str, int]:
        self._halt.set()
        self.join()
        return self.peak


def read_rss() -> dict[str, int]:
    fields = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("RssAnon", "RssFile"):
                fields[key] = int(value.split()[0]) * 1024  # reported in kB
    return fields


def build_once(image_dir: Path, n: int, out_dir: Path, image_size: int, workers: int) -> dict:
    """Child process body: one store of the first ``n`` images, with its time and memory growth."""
    import pandas as pd

    from hnclip.data.image_store import build_store, resize_center_crop

    paths = sorted(image_dir.glob("*.jpg"))[:n]
    if len(paths) != n:
        raise SystemExit(f"{image_dir} holds {len(paths)} JPEGs, fewer than N = {n}")
    manifest = pd.DataFrame({"image_id": [p.stem for p in paths], "image_path": [str(p) for p in paths]})
    with Image.open(paths[0]) as image:  # loads the decoder and resampler before the baseline
        resize_center_crop(image.convert("RGB"), image_size)
    maxrss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux
    before = read_rss()
    sampler = RssSampler()
    sampler.start()
    start, cpu_start = time.perf_counter(), cpu_seconds()
    build_store(manifest, out_dir, image_size, workers=workers)
    seconds, cpu = time.perf_counter() - start, cpu_seconds() - cpu_start
    peak = sampler.stop()
    maxrss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {
        "n": n,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "maxrss_growth": maxrss_after - maxrss_before,
        "anon_growth": peak["RssAnon"] - before["RssAnon"],
        "file_growth": peak["RssFile"] - before["RssFile"],
        "store_bytes": (out_dir / "images.npy").stat().st_size,
    }


def cpu_seconds() -> float:
    """User + system CPU time of this process and its finished children (the spawned decode workers).

    Unlike wall time it barely moves when other processes load the machine, so it shows whether the
    work per image grows with N even where the wall clock is noisy.
    """
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def run_child(image_dir: Path, n: int, out_dir: Path, image_size: int, workers: int) -> dict:
    command = [sys.executable, __file__, "--child", str(image_dir), str(n), str(out_dir),
               "--image-size", str(image_size), "--workers", str(workers)]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
    if done.returncode != 0:
        raise RuntimeError(f"build of N = {n} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summarise(runs: list[dict]) -> dict:
    """Median build time (robust to load bursts); the largest memory growths (the honest bound)."""
    summary = {key: max(r[key] for r in runs) for key in ("maxrss_growth", "anon_growth", "file_growth")}
    summary.update(n=runs[0]["n"], seconds=statistics.median(r["seconds"] for r in runs),
                   cpu_seconds=statistics.median(r["cpu_seconds"] for r in runs),
                   store_bytes=runs[0]["store_bytes"], repeats=len(runs))
    return summary


def print_table(results: list[dict]) -> None:
    mb = 1 / 2**20
    print(f"  builds per N: {results[0]['repeats']}; time: median, memory growth: largest")
    print(f"  {'N':>6}{'build s':>10}{'ms / image':>12}{'CPU ms / img':>14}{'maxrss +MB':>12}{'anon +MB':>10}"
          f"{'file +MB':>10}{'store MB':>10}")
    for r in results:
        print(f"  {r['n']:>6}{r['seconds']:>10.2f}{r['seconds'] / r['n'] * 1e3:>12.2f}"
              f"{r['cpu_seconds'] / r['n'] * 1e3:>14.2f}"
              f"{r['maxrss_growth'] * mb:>12.1f}{r['anon_growth'] * mb:>10.1f}"
              f"{r['file_growth'] * mb:>10.1f}{r['store_bytes'] * mb:>10.1f}")
    first, last = results[0], results[-1]
    wall = [r["seconds"] / r["n"] for r in results]
    cpu = [r["cpu_seconds"] / r["n"] for r in results]
    print(f"  time per image, largest N / smallest N: wall {wall[-1] / wall[0]:.2f}, "
          f"CPU {cpu[-1] / cpu[0]:.2f} (N grew {last['n'] / first['n']:.0f}x; 1.00 = linear)")
    print(f"  peak anonymous memory growth, largest N - smallest N: "
          f"{(last['anon_growth'] - first['anon_growth']) * mb:+.1f} MB "
          f"(store grew by {(last['store_bytes'] - first['store_bytes']) * mb:.1f} MB)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 20, 40, 80 of 640x480: a smoke run")
    parser.add_argument("--sizes", type=int, nargs="+", default=None,
                        help="store sizes N (default 200 400 800)")
    parser.add_argument("--width", type=int, default=None, help="landscape width (default 1400; 640 quick)")
    parser.add_argument("--height", type=int, default=None, help="landscape height (default 1000; 480 quick)")
    parser.add_argument("--image-size", type=int, default=224, help="store side (224: ViT-L/14 input)")
    parser.add_argument("--workers", type=int, default=1, help="decode processes of build_store")
    parser.add_argument("--repeats", type=int, default=None, help="builds per N (default 3; 1 with --quick)")
    parser.add_argument("--child", nargs=3, metavar=("IMAGE_DIR", "N", "OUT_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        image_dir, n, out_dir = args.child
        print(json.dumps(build_once(Path(image_dir), int(n), Path(out_dir), args.image_size, args.workers)))
        return
    sizes = sorted(args.sizes or ([20, 40, 80] if args.quick else [200, 400, 800]))
    width = args.width or (640 if args.quick else 1400)
    height = args.height or (480 if args.quick else 1000)
    args.repeats = args.repeats or (1 if args.quick else 3)

    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"Pillow {Image.__version__}, {describe_load()}")
    with tempfile.TemporaryDirectory(prefix="hnclip-prepare-scaling-") as tmp:
        image_dir = Path(tmp) / "images"
        image_dir.mkdir()
        write_synthetic_jpegs(image_dir, max(sizes), width, height)
        runs: dict[int, list[dict]] = {n: [] for n in sizes}
        # rounds over all N rather than N after N: a burst of load from other processes then lands on
        # one build of each size instead of on every build of one size
        for r in tqdm(range(args.repeats), desc="rounds", unit="round"):
            for n in sizes:
                runs[n].append(run_child(image_dir, n, Path(tmp) / f"store_{n}_{r}", args.image_size,
                                         args.workers))
        results = [summarise(runs[n]) for n in sizes]
    print(f"== image store builds of N JPEGs of {width}x{height} (every third portrait) into "
          f"{args.image_size}x{args.image_size} rows, {args.workers} worker(s), one fresh process per N ==")
    print_table(results)
    print(f"\nafter the run: {describe_load()}")


def describe_load() -> str:
    return f"load average (1 min) {os.getloadavg()[0]:.2f}"


if __name__ == "__main__":
    main()
