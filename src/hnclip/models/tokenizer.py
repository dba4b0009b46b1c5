"""CLIP's BPE tokenizer (ships inside open_clip, so it works offline), shared by every model."""

from __future__ import annotations

from functools import lru_cache

import torch
from open_clip.tokenizer import SimpleTokenizer

__all__ = ["EOT_TOKEN_ID", "SOT_TOKEN_ID", "tokenize"]


@lru_cache(maxsize=1)
def _tokenizer() -> SimpleTokenizer:
    # built once per process: reading the 49k BPE merges takes ~0.3 s, and keeping it off the model
    # keeps deepcopy/pickle of models cheap
    return SimpleTokenizer()


SOT_TOKEN_ID = 49406
EOT_TOKEN_ID = 49407


def tokenize(texts: list[str] | str, context_length: int) -> torch.LongTensor:
    """[B, context_length] token ids, zero-padded; too-long captions are truncated keeping EOT last.

    EOT is the largest id in CLIP's vocabulary, which is why models pool at ``argmax`` of the ids.
    """
    if isinstance(texts, str):
        texts = [texts]
    return _tokenizer()(list(texts), context_length=context_length)
