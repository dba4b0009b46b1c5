"""What a training step of each fine-tuning framework costs relative to HN-CLIP's, measured in one run.

Every framework trains the same backbone (the tiny open_clip model stretched to 248 text positions,
Long-CLIP style) on the same synthetic dense-caption micro-batches through the framework interface,
exactly as :func:`hnclip.train.train_model` drives it: per-batch extras, encode, loss terms, backward,
clip, AdamW. HN-CLIP is Long-CLIP fine-tuning with the HN margin and the token term at config/paper.yaml's
gamma and token weight (0.5 and 0.5). Steps run in rotation and each variant's median is taken, so load from other processes
falls on every variant alike. GOAL and StructXLIP read their cached products, built here first; the
time per image of building them is reported too (SAM is a randomly initialised tiny SAM: the real
ViT-H SAM costs orders of magnitude more, so only the call path is timed, not a real cost).

    python benchmarks/framework_cost.py            # tiny backbone, micro-batch 16
    python benchmarks/framework_cost.py --quick    # micro backbone, micro-batch 8, seconds
"""

from __future__ import annotations

import argparse
import copy
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from hnclip.config.train import TrainConfig
from hnclip.data.image_store import ImageStore, build_store, to_model_input
from hnclip.data.synthetic import generate_synthetic, load_synthetic
from hnclip.frameworks import Batch
from hnclip.models import create_model, save_model, stretch_model
from hnclip.preprocess.edges import build_edges
from hnclip.preprocess.oracle import synthetic_mask_generator
from hnclip.preprocess.segments import build_segments, load_mask_generator, save_random_sam
from hnclip.training.inputs import load_training_set

from step_setup import VARIANTS, training_parts

# the paper's wall-clock ratios (framework step time / HN-CLIP step time); others are not reported there
PAPER_RATIOS = {"hnclip": 1.0, "goal": 2.4, "structxlip": 5.4}


def encoded_per_sample(label: str, top_k: int = 3) -> str:
    """Images + texts each sample sends through the encoders (what dominates at paper scale)."""
    if label == "goal":
        return "2 + 2"  # image, crop + caption, sentence
    if label == "structxlip":
        return f"{2 + top_k} + 2"  # image, edge map, k edge crops + caption, filtered caption
    return "1 + 1"


def make_data(root: Path, model_name: str, n_images: int, seed: int):
    """(manifest, store_dir, model_dir) of a synthetic benchmark and a stretched backbone."""
    generate_synthetic(root / "bench", "synthetic", n_train=n_images, n_test=1, image_size=128, seed=seed)
    manifest = load_synthetic(root / "bench", "train")
    model = stretch_model(create_model(model_name, seed=seed))
    save_model(model, root / "model")
    build_store(manifest, root / "store", image_size=int(model.image_size[0]))
    return manifest, root / "store", root / "model"


def time_preprocessing(root: Path, manifest, model_dir: Path, n_sam: int) -> dict[str, float]:
    """Seconds per image: the SAM call (tiny random SAM), the segment product (oracle masks), the edges."""
    from PIL import Image

    times = {}
    generate = load_mask_generator(save_random_sam(root / "sam", image_size=64), "cpu", points_per_batch=64,
                                   points_per_crop=8, pred_iou_thresh=0.0, stability_score_thresh=0.0)
    images = [Image.open(p).convert("RGB") for p in manifest["image_path"][:n_sam]]
    generate(images[0])  # warm-up: first call builds the point grid and allocates
    start = time.perf_counter()
    for image in images:
        generate(image)
    times["SAM call (tiny random SAM, 128 px)"] = (time.perf_counter() - start) / len(images)
    start = time.perf_counter()
    build_segments(manifest, model_dir, root / "segments", device="cpu",
                   mask_generator=synthetic_mask_generator(root / "bench"))
    times["segments: crops + embedding + matching"] = (time.perf_counter() - start) / len(manifest)
    start = time.perf_counter()
    build_edges(root / "store", root / "segments", root / "edges")
    times["edges: Canny of the image and its crops"] = (time.perf_counter() - start) / len(manifest)
    return times


