"""DoRA: LoRA's low-rank update plus a trained magnitude per output feature (peft ``use_dora``).

Everything else is :class:`~hnclip.frameworks.lora.LoRA`'s: same targets, settings (the ``lora``
section), learning rate, merge for export.
"""

from __future__ import annotations

from .lora import LoRA
from .registry import FRAMEWORK_HN_PLUGIN

__all__ = ["DoRA"]


class DoRA(LoRA):
    name = "dora"
    hn_plugin = FRAMEWORK_HN_PLUGIN["dora"]
    method = "dora"


FRAMEWORK = DoRA
