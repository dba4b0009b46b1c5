"""The training set in memory (captions tokenized once, store rows) and its per-epoch micro-batches."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

__all__ = ["MicroBatchImages", "TrainingSet", "epoch_order"]


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The permutation of ``range(n)`` for epoch ``epoch`` (0-based): a pure function of (seed, epoch).

    Seeded per epoch rather than drawn from a running generator, so a resumed run needs no generator
    state to find its place.
    """
    return np.random.default_rng([seed, epoch]).permutation(n)


@dataclass
class TrainingSet:
    """Rows of the training manifest: ids, captions, their tokens and the image store's row of each image.

    ``manifest`` holds the same rows (every column, index 0..N-1) for frameworks that read more than
    the caption (e.g. short captions); None when the set was built without one.
    """

    image_ids: list[str]
    captions: list[str]
    store_rows: np.ndarray
    tokens: torch.Tensor | None = None
    manifest: pd.DataFrame | None = None
    # how many captions the tokenizer cut (hnclip.models.tokenizer.truncation), set with ``tokens``
    truncation: dict | None = None

    def __len__(self) -> int:
        return len(self.image_ids)

    def fingerprint(self) -> str:
        digest = hashlib.sha256()
        for image_id, caption in zip(self.image_ids, self.captions, strict=True):
            digest.update(f"{image_id}\t{caption}\n".encode())
        return digest.hexdigest()


class MicroBatchImages(torch.utils.data.Dataset):
    """Index: an array of training-set positions; item: (float images [B, 3, H, W], those positions).

    Pixels are normalised in the worker so the main process only moves tensors to the device.
    """

    def __init__(self, store, store_rows: np.ndarray, mean, std):
        self.store = store
        self.store_rows = store_rows
        self.mean, self.std = mean, std

    def __getitem__(self, positions):
        from hnclip.data.image_store import to_model_input

        positions = np.asarray(positions, dtype=np.int64)
        pixels = to_model_input(self.store.read(self.store_rows[positions]), self.mean, self.std)
        return pixels, torch.from_numpy(positions)