def make_step(label: str, overrides: dict, init_model, manifest, store: ImageStore, products: dict,
              batch_size: int, device: torch.device):
    """A closure running one optimizer step of ``label`` on the next micro-batch (same order for all)."""
    cfg = TrainConfig(**{"device": device.type, "micro_batch": batch_size, "accum_steps": 1, **overrides})
    model = copy.deepcopy(init_model).to(device)
    data = load_training_set(manifest, store, cfg.caption_column, "benchmark manifest")
    model, framework, optimizer, params = training_parts(cfg, model, data, products, device)
    order = np.random.default_rng(0).permutation(len(data))
    counter = {"i": 0}

    def step() -> None:
        start = counter["i"] * batch_size % (len(order) - batch_size + 1)
        counter["i"] += 1
        positions = torch.from_numpy(order[start:start + batch_size].copy())
        pixels = to_model_input(store.read(data.store_rows[positions.numpy()]), model.image_mean,
                                model.image_std, device)
        batch = Batch(pixels, data.tokens[positions].to(device), positions, epoch=1, epoch_progress=0.5,
                      extras=framework.batch_extras(positions, device))
        out = framework.encode(model, batch)
        loss = sum(framework.loss_terms(out, batch).values())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return step


def interleaved_medians(steps: dict, repeats: int, warmup: int) -> dict[str, float]:
    for _ in range(warmup):
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {label: [] for label in steps}
    for _ in tqdm(range(repeats), desc="steps", leave=False):
        for label, step in steps.items():
            start = time.perf_counter()
            step()
            times[label].append(time.perf_counter() - start)
    return {label: statistics.median(values) for label, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="registry backbone (default tiny)")
    parser.add_argument("--batch", type=int, default=16, help="micro-batch (default 16, the paper's)")
    parser.add_argument("--images", type=int, default=64, help="synthetic training images")
    parser.add_argument("--repeats", type=int, default=12)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="micro backbone, batch 8, 24 images, 5 repeats")
    args = parser.parse_args()
    if args.quick:
        args.model, args.batch, args.images, args.repeats, args.warmup = "micro", 8, 24, 5, 1
    device = torch.device(args.device)
    torch.manual_seed(0)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        manifest, store_dir, model_dir = make_data(root, args.model, args.images, seed=0)
        pre = time_preprocessing(root, manifest, model_dir, n_sam=min(8, args.images))
        from hnclip.models import load_model

        init_model = load_model(model_dir)
        store = ImageStore(store_dir)
        products = {"segments": root / "segments" / "index.json", "edges": root / "edges" / "index.json"}
        steps = {label: make_step(label, overrides, init_model, manifest, store, products, args.batch, device)
                 for label, overrides in VARIANTS.items()}
        medians = interleaved_medians(steps, args.repeats, args.warmup)

    spec = init_model.spec["config"]
    print(f"== training step: {args.model} backbone ({spec['vision_cfg']['image_size']} px ViT, "
          f"{spec['vision_cfg']['layers']} + {spec['text_cfg']['layers']} layers, {init_model.context_length} text "
          f"positions), micro-batch {args.batch}, {device.type}, float32, median of {args.repeats} ==")
    print(f"  torch {torch.__version__}, {platform.processor() or platform.machine()}, "
          f"{torch.get_num_threads()} threads")
    baseline = medians["hnclip"]
    print(f"  {'framework':<12}{'median step':>13}{'vs HN-CLIP':>12}{'paper':>8}   images + texts encoded per sample")
    for label, seconds in medians.items():
        paper = f"{PAPER_RATIOS[label]:.1f}x" if label in PAPER_RATIOS else "-"
        print(f"  {label:<12}{seconds * 1e3:>10.1f} ms{seconds / baseline:>11.2f}x{paper:>8}   "
              f"{encoded_per_sample(label)}")
    print("== preprocessing, seconds per training image (once per benchmark split) ==")
    for name, seconds in pre.items():
        print(f"  {name:<42}{seconds * 1e3:>9.1f} ms")
    token_share = medians["hnclip"] / medians["longclip"]
    print(
        "Why the toy ratios differ from the paper's: there, Long-CLIP-L's ViT-L/14 encoders at 224 px on a "
        "GPU dominate a step, so cost follows the images and texts encoded per sample (GOAL 2 + 2, "
        "StructXLIP 5 + 2, HN-CLIP 1 + 1). Here the encoders are tiny, so costs every framework pays "
        "alike (AdamW over the 49k-row token table, Python, data indexing) are a large share of each step "
        f"and pull the ratios towards 1, while HN-CLIP's own FILIP token term over 248 positions weighs more "
        f"(HN-CLIP costs {token_share:.2f}x plain Long-CLIP fine-tuning here); the paper's timings may also "
        "include reading pre-cut crop and edge files from disk, which the cached products avoid.")

if __name__ == "__main__":
    main()
