"""LoRA / DoRA adapters on both towers (peft), and merging them back into a plain DualEncoder.

The adapted model is peft's ``PeftModel`` around the DualEncoder: it forwards ``forward``,
``encode_image``, ``encode_text``, ``tokenize``, ``spec``, ``image_size``, ``logit_scale``... to the
wrapped model, so a training loop treats it like the plain model.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from torch import nn

from .attention import convert_attention_to_linear, convert_attention_to_native
from .dual_encoder import DualEncoder

__all__ = ["ADAPTER_METHODS", "DEFAULT_TARGET_MODULES", "apply_adapters", "is_adapted", "merge_adapters"]

ADAPTER_METHODS = ("lora", "dora")
# every Linear of a transformer block: attention q/k/v/out and the MLP's two layers
DEFAULT_TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "out_proj", "c_fc", "c_proj")


def is_adapted(model: nn.Module) -> bool:
    # peft is imported lazily (its import costs seconds on every CLI call); if it was never
    # imported, no model can be a PeftModel
    peft = sys.modules.get("peft")
    return peft is not None and isinstance(model, peft.PeftModel)


def apply_adapters(model: DualEncoder, method: str = "lora", r: int = 16, alpha: int = 32,
                   dropout: float = 0.0, target_modules: Sequence[str] = DEFAULT_TARGET_MODULES) -> nn.Module:
    """Wrap ``model`` (modified in place, as peft does) with ``method`` adapters of rank ``r``.

    Attention is first converted to :class:`~hnclip.models.attention.LinearAttention` so that q/k/v/out
    are real Linear modules. Afterwards only the adapter weights and ``logit_scale`` train; DoRA adds
    one magnitude entry per output feature of each adapted Linear on top of LoRA's r * (in + out).
    """
    if method not in ADAPTER_METHODS:
        raise ValueError(f"unknown adapter method {method!r}; known: {', '.join(ADAPTER_METHODS)}")
    if is_adapted(model):
        raise ValueError("model already carries adapters; merge_adapters it before adding new ones")
    if not isinstance(model, DualEncoder):
        raise TypeError(f"apply_adapters needs a DualEncoder, got {type(model).__name__}")
    if r < 1:
        raise ValueError(f"adapter rank r must be >= 1, got {r}")
    from peft import LoraConfig, get_peft_model
    convert_attention_to_linear(model)
    linear_names = {name.rsplit(".", 1)[-1] for name, m in model.named_modules() if isinstance(m, nn.Linear)}
    unmatched = [t for t in target_modules if t not in linear_names]
    if unmatched:
        raise ValueError(f"target_modules {unmatched} match no nn.Linear in the model; "
                         f"Linear module names: {sorted(linear_names)}")
    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=list(target_modules),
                        use_dora=method == "dora", bias="none")
    adapted = get_peft_model(model, config)
    model.logit_scale.requires_grad_(True)  # CLIP's temperature keeps learning, as in full fine-tuning
    return adapted


def merge_adapters(model: nn.Module) -> DualEncoder:
    """Fold adapters into the base weights (in place) and return the plain, fully trainable DualEncoder.

    Attention goes back to ``nn.MultiheadAttention`` so the state dict has the same keys as a model
    that was never adapted. A DualEncoder without adapters passes through (attention converted back).
    """
    if is_adapted(model):
        model = model.merge_and_unload()
        model.requires_grad_(True)
    if not isinstance(model, DualEncoder):
        raise TypeError(f"merge_adapters needs a DualEncoder or an adapted one, got {type(model).__name__}")
    return convert_attention_to_native(model)
