"""Memory and time of one training micro-batch per framework at the paper's shapes, for ``hnclip plan``.

Each framework the paper's methods use (Long-CLIP fine-tuning with InfoNCE, HN-CLIP = + HN margin +
token term, LoRA, DoRA, FineLIP, GOAL, StructXLIP) runs one micro-batch of a random-init Long-CLIP-L
(``ViT-L-14-longclip``: ViT-L/14 at 224 px, 248 text positions) through the framework interface as
:func:`hnclip.train.train_model` drives it (batch extras, encode, loss terms, backward, clip, AdamW),
float32, each measurement in a fresh process so that its peak resident memory is that job's alone:

- ``forward_backward_s``: encode + loss + backward of the micro-batch (median of ``--repeats`` after a
  warm-up step); ``optimizer_s``: clip + AdamW step; ``plain_step_s``: their sum; ``probe_step_s``: a
  step with the gradient-dynamics probe as the loop runs it every ``dynamics_every`` steps of the runs
  that probe (one more backward pass; ``probe`` names how it was measured), which ``hnclip plan`` sets
  against ``plain_step_s`` to price the diagnostics; ``peak_rss_mb``: the process's peak resident set
  after that step, the job's peak (model, gradients, AdamW moments, activations, the framework's
  modules), and ``peak_rss_mb_plain_step`` before it; on CUDA also ``peak_device_mb``
  (``torch.cuda.max_memory_allocated``).
- micro-batch 16 (the paper's) is measured where it fits (``--micro-batches 16``, a GPU); on a CPU with
  less memory, smaller micro-batches are measured and the paper's value is the least-squares line
  through them, ``a + b * 16`` (activations and per-sample time grow linearly with the micro-batch;
  the model, gradients and optimizer state do not), marked ``"fit"``.
- evaluation: encoding one batch of images and captions without gradients (``evaluate.batch_size`` of
  the paper config, 256, fitted the same way).

The result goes to ``src/hnclip/job_cost.json`` (committed package data) with the machine, the date and the load
average before and after: on a shared machine other processes inflate the times, so the times are for
ratios between frameworks and for orders of magnitude, and the lead may re-measure on a quiet machine.
``hnclip plan`` reads the file and prints what each job needs.

    python benchmarks/job_cost.py                                  # CPU: micro-batches 2 and 3, about an hour
    python benchmarks/job_cost.py --device cuda --micro-batches 16 # a GPU: the paper's micro-batch itself
    python benchmarks/job_cost.py --quick                          # the micro model, seconds (checks the script)
    python benchmarks/job_cost.py --frameworks goal --micro-batches 2,4 --merge  # remeasure one framework

``--probe-only`` writes the measured frameworks into the file's ``probe`` section alone, from which
``hnclip plan`` prices the diagnostics (a probed step against a plain one, both from the same process,
so the ratio holds on a loaded machine whose absolute times the other sections should not take):

    python benchmarks/job_cost.py --threads 2 --frameworks longclip,hnclip --probe-only

``--merge`` replaces only the frameworks measured in the existing file (the evaluation and the rest stay);
each framework's entry carries its own date, micro-batches and load average, for a framework whose line
through the default sizes is noise (a slope that falls) or that does not fit the default sizes' memory.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from step_setup import VARIANTS  # benchmarks/: torch-free until a child process measures

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "src" / "hnclip" / "job_cost.json"  # package data: what `hnclip plan` reads
PAPER_MICRO_BATCH = 16
PAPER_EVAL_BATCH = 256
# how probe_step_s was measured (a measurement without this key: the probe before it, which took both
# gradients with autograd.grad, two passes where the objectives differ, and copied both into fp32 buffers)
PROBE_PROTOCOL = "loop: step .grad as the boosted gradient, one standard pass, embedding rows"


# ------------------------------------------------------------------------------------------ data (parent)
def make_data(root: Path, model_name: str, n_images: int, threads: int, products: bool = True) -> None:
    """Scenes with long captions, the backbone, its image store and (``products``) the GOAL/StructXLIP
    products in ``root``."""
    import pandas as pd
    import torch

    from hnclip.data.image_store import build_store
    from hnclip.models import create_model, save_model
    from hnclip.preprocess.edges import build_edges
    from hnclip.preprocess.segments import build_segments
    from hnclip.rehearsal.benchmarks import SCENE_SIZES, scene

    torch.set_num_threads(threads)
    rows, boxes = [], {}
    (root / "images").mkdir(parents=True, exist_ok=True)
    for i in range(n_images):
        image, caption, image_boxes = scene(i, SCENE_SIZES[i % len(SCENE_SIZES)], (6, 16, 24)[i % 3])
        path = root / "images" / f"{i}.jpg"
        image.save(path, format="JPEG", quality=90)
        rows.append((str(i), str(path), caption))
        boxes[str(i)] = (image.size, image_boxes)
    manifest = pd.DataFrame(rows, columns=["image_id", "image_path", "caption"])
    manifest.to_csv(root / "manifest.csv", index=False)
    model = create_model(model_name, seed=0)
    save_model(model, root / "model")
    build_store(manifest, root / "store", image_size=int(model.image_size[0]))

    def box_masks(image, image_id):  # the scenes' own shapes stand in for SAM's masks
        (w, h), shape_boxes = boxes[image_id]
        masks = []
        for x1, y1, x2, y2 in shape_boxes:
            mask = np.zeros((image.height, image.width), dtype=bool)
            mask[y1 * image.height // h:y2 * image.height // h, x1 * image.width // w:x2 * image.width // w] = True
            masks.append(mask)
        return masks

    if products:
        build_segments(manifest, root / "model", root / "segments", device="cpu", mask_generator=box_masks)
        build_edges(root / "store", root / "segments", root / "edges")


# --------------------------------------------------------------------------------------- one measurement
def measure_train(root: Path, label: str, micro_batch: int, repeats: int, device_name: str) -> dict:
    """One framework at one micro-batch, in this (fresh) process."""
    import pandas as pd
    import torch

    from hnclip.config.train import TrainConfig
    from hnclip.data.image_store import ImageStore, to_model_input
    from hnclip.frameworks import Batch
    from hnclip.models import load_model
    from hnclip.training.dynamics import GradientProbe, sparse_embeddings
    from hnclip.training.inputs import load_training_set
    from hnclip.training.objective import compute_objective

    from step_setup import training_parts

    device = torch.device(device_name)
    cfg = TrainConfig(**{"device": device.type, "micro_batch": max(2, micro_batch), "accum_steps": 1,
                         **VARIANTS[label]})
    model = load_model(root / "model").to(device)
    store = ImageStore(root / "store")
    data = load_training_set(pd.read_csv(root / "manifest.csv", dtype={"image_id": str}), store,
                             cfg.caption_column, "job_cost manifest")
    products = {"segments": root / "segments", "edges": root / "edges"}
    model, framework, optimizer, params = training_parts(cfg, model, data, products, device)

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    def step(k: int, probe: bool = False) -> tuple[float, float]:
        positions = torch.arange(k * micro_batch, (k + 1) * micro_batch) % len(data)
        pixels = to_model_input(store.read(data.store_rows[positions.numpy()]), model.image_mean,
                                model.image_std, device)
        # the second epoch (0-based 1): every term on, FineLIP's first-epoch ramp done
        batch = Batch(pixels, data.tokens[positions].to(device), positions, epoch=1, epoch_progress=0.5,
                      extras=framework.batch_extras(positions, device))
        sync()
        start = time.perf_counter()
        # a gradient-dynamics step as the loop runs it every dynamics_every steps (hnclip.train): the probe
        # records the embedding lookups from the forward on, takes the standard gradient before the
        # backward and reads the step's .grad before clipping
        gradient_probe = GradientProbe(params, sparse_embeddings((model, framework), params),
                                       step_gradient=True) if probe else None
        with torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
            out = framework.encode(model, batch)
        if probe:
            loss, standard = compute_objective(out, cfg, standard_with_grad=True, framework=framework, batch=batch)
            features = (out["image_features"].detach(), out["text_features"].detach(), out["logit_scale"].detach())
            gradient_probe.add(standard, loss, 1.0, features)
        else:
            loss = sum(framework.loss_terms(out, batch).values())
        loss.backward()
        if probe:
            gradient_probe.summary()
        sync()
        middle = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync()
        return middle - start, time.perf_counter() - middle

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    step(0)  # warm-up: allocates the AdamW moments and every activation buffer once
    timings = [step(k + 1) for k in range(repeats)]
    result = {"micro_batch": micro_batch, "forward_backward_s": statistics.median(t[0] for t in timings),
              "optimizer_s": statistics.median(t[1] for t in timings), "repeats": repeats,
              "peak_rss_mb_plain_step": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if device.type == "cuda":
        result["peak_device_mb_plain_step"] = torch.cuda.max_memory_allocated(device) / 2**20
    # the job's peak: a step with the gradient-dynamics probe (one more backward; one fp32 copy of the
    # standard gradient only where a step accumulates several micro-batches and the objectives differ,
    # so none here); probe_step_s against plain_step_s is what hnclip plan prices the diagnostics with
    result["plain_step_s"] = result["forward_backward_s"] + result["optimizer_s"]
    result["probe_step_s"] = sum(step(repeats + 1, probe=True))
    result["probe"] = PROBE_PROTOCOL
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["load_1min"] = os.getloadavg()[0]
    if device.type == "cuda":
        result["peak_device_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return result


def measure_evaluate(root: Path, batch: int, repeats: int, device_name: str) -> dict:
    """Encoding one evaluation batch (images and captions, no gradients), as ``hnclip evaluate`` does."""
    import pandas as pd
    import torch

    from hnclip.data.image_store import ImageStore, to_model_input
    from hnclip.models import load_model

    device = torch.device(device_name)
    model = load_model(root / "model").to(device).eval()
    store = ImageStore(root / "store")
    manifest = pd.read_csv(root / "manifest.csv", dtype={"image_id": str})
    rows = np.arange(batch) % len(manifest)
    captions = [manifest["caption"].iloc[i] for i in rows]
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=device.type == "cuda"):
            model.encode_image(to_model_input(store.read(rows), model.image_mean, model.image_std, device))
            model.encode_text(model.tokenize(captions).to(device))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    result = {"batch": batch, "encode_s": statistics.median(times[1:]), "repeats": repeats,
              "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "load_1min": os.getloadavg()[0]}
    if device.type == "cuda":
        result["peak_device_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    return result


# ------------------------------------------------------------------------------------------- the parent
def _child(args, *extra: str) -> dict:
    cmd = [sys.executable, __file__, "--child", "--data", str(args.data), "--device", args.device,
           "--threads", str(args.threads), "--repeats", str(args.repeats), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    if proc.returncode != 0:
        raise RuntimeError(f"measurement {extra} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def at_size(measured: list[dict], size_key: str, size: int, keys: tuple[str, ...]) -> dict:
    """The values at ``size``: measured, or the line through the measured sizes (hnclip plan's own rule)."""
    from hnclip.job_needs import cost_at

    return cost_at(measured, size_key, size, keys)


def machine(device: str, threads: int) -> dict:
    import torch

    info = {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "torch": torch.__version__, "device": device, "threads": threads,
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)}
    if device == "cuda":
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-L-14-longclip")
    parser.add_argument("--micro-batches", default="2,3", help="micro-batches measured (comma-separated)")
    parser.add_argument("--eval-batches", default="8,16", help="evaluation batches measured")
    parser.add_argument("--frameworks", default=",".join(VARIANTS))
    parser.add_argument("--repeats", type=int, default=2, help="timed steps after the warm-up step")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1 on a shared machine)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--quick", "--smoke", dest="smoke", action="store_true",
                        help="micro model, micro-batch 2, one framework, one evaluation batch; prints, writes nothing")
    parser.add_argument("--merge", action="store_true",
                        help="replace only these frameworks' entries in the existing --out file")
    parser.add_argument("--probe-only", action="store_true",
                        help="write these frameworks' plain and probed steps into the file's 'probe' section only "
                             "(what hnclip plan prices the diagnostics with), leaving every other measurement")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--train", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--micro-batch", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--eval-batch", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        import torch

        torch.set_num_threads(args.threads)
        if args.train:
            result = measure_train(args.data, args.train, args.micro_batch, args.repeats, args.device)
        else:
            result = measure_evaluate(args.data, args.eval_batch, args.repeats, args.device)
        print(json.dumps(result))
        return

    if args.smoke:
        args.model, args.micro_batches, args.eval_batches = "micro", "2", "4"
        args.frameworks, args.repeats = "longclip", 1
    micro_batches = [int(b) for b in args.micro_batches.split(",")]
    eval_batches = [int(b) for b in args.eval_batches.split(",")]
    labels = [f for f in args.frameworks.split(",") if f]
    unknown = sorted(set(labels) - set(VARIANTS))
    if unknown:
        raise SystemExit(f"unknown framework(s) {unknown}; known: {', '.join(VARIANTS)}")
    load_before = os.getloadavg()
    started = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory(prefix="job_cost-") as tmp:
        args.data = Path(tmp)
        print(f"preparing data and the {args.model} backbone in {tmp} ...", file=sys.stderr)
        make_data(args.data, args.model, n_images=max(micro_batches + [4]) * 2, threads=args.threads,
                  products=bool({"goal", "structxlip"} & set(labels)))
        frameworks = {}
        for label in labels:
            measured = []
            for b in micro_batches:
                measured.append(_child(args, "--train", label, "--micro-batch", str(b)))
                print(f"{label:<11} micro-batch {b:>3}: {measured[-1]}", file=sys.stderr)
            paper = at_size(measured, "micro_batch", PAPER_MICRO_BATCH,
                            ("forward_backward_s", "optimizer_s", "plain_step_s", "probe_step_s", "peak_rss_mb",
                             "peak_rss_mb_plain_step", "peak_device_mb"))
            frameworks[label] = {"overrides": VARIANTS[label], "measured": measured, "probe": PROBE_PROTOCOL,
                                 "at_paper_micro_batch": paper,
                                 "forward_backward_s_per_sample": paper["forward_backward_s"] / PAPER_MICRO_BATCH,
                                 "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
                                 "load_average_after": [round(x, 2) for x in os.getloadavg()]}
        if args.probe_only and not args.smoke:
            merged = json.loads(args.out.read_text())
            section = merged.setdefault("probe", {
                "what": "plain and probed training steps per framework (benchmarks/job_cost.py --probe-only), "
                        "from which hnclip plan prices the gradient-dynamics probe; each entry with its "
                        "machine, date and load average", "frameworks": {}})
            for label in labels:
                section["frameworks"][label] = {
                    **frameworks[label], "machine": machine(args.device, args.threads), "model": args.model,
                    "load_average_before": [round(x, 2) for x in load_before]}
            args.out.write_text(json.dumps(merged, indent=1) + "\n")
            print(f"wrote the probed steps of {', '.join(labels)} into {args.out} (section 'probe')", file=sys.stderr)
            return
        if args.merge and not args.smoke:  # a smoke run never touches the measurements
            merged = json.loads(args.out.read_text())
            merged["frameworks"].update(frameworks)
            merged.setdefault("merged", []).append(
                {"frameworks": labels, "micro_batches": micro_batches, "date": started.isoformat(timespec="seconds"),
                 "load_average_before": [round(x, 2) for x in load_before], "machine": machine(args.device, args.threads)})
            args.out.write_text(json.dumps(merged, indent=1) + "\n")
            print(f"merged {', '.join(labels)} into {args.out}", file=sys.stderr)
            _print_table(merged["frameworks"])
            return
        evaluated = []
        for b in eval_batches:
            evaluated.append(_child(args, "--eval-batch", str(b)))
            print(f"evaluate    batch {b:>3}: {evaluated[-1]}", file=sys.stderr)
        evaluate = {"measured": evaluated,
                    "at_paper_batch": at_size(evaluated, "batch", PAPER_EVAL_BATCH,
                                              ("encode_s", "peak_rss_mb", "peak_device_mb"))}
    result = {
        "what": "one training micro-batch per framework and one evaluation batch at the paper's shapes "
                "(benchmarks/job_cost.py); read by `hnclip plan`",
        "date": started.isoformat(timespec="seconds"),
        "wall_s": round((dt.datetime.now(dt.UTC) - started).total_seconds(), 1),
        "machine": machine(args.device, args.threads),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "note": "times on a shared machine are inflated by other processes (load averages beside them); "
                "use them for ratios between frameworks and orders of magnitude",
        "model": args.model,
        "precision": "bf16 autocast" if args.device == "cuda" else "fp32",
        "paper_micro_batch": PAPER_MICRO_BATCH,
        "paper_eval_batch": PAPER_EVAL_BATCH,
        "frameworks": frameworks,
        "evaluate": evaluate,
    }
    if args.smoke:
        print(json.dumps(result, indent=1))
        return
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    _print_table(frameworks)


def _print_table(frameworks: dict) -> None:
    base = frameworks.get("longclip", next(iter(frameworks.values())))["forward_backward_s_per_sample"]
    print(f"{'framework':<11}{'peak MB @16':>13}{'fwd+bwd s @16':>15}{'vs longclip':>12}  how")
    for label, f in frameworks.items():
        p = f["at_paper_micro_batch"]
        print(f"{label:<11}{p['peak_rss_mb']:>13,.0f}{p['forward_backward_s']:>15.1f}"
              f"{f['forward_backward_s_per_sample'] / base:>11.2f}x  {p['how']}")


if __name__ == "__main__":
    main()
