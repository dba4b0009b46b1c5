"""LoRA: low-rank adapters (peft) on every Linear of both towers, merged into the weights for export.

Only the adapters and the logit scale train, at the run's ``lr`` (its method recipe sets the adapter
rate); the objective is the base class's (the global InfoNCE with the run's label smoothing, HN when
gamma > 0, the token term when token_weight > 0). LoRA and DoRA have no authors' recipe for CLIP
fine-tuning: the paper config's choices are marked "(chosen)" there. Adapters are added after the
frozen-margin features are encoded, so "frozen G" comes from the unadapted initial model.
"""

from __future__ import annotations

from .base import Framework

__all__ = ["LoRA"]


class LoRA(Framework):
    name = "lora"
    method = "lora"  # hnclip.models.apply_adapters' method

    def wrap_model(self, model):
        from hnclip.models import apply_adapters

        s = self.settings
        return apply_adapters(model, self.method, s.r, s.alpha, s.dropout)


FRAMEWORK = LoRA
