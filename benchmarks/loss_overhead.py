"""What the HN margin and the FILIP token branch cost relative to plain InfoNCE, measured in one run.

Section 1 times the loss alone (forward + backward w.r.t. the features) at the paper's ViT-L sizes:
B = 128, D = 768, 248 text positions with random padding, 256 patches. Section 2 times a whole
training step (forward, loss, backward, AdamW) of the tiny dual encoder at micro-batch 16, where the
encoders dominate. The headline is the median of repeated timings after warm-up (the minimum is
printed beside it); ratios divide times taken in this same process, with the variants run in rotation,
so they stay comparable on a busy machine, absolute times much less. On a shared small CPU pass
``--threads 1``: with more intra-op threads than free cores, millisecond steps stall at thread barriers
(on the 2-core machine a 0.1 ms loss took 140 ms).

    python benchmarks/loss_overhead.py --threads 1   # paper sizes; the token branch takes minutes on CPU
    python benchmarks/loss_overhead.py --quick       # smoke run with small sizes, seconds
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from open_clip.loss import ClipLoss
from tqdm import tqdm

from hnclip.losses import HNClipLoss

from step_setup import objective_variants

PAPER_SIZES = {"batch": 128, "dim": 768, "text_tokens": 248, "patches": 256}
QUICK_SIZES = {"batch": 16, "dim": 64, "text_tokens": 32, "patches": 16}
# (label, gamma, token_weight) at config/paper.yaml's gamma and token weight; the first is the baseline
# every ratio divides by
VARIANTS = tuple((label, v["gamma"], v["token_weight"]) for label, v in objective_variants().items())


def interleaved_times(steps: dict[str, Callable[[], None]], repeats: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per call of each step, the steps run in rotation so that load from other processes
    during the run falls on every variant alike instead of on whichever happened to run then."""
    for _ in range(warmup):  # first calls pay for allocator growth and kernel selection
        for step in steps.values():
            step()
    times: dict[str, list[float]] = {label: [] for label in steps}
    for _ in tqdm(range(repeats), desc=", ".join(steps), leave=False):
        for label, step in steps.items():
            start = time.perf_counter()
            step()
            times[label].append(time.perf_counter() - start)
    return times


def print_table(times: dict[str, list[float]], baseline: str) -> None:
    """Median (the headline) and minimum (least disturbed by other processes) with their ratios."""
    medians = {label: statistics.median(values) for label, values in times.items()}
    minima = {label: min(values) for label, values in times.items()}
    print(f"  {'variant':<20}{'median':>12}{'ratio':>11}{'min':>12}{'ratio':>11}{'repeats':>9}")
    for label, values in times.items():
        print(f"  {label:<20}{format_seconds(medians[label]):>12}{medians[label] / medians[baseline]:>10.2f}x"
              f"{format_seconds(minima[label]):>12}{minima[label] / minima[baseline]:>10.2f}x{len(values):>9}")
    print(f"  (ratios: time / time of {baseline})")


def format_seconds(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms" if seconds < 1 else f"{seconds:.2f} s"


def random_features(*shape: int, generator: torch.Generator) -> torch.Tensor:
    return F.normalize(torch.randn(*shape, generator=generator), dim=-1).requires_grad_()


def benchmark_loss(sizes: dict, repeats: int, token_repeats: int, warmup: int) -> None:
    batch, dim, length, patches = sizes["batch"], sizes["dim"], sizes["text_tokens"], sizes["patches"]
    print(f"== loss alone, forward + backward: B={batch}, D={dim}, {length} text tokens "
          f"(random padding), {patches} patches, float32 on CPU ==")
    generator = torch.Generator().manual_seed(0)
    image_features = random_features(batch, dim, generator=generator)
    text_features = random_features(batch, dim, generator=generator)
    image_tokens = random_features(batch, patches, dim, generator=generator)
    text_tokens = random_features(batch, length, dim, generator=generator)
    lengths = torch.randint(length // 4, length + 1, (batch, 1), generator=generator)
    text_mask = torch.arange(length)[None, :] < lengths
    logit_scale = torch.tensor(100.0, requires_grad=True)
    leaves = (image_features, text_features, image_tokens, text_tokens, logit_scale)

    def step_for(loss_fn: Callable[[], torch.Tensor]) -> Callable[[], None]:
        def step() -> None:
            for leaf in leaves:
                leaf.grad = None
            loss_fn().backward()
        return step

    open_clip_loss = ClipLoss()
    steps = {"open_clip ClipLoss": step_for(lambda: open_clip_loss(image_features, text_features, logit_scale))}
    for label, gamma, token_weight in VARIANTS:
        loss_module = HNClipLoss(gamma=gamma, token_weight=token_weight)
        steps[label] = step_for(lambda m=loss_module: m(image_features, text_features, logit_scale,
                                                        image_tokens=image_tokens, text_tokens=text_tokens,
                                                        text_mask=text_mask))
    token_label = VARIANTS[-1][0]
    # the token step takes a minute or more at paper sizes on CPU: timed on its own, with fewer repeats
    token_step = steps.pop(token_label)
    times = interleaved_times(steps, repeats, warmup)
    times.update(interleaved_times({token_label: token_step}, token_repeats, min(warmup, 1)))
    print_table(times, baseline=VARIANTS[0][0])


def random_tokens(batch: int, context_length: int, generator: torch.Generator) -> torch.Tensor:
    """Caption ids shaped like CLIP's tokenizer output: SOT, words, EOT, zero padding, random lengths."""
    sot, eot = 49406, 49407
    tokens = torch.zeros(batch, context_length, dtype=torch.long)
    lengths = torch.randint(context_length // 4, context_length - 1, (batch,), generator=generator)
    for row, n_words in enumerate(lengths.tolist()):
        tokens[row, 0] = sot
        tokens[row, 1:n_words + 1] = torch.randint(1, sot, (n_words,), generator=generator)
        tokens[row, n_words + 1] = eot
    return tokens


def benchmark_tiny_model(micro_batch: int, repeats: int, warmup: int) -> None:
    print(f"== tiny model end to end: forward + loss + backward + AdamW, micro-batch {micro_batch}, "
          "float32 on CPU ==")
    try:
        from hnclip.models import create_model
    except ImportError as error:
        print(f"  skipped: hnclip.models not available ({error})")
        return
    # 248 positions as after the Long-CLIP stretch of the tiny 77-token tower, the first 20 frozen
    model = create_model("tiny", context_length=248, frozen_positions=20, seed=0).train()
    generator = torch.Generator().manual_seed(0)
    images = torch.randn(micro_batch, 3, *model.image_size, generator=generator)
    tokens = random_tokens(micro_batch, model.context_length, generator)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, weight_decay=0.1)
    print(f"  model: tiny, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"image {tuple(model.image_size)}, {model.context_length} text positions")

    def step_for(loss_module: HNClipLoss, with_tokens: bool) -> Callable[[], None]:
        def step() -> None:
            optimizer.zero_grad(set_to_none=True)
            out = model(images, tokens, with_tokens=with_tokens)
            loss_module(out["image_features"], out["text_features"], out["logit_scale"],
                        image_tokens=out.get("image_tokens"), text_tokens=out.get("text_tokens"),
                        text_mask=out.get("text_mask")).backward()
            optimizer.step()
        return step

    steps = {label: step_for(HNClipLoss(gamma=gamma, token_weight=token_weight), bool(token_weight))
             for label, gamma, token_weight in VARIANTS}
    print_table(interleaved_times(steps, repeats, warmup), baseline=VARIANTS[0][0])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and few repeats: a smoke run")
    parser.add_argument("--repeats", type=int, default=None, help="timed repeats of the cheap variants")
    parser.add_argument("--token-repeats", type=int, default=None,
                        help="timed repeats of the token branch at loss level (a minute or more each on CPU)")
    parser.add_argument("--step-repeats", type=int, default=None, help="timed repeats of a tiny-model step")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--section", choices=("all", "loss", "model"), default="all",
                        help="run both sections, or only the loss-alone or the tiny-model one")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    repeats = args.repeats or (10 if args.quick else 300)
    token_repeats = args.token_repeats or 3
    step_repeats = args.step_repeats or (3 if args.quick else 20)
    warmup = 2 if args.quick else 5

    print(f"machine: {platform.machine()} {platform.processor() or ''}, {os.cpu_count()} CPUs, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, {describe_load()}")
    if args.section in ("all", "loss"):
        benchmark_loss(QUICK_SIZES if args.quick else PAPER_SIZES, repeats, token_repeats, warmup)
        print()
    if args.section in ("all", "model"):
        benchmark_tiny_model(micro_batch=16, repeats=step_repeats, warmup=1 if args.quick else 2)
    # other processes' load is the main source of noise on a shared machine: say what it was
    print(f"\nafter the run: {describe_load()}")


def describe_load() -> str:
    return f"load average (1 min) {os.getloadavg()[0]:.2f}"


if __name__ == "__main__":
    main()
