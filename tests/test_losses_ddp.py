"""HNClipLoss under torch.distributed: two CPU ranks (gloo) must reproduce the single-process objective.

Each rank holds half of one fixed global batch. The margins G and the negatives must span the global
batch, and the autograd-aware gather plus DDP's gradient averaging must give exactly the gradients of
the loss on the concatenated batch, both with G from the live captions and with frozen margin features.
One spawn runs every scenario, since starting two interpreters with torch costs most of the test's time.
"""

from __future__ import annotations

import datetime
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from hnclip.losses import HNClipLoss, contrastive_loss

WORLD_SIZE = 2
GLOBAL_BATCH = 8
GAMMA = 0.5
SCENARIOS = ("live_margin", "frozen_margin")


class FeatureModel(nn.Module):
    """Two linear towers and a learned temperature: the smallest model whose gradients flow like CLIP's."""

    def __init__(self, in_dim: int = 6, out_dim: int = 5):
        super().__init__()
        self.image_proj = nn.Linear(in_dim, out_dim)
        self.text_proj = nn.Linear(in_dim, out_dim)
        self.logit_scale = nn.Parameter(torch.tensor(2.5))  # exp(2.5) ~ 12: softmax neither flat nor one-hot

    def forward(self, images, texts):
        return (F.normalize(self.image_proj(images), dim=-1), F.normalize(self.text_proj(texts), dim=-1),
                self.logit_scale.exp())


def make_inputs() -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    shared = torch.randn(6, generator=generator)
    return {
        "images": torch.randn(GLOBAL_BATCH, 6, generator=generator),
        # near-duplicate captions, so that G is large and a wrong G would show in the loss
        "texts": shared + 0.5 * torch.randn(GLOBAL_BATCH, 6, generator=generator),
        "frozen": F.normalize(shared[:5] + 0.5 * torch.randn(GLOBAL_BATCH, 5, generator=generator), dim=-1),
        "image_features": F.normalize(torch.randn(GLOBAL_BATCH, 5, generator=generator), dim=-1),
        "text_features": F.normalize(shared[:5] + 0.5 * torch.randn(GLOBAL_BATCH, 5, generator=generator), dim=-1),
        "logit_scale": torch.tensor(20.0),
    }


def _margin(inputs: dict[str, torch.Tensor], scenario: str, rows: slice):
    return inputs["frozen"][rows] if scenario == "frozen_margin" else None


def _worker(rank: int, port: int, inputs: dict, state: dict, out_dir: str) -> None:
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)  # two ranks share a small CPU; oversubscription only slows the test down
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE, timeout=datetime.timedelta(seconds=60))
    try:
        local = slice(rank * GLOBAL_BATCH // WORLD_SIZE, (rank + 1) * GLOBAL_BATCH // WORLD_SIZE)
        loss_fn = HNClipLoss(gamma=GAMMA)
        results = {}
        for scenario in SCENARIOS:
            results[f"{scenario}/loss"] = loss_fn(inputs["image_features"][local], inputs["text_features"][local],
                                                  inputs["logit_scale"],
                                                  margin_text_features=_margin(inputs, scenario, local)).detach()
            model = FeatureModel()
            model.load_state_dict(state)
            ddp_model = DistributedDataParallel(model)
            image_features, text_features, logit_scale = ddp_model(inputs["images"][local], inputs["texts"][local])
            loss_fn(image_features, text_features, logit_scale,
                    margin_text_features=_margin(inputs, scenario, local)).backward()
            for name, param in model.named_parameters():
                results[f"{scenario}/grad/{name}"] = param.grad.detach().clone()
        torch.save(results, os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """Per-rank results of every scenario, and the inputs and initial weights they came from."""
    out_dir = tmp_path_factory.mktemp("ddp")
    inputs = make_inputs()
    torch.manual_seed(1)
    state = FeatureModel().state_dict()
    mp.spawn(_worker, args=(_free_port(), inputs, state, str(out_dir)), nprocs=WORLD_SIZE, join=True)
    results = [torch.load(out_dir / f"rank{rank}.pt", weights_only=True) for rank in range(WORLD_SIZE)]
    return inputs, state, results


@pytest.mark.slow  # two gloo processes (a module fixture, ~15 s)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_mean_of_rank_losses_equals_single_process_loss(ranks, scenario):
    inputs, _, results = ranks
    everything = slice(None)
    expected = contrastive_loss(inputs["image_features"], inputs["text_features"], inputs["logit_scale"], GAMMA,
                                margin_text_features=_margin(inputs, scenario, everything))
    # Without the gathered columns (negatives and G from the other rank) the mean differs by far more.
    local_only = [contrastive_loss(inputs["image_features"][rows], inputs["text_features"][rows],
                                   inputs["logit_scale"], GAMMA)
                  for rows in (slice(0, GLOBAL_BATCH // 2), slice(GLOBAL_BATCH // 2, None))]
    assert abs(sum(local_only).item() / WORLD_SIZE - expected.item()) > 1e-2
    mean_of_ranks = sum(result[f"{scenario}/loss"] for result in results) / WORLD_SIZE
    torch.testing.assert_close(mean_of_ranks, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.slow  # two gloo processes (a module fixture, ~15 s)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_ddp_gradients_equal_single_process_gradients(ranks, scenario):
    inputs, state, results = ranks
    model = FeatureModel()
    model.load_state_dict(state)
    image_features, text_features, logit_scale = model(inputs["images"], inputs["texts"])
    contrastive_loss(image_features, text_features, logit_scale, GAMMA,
                     margin_text_features=_margin(inputs, scenario, slice(None))).backward()
    for name, param in model.named_parameters():
        assert param.grad.abs().max() > 1e-3, name  # a vanishing gradient would make the comparison empty
        for rank, result in enumerate(results):
            torch.testing.assert_close(result[f"{scenario}/grad/{name}"], param.grad, rtol=1e-5, atol=1e-6,
                                       msg=lambda m, n=name, r=rank: f"rank {r}, {n}: {m}")
