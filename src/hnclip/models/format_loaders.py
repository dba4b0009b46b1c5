"""The loaders of the checkpoint formats :mod:`hnclip.checkpoint_formats` registers: each turns one
:class:`ConvertRequest` into a dual encoder (or saves its own folder) and names the weights file it read, so
:func:`hnclip.models.convert.convert_source` converts every format the same way. (FineLIP's loader builds our
FineLIP framework around the publisher's aggregators, so it lives above the models layer:
:func:`hnclip.framework_loading.load_finelip`.)"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hnclip import paths

__all__ = ["TRANSFORMERS_FILES", "ConvertRequest", "fetch_transformers_model", "load_longclip", "load_open_clip", "load_openai", "load_overlay",
           "load_transformers"]


# what a transformers CLIP repository needs fetched: config, safetensors weights, processor and tokenizer
TRANSFORMERS_WEIGHTS = "model.safetensors"
TRANSFORMERS_FILES = ["config.json", TRANSFORMERS_WEIGHTS, "preprocessor_config.json", "processor_config.json",
                      "tokenizer.json",
                      "tokenizer_config.json", "vocab.json", "merges.txt", "special_tokens_map.json"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$")


def fetch_transformers_model(source: str, download_dir, revision: str | None = None,
                             sha256: str | None = None, key: str = "checkpoint") -> Path:
    """A CLIPModel folder: ``source`` itself when it is one, else the Hub repository ``OWNER/NAME`` fetched
    (:data:`TRANSFORMERS_FILES`) into ``download_dir`` and locked; ``sha256`` pins its weights file."""
    from hnclip.data.checksum_lock import ChecksumMismatchError
    from hnclip.data.transport import DownloadError
    from hnclip.data.weights import fetch_weights
    from hnclip.model_files import missing_local_source

    text = str(source)
    pins = {TRANSFORMERS_WEIGHTS: sha256} if sha256 else None
    folder = Path(text).expanduser()
    if folder.is_dir():
        return fetch_weights(str(folder), download_dir, sha256=pins)
    missing = missing_local_source(text, "folder")
    if missing:  # before anything is fetched or a download folder made
        raise FileNotFoundError(f"{key} {text!r}: {missing}")
    repo = text.removeprefix("hf://")
    if not _HUB_ID.match(repo):
        raise FileNotFoundError(f"{key} {text!r}: neither an existing transformers model folder nor a Hub id OWNER/NAME")
    try:
        return fetch_weights(f"hf://{repo}", download_dir, revision=revision, sha256=pins,
                             allow_patterns=TRANSFORMERS_FILES)
    except ChecksumMismatchError:  # fetched, but not the pinned file: its own message names both hashes
        raise
    except DownloadError as error:  # Hugging Face's message names neither the key nor the path, over many lines
        first = (str(error).strip().splitlines() or [""])[0][:300]
        raise FileNotFoundError(f"{key} {text!r}: neither a folder here (relative paths are read from {Path.cwd()}) "
                                f"nor a Hub model that could be fetched ({first})") from None


@dataclass(frozen=True)
class ConvertRequest:
    """What a config names for one conversion (:func:`hnclip.models.convert.convert_source`'s arguments);
    ``key`` is the config section its errors name."""

    fmt: str
    checkpoint: str | None
    out_dir: Path
    model: str | None = None
    base: str | None = None
    base_revision: str | None = None
    revision: str | None = None
    sha256: str | None = None
    stretch: int | None = None
    download_dir: str | Path = paths.WEIGHTS_DIR
    cache_dir: str | None = None
    key: str = "backbone"

    def fetch_checkpoint(self):
        """The checkpoint file, fetched and locked (``revision``, ``sha256``)."""
        from hnclip.data.weights import fetch_weights

        return fetch_weights(self.checkpoint, self.download_dir, revision=self.revision, sha256=self.sha256)


def load_longclip(request: ConvertRequest):
    from .checkpoints import load_longclip_checkpoint

    weights = request.fetch_checkpoint()
    return load_longclip_checkpoint(weights), weights


def load_openai(request: ConvertRequest):
    from .checkpoints import load_openai_checkpoint

    weights = request.fetch_checkpoint()
    return load_openai_checkpoint(weights), weights


def load_open_clip(request: ConvertRequest):
    from .from_open_clip import load_open_clip as load

    dual, found = load(request.model, request.checkpoint, revision=request.revision, sha256=request.sha256,
                       download_dir=request.download_dir, cache_dir=request.cache_dir)
    return dual, found.weights


def load_transformers(request: ConvertRequest):
    from .from_transformers import load_transformers_folder

    folder = fetch_transformers_model(request.checkpoint, request.download_dir, request.revision, request.sha256,
                                      key=f"{request.key}.checkpoint")
    return load_transformers_folder(folder, name=str(request.checkpoint)), folder / TRANSFORMERS_WEIGHTS


def load_overlay(request: ConvertRequest):
    """GOAL's or StructXLIP's released ``.pth`` over ``base``, the CLIPModel it was fine-tuned from."""
    from .publishers import load_overlay_checkpoint

    weights = request.fetch_checkpoint()
    folder = fetch_transformers_model(request.base, request.download_dir, request.base_revision,
                                      key=f"{request.key}.base")
    return load_overlay_checkpoint(request.fmt, weights, folder), weights
