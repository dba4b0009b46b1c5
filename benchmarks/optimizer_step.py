"""One AdamW step on the toy's dual encoder: torch's per-tensor loop against its multi-tensor update.

torch chooses the multi-tensor (``foreach``) AdamW update by itself only for accelerator tensors; on the
CPU it runs a Python loop over the parameters, one small kernel at a time. The embedded default trains
the toy's ``mini`` dual encoder (62 trainable tensors at 248 text positions) on the CPU, one optimizer
step per two micro-batches, so ``hnclip.training.schedule.build_optimizer`` asks for ``foreach=True``.
This measures, in one run on this machine and one thread (as each training job runs), the seconds per
step of both updates over the same parameters and gradients (rounds alternate the two, so load from
elsewhere falls on both alike), prints their ratio, and checks that both leave bit-identical weights.

    .venv/bin/python benchmarks/optimizer_step.py                 # 5 rounds of 50 steps
    .venv/bin/python benchmarks/optimizer_step.py --rounds 3 --steps 100
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
# the training jobs' kernel pinning (hnclip.cpu_kernels), applied before torch loads, as `python -m hnclip`
from hnclip import cpu_kernels  # noqa: E402  (light: no torch)

os.environ.setdefault(cpu_kernels.ENV_SETTING, "avx2")
cpu_kernels.apply()
cpu_kernels.configure_torch()

import torch  # noqa: E402

from hnclip.models import DualEncoder  # noqa: E402
from hnclip.models.registry import get_model_config  # noqa: E402
from hnclip.training.schedule import param_groups  # noqa: E402


def make_parameters(seed: int) -> tuple[torch.nn.Module, list[torch.nn.Parameter]]:
    torch.manual_seed(seed)
    model = DualEncoder(get_model_config("mini"), context_length=248, frozen_positions=20, name="mini")
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(seed + 1)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator) * 1e-3
    return model, params


def time_steps(foreach: bool, steps: int, seed: int) -> tuple[float, list[torch.Tensor]]:
    model, params = make_parameters(seed)
    optimizer = torch.optim.AdamW(param_groups(model, 0.1), lr=1e-3, betas=(0.9, 0.98), eps=1e-6,
                                  foreach=foreach)
    optimizer.step()  # allocates the moments outside the timed steps
    started = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - started) / steps, [p.detach() for p in params]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=50)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    _, params = make_parameters(0)
    print(f"mini dual encoder, 248 text positions: {len(params)} trainable tensors, "
          f"{sum(p.numel() for p in params):,} parameters; one thread; {args.rounds} rounds of {args.steps} steps")
    per_tensor, multi_tensor = [], []
    for round_ in range(args.rounds):
        order = (False, True) if round_ % 2 == 0 else (True, False)
        for foreach in order:
            seconds, weights = time_steps(foreach, args.steps, seed=0)
            (multi_tensor if foreach else per_tensor).append(seconds)
            if round_ == 0:
                if foreach:
                    multi_weights = weights
                else:
                    single_weights = weights
    identical = all(torch.equal(a, b) for a, b in zip(single_weights, multi_weights, strict=True))
    a, b = statistics.median(per_tensor), statistics.median(multi_tensor)
    print(f"per-tensor loop (foreach=False, torch's CPU default): {a * 1e3:7.2f} ms per step (median)")
    print(f"multi-tensor    (foreach=True, build_optimizer)       : {b * 1e3:7.2f} ms per step (median)")
    print(f"ratio per-tensor / multi-tensor: {a / b:.2f}; weights after {args.steps + 1} steps bit-identical: "
          f"{identical}")


if __name__ == "__main__":
    main()
