"""The HN-CLIP dual encoder: open_clip towers, Long-CLIP positional stretch, checkpoints, PEFT adapters.

- :mod:`.registry` architecture configs (``model_configs/*.json``): ``micro`` (tests), ``tiny``
  (the CPU default), ``ViT-L-14-longclip`` (the paper's backbone).
- :mod:`.dual_encoder` the model; :mod:`.factory` random init and the 77 -> 248 stretch.
- :mod:`.checkpoints` OpenAI / Long-CLIP state dicts, local or ``hf://``.
- :mod:`.attention` Linear-based attention; :mod:`.adapters` LoRA/DoRA; :mod:`.io` save/load.
- :mod:`.open_clip_import` open_clip imported without its timm/transformers integrations (first, below).
"""

# first: the modules below import from open_clip, which this imports without timm and transformers
from . import open_clip_import  # noqa: F401
from .adapters import apply_adapters, is_adapted, merge_adapters
from .attention import LinearAttention, convert_attention_to_linear, convert_attention_to_native
from .checkpoints import load_longclip_checkpoint, load_openai_checkpoint
from .dual_encoder import DualEncoder
from .factory import create_model, stretch_model
from .io import load_model, save_model
from .positional import stretch_positional_embedding
from .registry import get_model_config, list_models
from .tokenizer import tokenize

__all__ = [
    "DualEncoder",
    "LinearAttention",
    "apply_adapters",
    "convert_attention_to_linear",
    "convert_attention_to_native",
    "create_model",
    "get_model_config",
    "is_adapted",
    "list_models",
    "load_longclip_checkpoint",
    "load_model",
    "load_openai_checkpoint",
    "merge_adapters",
    "save_model",
    "stretch_model",
    "stretch_positional_embedding",
    "tokenize",
]
