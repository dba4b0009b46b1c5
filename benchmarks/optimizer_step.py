"""One AdamW step on the toy's dual encoder: torch's per-tensor loop, its multi-tensor and its fused update.

torch chooses the multi-tensor (``foreach``) AdamW update by itself only for accelerator tensors; on the
CPU it runs a Python loop over the parameters, one small kernel at a time. The embedded default trains
the toy's ``mini`` dual encoder (62 trainable tensors at 248 text positions, 3.2M of its 3.4M entries in
the token table) on the CPU, one optimizer step per two micro-batches, so
``hnclip.training.schedule.build_optimizer`` asks for torch's fused update (one kernel per tensor).
This measures, in one run on this machine and one thread (as each training job runs), the seconds per
step of the three updates over the same parameters and gradients (rounds alternate the order, so load from
elsewhere falls on all alike; the token table's gradient is zero outside the few hundred rows a caption
set uses, as in training), prints the ratios, and how far each update's weights are from the per-tensor
loop's.

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

from hnclip.config.train import TrainConfig  # noqa: E402
from hnclip.frameworks.base import Framework  # noqa: E402
from hnclip.models import DualEncoder  # noqa: E402
from hnclip.models.registry import get_model_config  # noqa: E402
from hnclip.training.schedule import build_optimizer  # noqa: E402

# a training job's defaults (betas, epsilon, weight decay) at the embedded default's fine-tuning rate
CFG = TrainConfig(lr=1e-3)


def _adamw(foreach: bool):
    """torch's AdamW with the training job's settings and the given ``foreach``."""
    return lambda groups: torch.optim.AdamW(groups, lr=CFG.lr, betas=(CFG.beta1, CFG.beta2), eps=CFG.eps,
                                            foreach=foreach)


# label -> optimizer over a framework's parameter groups: torch's CPU default, its multi-tensor update, and
# the project's own (the first is the reference the others are compared with)
UPDATES = {
    "per-tensor loop (foreach=False, torch's CPU default)": _adamw(foreach=False),
    "multi-tensor    (foreach=True)": _adamw(foreach=True),
    "fused           (fused=True, build_optimizer)": lambda groups: build_optimizer(groups, CFG),
}
USED_TOKEN_ROWS = 400  # rows of the token table with a gradient (the synthetic captions use a few hundred)


def time_steps(make_optimizer, steps: int, seed: int = 0) -> tuple[float, list[torch.Tensor]]:
    """Seconds per step of ``make_optimizer``'s update on the mini model (one seed: the same weights and
    gradients for every update), and the weights it leaves."""
    torch.manual_seed(seed)
    model = DualEncoder(get_model_config("mini"), context_length=248, frozen_positions=20, name="mini")
    params = [p for p in model.parameters() if p.requires_grad]
    generator = torch.Generator().manual_seed(seed + 1)
    for p in params:
        p.grad = torch.randn(p.shape, generator=generator) * 1e-3
    table = model.clip.token_embedding.weight
    table.grad[USED_TOKEN_ROWS:] = 0.0
    optimizer = make_optimizer(Framework(CFG).param_groups(model))
    optimizer.step()  # allocates the moments outside the timed steps
    started = time.perf_counter()
    for _ in range(steps):
        optimizer.step()
    return (time.perf_counter() - started) / steps, [p.detach() for p in params]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="1 round of 2 steps: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.steps = 1, 2
    torch.set_num_threads(1)
    seconds = {label: [] for label in UPDATES}
    weights = {}
    for round_ in range(args.rounds):
        labels = list(UPDATES) if round_ % 2 == 0 else list(reversed(UPDATES))
        for label in labels:
            took, weights[label] = time_steps(UPDATES[label], args.steps)
            seconds[label].append(took)
    per_tensor = weights[next(iter(UPDATES))]
    print(f"mini dual encoder, 248 text positions: {len(per_tensor)} trainable tensors, "
          f"{sum(w.numel() for w in per_tensor):,} parameters; one thread; {args.rounds} rounds of {args.steps} steps")
    medians = {label: statistics.median(values) for label, values in seconds.items()}
    fused = medians[list(UPDATES)[-1]]
    width = max(len(label) for label in medians)
    for label, median in medians.items():
        gap = max((a - b).abs().max().item() for a, b in zip(weights[label], per_tensor, strict=True))
        print(f"{label:<{width}}: {median * 1e3:7.2f} ms per step (median), {median / fused:4.2f}x fused; "
              f"largest weight difference from the per-tensor loop after {args.steps + 1} steps {gap:.1e}")


if __name__ == "__main__":
    main()
