"""LoRA: low-rank adapters (peft) on every Linear of both towers, merged into the weights for export.

Only the adapters and the logit scale train, at ``adapter_lr``; the objective is the base class's
(global InfoNCE, HN when gamma > 0, token term when token_weight > 0). Adapters are added after the
frozen-margin features are encoded, so "frozen G" comes from the unadapted initial model.
"""

from __future__ import annotations

from .base import Framework

__all__ = ["LoRA"]


class LoRA(Framework):
    name = "lora"
    method = "lora"  # hnclip.models.apply_adapters' method

    @classmethod
    def base_lr(cls, cfg) -> float:
        return cfg.adapter_lr

    def wrap_model(self, model):
        from hnclip.models import apply_adapters

        return apply_adapters(model, self.method, self.cfg.lora_r, self.cfg.lora_alpha, self.cfg.lora_dropout)


FRAMEWORK = LoRA
