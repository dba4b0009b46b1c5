"""Where and in what precision a run computes: device, autocast dtype, fp16's gradient scaler, seeds and
repeatable kernels, and the peak memory the summary reports."""

from __future__ import annotations

import contextlib
import os
import random
import resource

import numpy as np
import torch

from hnclip.config.train import TrainConfig

__all__ = ["autocast", "configure_determinism", "grad_scaler", "peak_memory_mb", "resolve_runtime",
           "seed_everything"]


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # also seeds every CUDA device


def resolve_runtime(cfg: TrainConfig) -> tuple[torch.device, torch.dtype | None]:
    """(device, autocast dtype or None). ``fp16`` autocasts to float16 on any device (torch runs it on
    the CPU too); its gradient scaler is :func:`grad_scaler`'s."""
    if cfg.device == "auto":
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    else:
        if cfg.device == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("TrainConfig.device='cuda' but no CUDA device is visible")
        device = torch.device(cfg.device)
    if cfg.precision == "bf16" and device.type != "cuda":
        raise ValueError(f"TrainConfig.precision='bf16' needs CUDA, but training runs on {device}")
    if cfg.precision == "fp16":
        return device, torch.float16
    use_bf16 = cfg.precision == "bf16" or (cfg.precision == "auto" and device.type == "cuda")
    return device, (torch.bfloat16 if use_bf16 else None)


def grad_scaler(cfg: TrainConfig, device: torch.device) -> torch.amp.GradScaler | None:
    """float16's gradient scaler (open_clip's ``--precision amp``): the loss is multiplied by a scale before
    backward so small gradients survive float16, ``.grad`` divided by it before clipping, and a step whose
    gradients overflowed is skipped with the scale halved (doubled again after 2,000 clean steps). None
    for the other precisions: bf16 has float32's exponent range and needs none."""
    return torch.amp.GradScaler(device.type) if cfg.precision == "fp16" else None


def configure_determinism(device: torch.device) -> None:
    """Make CUDA kernels repeatable, which bit-identical resume needs (CPU kernels already are).

    Costs some speed (deterministic index/scatter backward, no cuDNN autotuning). cuBLAS reads its
    workspace setting when its handle is created, so this must run before the first CUDA matmul.
    """
    if device.type != "cuda":
        return
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    torch.use_deterministic_algorithms(True, warn_only=True)


def autocast(device, amp_dtype):
    """Autocast to ``amp_dtype`` on ``device``'s type, or no context at all in float32."""
    if amp_dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=amp_dtype)


def peak_memory_mb(device: torch.device) -> float:
    """The run's peak memory: CUDA's allocated maximum on a GPU, the process's resident maximum on the CPU."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB
