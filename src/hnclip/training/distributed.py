"""Data-parallel training over torch.distributed processes, as launched by ``torchrun``.

``torchrun --standalone --nproc-per-node N --no-python hnclip train ...`` starts N copies of the run,
one per GPU (``gloo`` processes on CPU work too, which is how the tests run it). Every process reads
the same data order; the configured ``micro_batch`` is the *global* micro-batch and rank ``r`` takes
its ``r``-th contiguous share, so a run's data, schedule, checkpoints and logs do not depend on N.

What spans the global micro-batch and what stays per process:

- the global contrastive term (InfoNCE, or HN with gamma > 0) is :class:`hnclip.losses.HNClipLoss`'s:
  it gathers image and text features from every rank with gradient and computes the local rows
  against the global columns, with G built from the gathered, detached margin features; with DDP's
  gradient averaging its gradients are those of one process holding the whole micro-batch;
- the FILIP token term and a framework's extra terms see the local rows only (gathering [B, 248, D]
  token tensors would dominate communication); the logged loss is their mean over ranks, so runs
  with these terms differ from a single-process run with the same ``micro_batch``.

The frozen-margin features are identical on every rank (broadcast from rank 0); each rank indexes
the rows it holds. Only rank 0 writes files; the others wait for it at the next collective.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

__all__ = [
    "PROCESS_GROUP_TIMEOUT",
    "DistributedContext",
    "all_reduce_probe",
    "check_world_size",
    "is_distributed",
    "join_process_group",
    "pin_device",
    "rank_seed",
    "read_launch_env",
    "sync_gradients",
    "wrap_data_parallel",
]

# Rank 0 evaluates after each epoch and writes checkpoints while the others wait in a collective;
# NCCL's default of 10 minutes would kill a paper-scale run in the middle of an evaluation.
PROCESS_GROUP_TIMEOUT = datetime.timedelta(minutes=60)


@dataclass(frozen=True)
class DistributedContext:
    """This process's place in the run; ``world_size == 1`` is a plain single-process run."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1

    def local_batch(self, micro_batch: int) -> int:
        """Samples per process of a global micro-batch of ``micro_batch`` samples."""
        if micro_batch % self.world_size:
            raise ValueError(f"TrainConfig.micro_batch={micro_batch} is the global micro-batch and must split evenly "
                             f"over the {self.world_size} processes of this run (WORLD_SIZE={self.world_size}); "
                             f"use a multiple of {self.world_size}")
        return micro_batch // self.world_size

    def shard(self, rows: np.ndarray) -> np.ndarray:
        """This rank's contiguous share of a global micro-batch (rank order = the single-process order)."""
        size = self.local_batch(len(rows))
        return rows[self.rank * size:(self.rank + 1) * size]

    def barrier(self) -> None:
        if self.is_distributed:
            dist.barrier()

    def mean(self, values: Sequence[float]) -> list[float]:
        """Element-wise mean over ranks (one all-reduce, in float64); the values themselves on one process."""
        if not self.is_distributed:
            return list(values)
        device = _collective_device()
        summed = torch.tensor(list(values), dtype=torch.float64, device=device)
        dist.all_reduce(summed)
        return (summed / self.world_size).tolist()

    def broadcast_(self, tensor: torch.Tensor) -> torch.Tensor:
        """Rank 0's ``tensor`` on every rank, in place (on the collective device for NCCL)."""
        if self.is_distributed:
            device = _collective_device()
            staged = tensor.to(device)
            dist.broadcast(staged, src=0)
            if staged is not tensor:
                tensor.copy_(staged)
        return tensor

    def broadcast_object(self, obj):
        """Rank 0's picklable ``obj`` on every rank (what it holds on other ranks is ignored)."""
        if not self.is_distributed:
            return obj
        holder = [obj]
        dist.broadcast_object_list(holder, src=0)
        return holder[0]

    def all_gather_object(self, obj) -> list:
        """Every rank's picklable ``obj``, in rank order, on every rank."""
        if not self.is_distributed:
            return [obj]
        gathered = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered


def _collective_device() -> torch.device:
    """NCCL only moves CUDA tensors; gloo only CPU ones (in this use)."""
    if dist.get_backend() == dist.Backend.NCCL:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def is_distributed() -> bool:
    """True inside an initialised process group of more than one process."""
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def _env_int(environ: Mapping[str, str], name: str, default: int) -> int:
    text = environ.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not an integer (set by torchrun)") from None


def read_launch_env(environ: Mapping[str, str] | None = None) -> DistributedContext:
    """The context torchrun describes in ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` (none: one process)."""
    environ = os.environ if environ is None else environ
    world_size = _env_int(environ, "WORLD_SIZE", 1)
    rank = _env_int(environ, "RANK", 0)
    local_rank = _env_int(environ, "LOCAL_RANK", rank)
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"environment: RANK={rank} and WORLD_SIZE={world_size} do not describe a process of "
                         f"the run (need 0 <= RANK < WORLD_SIZE); launch with torchrun")
    if local_rank < 0:
        raise ValueError(f"environment: LOCAL_RANK={local_rank} must be >= 0")
    return DistributedContext(rank, world_size, local_rank)


def pin_device(device: torch.device, context: DistributedContext) -> torch.device:
    """This process's device: ``cuda:LOCAL_RANK`` for a CUDA run (made current), else ``device`` itself."""
    if device.type != "cuda":
        return device
    if not context.is_distributed:
        return device
    count = torch.cuda.device_count()
    if context.local_rank >= count:
        raise RuntimeError(f"LOCAL_RANK={context.local_rank} but this node has {count} visible CUDA device(s) "
                           f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); start at "
                           f"most {count} processes per node (torchrun --nproc-per-node)")
    pinned = torch.device("cuda", context.local_rank)
    torch.cuda.set_device(pinned)
    return pinned


def join_process_group(device: torch.device) -> tuple[DistributedContext, torch.device]:
    """(context, pinned device) of this process, with its process group initialised.

    A group that already exists (the caller's, or one made by an earlier training in this process)
    is used as it is. Otherwise torchrun's environment with ``WORLD_SIZE > 1`` starts one (nccl for
    CUDA, gloo for CPU) that lives as long as the process: destroying it after a training and
    starting another would race on torchrun's rendezvous store, where a fast rank can read the
    slower one's stale address from the previous group and fail to connect.
    """
    if dist.is_available() and dist.is_initialized():
        launched = read_launch_env()
        local_rank = launched.local_rank if launched.world_size > 1 else dist.get_rank()
        context = DistributedContext(dist.get_rank(), dist.get_world_size(), local_rank)
        return context, pin_device(device, context)
    context = read_launch_env()
    if not context.is_distributed:
        return context, device
    if not dist.is_available():
        raise RuntimeError(f"WORLD_SIZE={context.world_size} asks for distributed training, but this torch build "
                           "has no torch.distributed")
    pinned = pin_device(device, context)
    backend = "nccl" if pinned.type == "cuda" else "gloo"
    dist.init_process_group(backend, rank=context.rank, world_size=context.world_size,
                            timeout=PROCESS_GROUP_TIMEOUT,
                            **({"device_id": pinned} if backend == "nccl" else {}))
    atexit.register(_destroy_process_group)
    return context, pinned


def _destroy_process_group() -> None:
    if dist.is_initialized():  # NCCL warns about (and may leak) a group left to the interpreter's teardown
        dist.destroy_process_group()


def rank_seed(seed: int, rank: int) -> int:
    """A seed of its own for each rank's dropout stream, a pure function of (run seed, rank)."""
    return int(np.random.SeedSequence([seed, rank]).generate_state(1)[0])


def wrap_data_parallel(module: nn.Module, context: DistributedContext) -> nn.Module:
    """``module`` in DistributedDataParallel when the run has several processes, else itself.

    No ``device_ids``: DDP would then copy the forward's inputs to the device, including the batch's
    row positions, which stay on the CPU to index the framework's prepared per-row data. Buffers are
    not broadcast each forward (a collective per call): the encoders' buffers never change.
    Every trainable parameter must receive a gradient each micro-batch (DDP's default, no graph
    search per forward); a framework with parameters that sit out a step would need
    ``find_unused_parameters=True``.
    """
    if not context.is_distributed:
        return module
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(module, forward_sync_buffers=False)


def sync_gradients(runner: nn.Module, is_last_micro_batch: bool):
    """Context for one micro-batch's forward and backward: DDP all-reduces gradients only on the last
    micro-batch of an optimizer step (the mean is linear, so reducing the accumulated sum once is the same)."""
    if is_last_micro_batch or not hasattr(runner, "no_sync"):
        return contextlib.nullcontext()
    return runner.no_sync()


def all_reduce_probe(probe, context: DistributedContext) -> None:
    """Average a :class:`hnclip.training.dynamics.GradientProbe`'s accumulated gradients and losses over ranks.

    Each rank's probe holds the gradients of its local losses; their mean is the gradient of the
    global objective (the same averaging DDP applies to ``.grad``, which the probe reads as the boosted
    gradient, already averaged). One all-reduce per held tensor (:meth:`~hnclip.training.dynamics.GradientProbe.reduce_tensors`:
    the standard gradient where it differs from the trained one) on a probed step, in place: a flat
    copy would cost another fp32 copy of the trainable parameters.
    """
    if not context.is_distributed:
        return
    device = _collective_device()
    for buffer in probe.reduce_tensors():
        staged = buffer.to(device)
        dist.all_reduce(staged)
        buffer.copy_(staged.div_(context.world_size))
    probe.standard_losses = context.mean(probe.standard_losses)


def check_world_size(path, checkpoint: Mapping, world_size: int) -> None:
    """Refuse to resume a checkpoint written by a run with another number of processes.

    Weights, optimizer and data position would carry over, but each process's RNG stream and the
    per-process terms (token, framework extras) depend on the split, so the run would not continue
    as it started.
    """
    saved = int(checkpoint.get("world_size", 1))  # checkpoints from before data parallelism: one process
    if saved != world_size:
        raise RuntimeError(
            f"checkpoint {path} was written by a run of {saved} process(es), this run has {world_size} "
            f"(torchrun --nproc-per-node / WORLD_SIZE). The per-process RNG streams and the per-process loss "
            f"terms depend on the split of the global micro-batch, so resuming would not continue the same run. "
            f"Restart with {saved} process(es), or delete the checkpoint to train from scratch: rm {path}")
