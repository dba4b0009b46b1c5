"""One training step of the paper's backbone on a GPU: time, throughput, MFU, memory, HN and token overhead.

Random-init ViT-L/14 + 248-token text tower (``ViT-L-14-longclip``, no weights needed) at the paper's
micro-batch 16, bf16 autocast, AdamW. Variants are interleaved so that clock and thermal drift fall on all
of them alike; ratios divide by the InfoNCE step measured in the same run.

    python benchmarks/gpu_step.py                 # on a CUDA machine
    python benchmarks/gpu_step.py --quick         # any machine: micro model on CPU, checks the script runs

MFU uses the analytic FLOPs of the two towers (6 x parameters-in-matmuls x tokens, plus attention) and
the device's dense bf16 peak (``--peak-tflops``, default 989 for H100/H200 SXM without sparsity). The HN
steps use the gamma and token weight of ``config/paper.yaml`` (step_setup.objective_variants).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hnclip.losses import contrastive_loss, token_loss
from hnclip.models import create_model, get_model_config

from step_setup import objective_variants


def tower_flops(cfg: dict, batch: int, text_len: int) -> float:
    """Forward+backward FLOPs of one step: 6 * (matmul params per token) * tokens + attention scores."""
    def transformer(width, layers, seq):
        per_token = 12 * width * width  # qkv (3w^2) + out (w^2) + MLP (8w^2), multiply-adds
        attention = 2 * seq * width  # QK^T and AV per token
        return 6 * layers * batch * seq * (per_token + attention)

    v, t = cfg["vision_cfg"], cfg["text_cfg"]
    patches = (v["image_size"] // v["patch_size"]) ** 2 + 1
    return transformer(v["width"], v["layers"], patches) + transformer(t["width"], t["layers"], text_len)


def step(model, optimizer, images, tokens, variant: dict, amp_dtype):
    with torch.autocast(device_type=images.device.type, dtype=amp_dtype, enabled=amp_dtype is not None):
        out = model(images, tokens, with_tokens=variant["token_weight"] > 0)
    scale = out["logit_scale"].float()
    loss = contrastive_loss(out["image_features"].float(), out["text_features"].float(), scale, variant["gamma"])
    if variant["token_weight"]:
        loss = loss + variant["token_weight"] * token_loss(out["image_tokens"], out["text_tokens"],
                                                           out["text_mask"], scale)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-L-14-longclip")
    parser.add_argument("--micro-batch", type=int, default=16)
    parser.add_argument("--text-len", type=int, default=248, help="real tokens per caption (no padding)")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--quick", "--smoke", dest="smoke", action="store_true",
                        help="micro model on CPU (even with a GPU), 2 repeats")
    args = parser.parse_args()
    if args.smoke:
        args.model, args.repeats, args.warmup, args.micro_batch, args.text_len = "micro", 2, 1, 4, 40
    device = torch.device("cuda" if torch.cuda.is_available() and not args.smoke else "cpu")
    amp_dtype = torch.bfloat16 if device.type == "cuda" else None

    model = create_model(args.model, context_length=248, frozen_positions=20, seed=0).to(device).train()
    cfg = get_model_config(args.model)
    size = model.image_size[0] if isinstance(model.image_size, tuple) else model.image_size
    images = torch.randn(args.micro_batch, 3, size, size, device=device)
    tokens = torch.randint(1, 49000, (args.micro_batch, 248), device=device)
    tokens[:, args.text_len - 1] = 49407  # EOT: the longest caption sets the sequence the tower runs
    tokens[:, args.text_len:] = 0
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)

    variants = objective_variants()
    hn = variants["HN + token"]
    times: dict[str, list[float]] = {name: [] for name in variants}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for i in range(args.warmup + args.repeats):
        for name, variant in variants.items():
            sync()
            start = time.perf_counter()
            step(model, optimizer, images, tokens, variant, amp_dtype)
            sync()
            if i >= args.warmup:
                times[name].append(time.perf_counter() - start)

    flops = tower_flops(cfg, args.micro_batch, args.text_len)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"device: {name}; model {args.model}; micro-batch {args.micro_batch}; {args.text_len} text tokens; "
          f"{'bf16 autocast' if amp_dtype else 'fp32'}; median of {args.repeats}; gamma {hn['gamma']:g} and "
          f"token weight {hn['token_weight']:g} (config/paper.yaml)")
    base = statistics.median(times["InfoNCE"])
    for label, values in times.items():
        t = statistics.median(values)
        mfu = flops / t / (args.peak_tflops * 1e12) if device.type == "cuda" else float("nan")
        print(f"  {label:11s} step {t * 1e3:9.2f} ms  {args.micro_batch / t:8.1f} samples/s  "
              f"x{t / base:5.3f} vs InfoNCE  MFU {mfu:6.1%}")
    if device.type == "cuda":
        print(f"  peak memory: {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB")


if __name__ == "__main__":
    main()
