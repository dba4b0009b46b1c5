"""DoRA: LoRA's low-rank update plus a trained magnitude per output feature (peft ``use_dora``).

Everything else is :class:`~hnclip.frameworks.lora.LoRA`'s: same targets, settings (the ``lora``
section), learning rate, merge for export.
"""

from __future__ import annotations

from .lora import LoRA

__all__ = ["DoRA"]


class DoRA(LoRA):
    name = "dora"
    method = "dora"


FRAMEWORK = DoRA
