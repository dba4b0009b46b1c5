"""An open_clip model as a :class:`DualEncoder`, created by open_clip's own ``create_model_and_transforms``.

What a user names (config ``backbone.model`` / ``models.<name>.model`` and ``checkpoint``):

- an architecture open_clip knows (``ViT-B-32``) and a pretrained tag (``laion2b_s34b_b79k``): the tag's weights
  file is fetched by open_clip's own download function into its cache (the Hugging Face cache, or open_clip's
  for URL-only tags), at the pinned Hub commit when ``revision`` is set; the tag's preprocessing
  (mean, std, interpolation) is passed on as open_clip passes it;
- an architecture and a weights file (local, or ``hf://OWNER/REPO/FILE`` through the project's checksum lock);
- ``hf-hub:ORG/REPO`` (open_clip_config.json and the weights of a Hub repository, fetched at ``revision``) or
  ``local-dir:FOLDER`` (the same two files in a folder, as ``hnclip export --format open_clip`` writes them).

Whatever the route, the weights file open_clip loads is hashed: against ``sha256`` when pinned, and recorded in
the checksum lock beside the other pinned weights (``resources/checkpoints/<name>/hnclip-checksums.json``) for
Hub files, so a file that changes later stops the run. ``HF_HUB_CACHE`` and ``HF_HUB_OFFLINE`` are honoured as
everywhere in hnclip (a pre-populated cache works without network).

Then the model is checked: open_clip's plain ``CLIP`` class (no timm or Hugging Face tower, no CoCa), a config
:func:`hnclip.models.registry.check_config` accepts, images resized the shorter side first (``resize_mode``
shortest) with an interpolation our stores have, and open_clip's own tokenizer for it giving CLIP's BPE ids; a
probe (seeded pixels, a few captions) through open_clip's ``encode_image``/``encode_text`` and ours must agree
within 1e-4, or the conversion is refused.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
from pathlib import Path

import torch

from hnclip import paths

from .checkpoints import dual_encoder_from_openai_state
from .dual_encoder import DualEncoder
from .open_clip_import import open_clip_with_integrations
from .registry import check_config

__all__ = ["OpenClipWeights", "dual_encoder_from_open_clip", "load_open_clip", "resolve_open_clip_weights"]

log = logging.getLogger(__name__)

LOCAL_DIR, HF_HUB = "local-dir:", "hf-hub:"
_CONFIG_FILE = "open_clip_config.json"
_PREPROCESS_KEYS = ("mean", "std", "interpolation", "resize_mode")
_COMMIT = re.compile(r"/snapshots/([0-9a-f]{40})/")


class OpenClipWeights:
    """Where one open_clip model comes from: the ``create_model_and_transforms`` arguments that load exactly the
    checked weights file, its architecture config, and what to record about it."""

    def __init__(self, model_name: str, pretrained: str | None, weights: Path, config: dict,
                 preprocess: dict | None, source: str, revision: str | None, tokenizer_name: str):
        self.model_name, self.pretrained, self.weights = model_name, pretrained, weights
        self.config, self.preprocess, self.source = config, preprocess, source
        self.revision, self.tokenizer_name = revision, tokenizer_name


def _commit_of(path: Path) -> str | None:
    match = _COMMIT.search(str(path))
    return match.group(1) if match else None


def _lock(path: Path, key: str, source: str, sha256: str | None, revision: str | None, lock_dir) -> None:
    """Hash ``path`` against the pin and the checksum lock of ``lock_dir`` (a refusal names both hashes)."""
    from hnclip.data.checksum_lock import ChecksumLock
    from hnclip.data.download import LOCK_FILE

    folder = Path(lock_dir) / re.sub(r"[^A-Za-z0-9._-]", "--", key)
    folder.mkdir(parents=True, exist_ok=True)
    ChecksumLock(folder / LOCK_FILE).check(key, path, source, sha256.lower() if sha256 else None, revision)


def _check_local(path: Path, sha256: str | None) -> None:
    from hnclip.data.weights import fetch_weights

    fetch_weights(str(path), None, sha256=sha256)  # a local file: checked against the pin, never copied


def resolve_open_clip_weights(model: str, checkpoint: str | None, *, revision: str | None = None,
                              sha256: str | None = None, download_dir=paths.WEIGHTS_DIR,
                              cache_dir: str | None = None) -> OpenClipWeights:
    """The weights ``model`` + ``checkpoint`` name, fetched by open_clip's own functions and checked (module
    docstring). Errors name the value that is wrong."""
    open_clip = open_clip_with_integrations()
    from open_clip.pretrained import get_pretrained_cfg

    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE") or None  # read at call time, as hnclip's Hub reads
    if model.startswith(LOCAL_DIR):
        return _local_dir_weights(model, checkpoint, revision, sha256)
    if model.startswith(HF_HUB):
        return _hub_repo_weights(model, checkpoint, revision, sha256, download_dir, cache_dir)
    config = open_clip.get_model_config(model)
    if config is None:
        raise ValueError(f"{model!r} is not an architecture open_clip knows (open_clip.list_models()), nor "
                         "hf-hub:ORG/REPO or local-dir:FOLDER")
    if not checkpoint:
        raise ValueError(f"{model}: no checkpoint (a pretrained tag such as "
                         f"{', '.join(open_clip.list_pretrained_tags_by_model(model)[:3]) or 'none known'}, or a "
                         "weights file): a random open_clip model is not a backbone to start from")
    tag = get_pretrained_cfg(model, checkpoint)
    if tag:
        return _tagged_weights(model, checkpoint, tag, config, revision, sha256, download_dir, cache_dir)
    from hnclip.data.weights import fetch_weights

    if not str(checkpoint).startswith("hf://") and not Path(checkpoint).expanduser().is_file():
        tags = open_clip.list_pretrained_tags_by_model(model)
        raise FileNotFoundError(f"{model}: checkpoint {checkpoint!r} is neither one of open_clip's tags for it "
                                f"({', '.join(tags) or 'none'}) nor an existing weights file")
    weights = Path(fetch_weights(checkpoint, download_dir, revision=revision, sha256=sha256))
    return OpenClipWeights(model, str(weights), weights, config, None, f"{model} {checkpoint}", revision, model)


def _local_dir_weights(model: str, checkpoint, revision, sha256) -> OpenClipWeights:
    """A ``local-dir:FOLDER`` model: the config and the weights file open_clip's local-dir: loader picks there."""
    if checkpoint or revision:
        raise ValueError(f"{model}: a local-dir: model takes its weights from the folder; leave checkpoint and "
                         "revision unset")
    folder = Path(model[len(LOCAL_DIR):]).expanduser()
    config_path = folder / _CONFIG_FILE
    if not config_path.is_file():
        raise FileNotFoundError(f"{model}: {config_path} does not exist (an open_clip local-dir: folder holds "
                                f"{_CONFIG_FILE} and the weights)")
    from open_clip.factory import _find_checkpoint_in_dir  # the file open_clip's local-dir: loader picks

    found = _find_checkpoint_in_dir(folder)
    if found is None:
        raise FileNotFoundError(f"{model}: no weights file (*.safetensors, *.bin, *.pth) in {folder}")
    _check_local(Path(found), sha256)
    config = json.loads(config_path.read_text())
    return OpenClipWeights(model, None, Path(found), config.get("model_cfg", {}), None, model, None, model)


def _hub_repo_weights(model: str, checkpoint, revision, sha256, download_dir, cache_dir) -> OpenClipWeights:
    """An ``hf-hub:ORG/REPO`` model: its config and weights from the Hub, locked, staged as a local-dir: folder."""
    from open_clip.pretrained import download_pretrained_from_hf

    if checkpoint:
        raise ValueError(f"{model}: an hf-hub: model takes its weights from the repository; leave checkpoint unset")
    repo = model[len(HF_HUB):]
    config_path = Path(download_pretrained_from_hf(repo, filename=_CONFIG_FILE, revision=revision,
                                                   cache_dir=cache_dir))
    weights = Path(download_pretrained_from_hf(repo, revision=revision, cache_dir=cache_dir))
    commit = _commit_of(weights)
    _lock(weights, f"open_clip--{repo}", f"hf://models/{repo}@{commit or 'unknown'}/{weights.name}",
          sha256, commit, download_dir)
    # open_clip's local-dir: loader reads exactly these two files (the snapshot may hold other weights)
    staging = Path(tempfile.mkdtemp(prefix="hnclip-open-clip-"))
    (staging / _CONFIG_FILE).symlink_to(config_path.resolve())
    (staging / weights.name).symlink_to(weights.resolve())
    config = json.loads(config_path.read_text())
    return OpenClipWeights(LOCAL_DIR + str(staging), None, weights, config.get("model_cfg", {}), None,
                           f"{model}@{commit}" if commit else model, commit, LOCAL_DIR + str(staging))


def _tagged_weights(model: str, checkpoint: str, tag: dict, config: dict, revision, sha256, download_dir,
                    cache_dir) -> OpenClipWeights:
    """An architecture with one of open_clip's pretrained tags: the weights its tag names (Hub file or URL), locked."""
    from open_clip.pretrained import download_pretrained_from_hf, download_pretrained_from_url

    preprocess = {k: tag[k] for k in _PREPROCESS_KEYS if k in tag}
    if tag.get("hf_hub"):
        repo, filename = os.path.split(tag["hf_hub"])
        weights = Path(download_pretrained_from_hf(repo, filename=filename or None, revision=revision,
                                                   cache_dir=cache_dir))
        commit = _commit_of(weights)
        source = f"hf://models/{repo}@{commit or 'unknown'}/{weights.name}"
    elif tag.get("url"):
        if revision:
            raise ValueError(f"{model} {checkpoint}: open_clip fetches this tag from a URL ({tag['url']}); a "
                             "Hub revision cannot pin it (pin its sha256)")
        weights, commit, source = Path(download_pretrained_from_url(tag["url"], cache_dir=cache_dir)), None, tag["url"]
    else:
        raise ValueError(f"{model} {checkpoint}: open_clip's tag names no hf_hub or url to fetch")
    _lock(weights, f"open_clip--{model}--{checkpoint}", source, sha256, commit, download_dir)
    return OpenClipWeights(model, str(weights), weights, config, preprocess, f"{model} {checkpoint} ({source})",
                           commit, model)


def dual_encoder_from_open_clip(oc_model, config: dict, tokenizer, where: str, name: str | None = None,
                                frozen_positions: int = 0) -> DualEncoder:
    """The DualEncoder computing what ``oc_model`` (open_clip's ``CLIP`` built from ``config``) computes, its
    preprocessing (``oc_model.visual.preprocess_cfg``) and tokenizer (checked to be CLIP's BPE) recorded."""
    from open_clip.model import CLIP
    from open_clip.tokenizer import SimpleTokenizer

    from .from_transformers import PROBE_CAPTIONS
    from .tokenizer import tokenize

    if type(oc_model) is not CLIP:
        raise ValueError(f"{where}: open_clip builds it as {type(oc_model).__name__}, not its plain CLIP (a timm or "
                         "Hugging Face tower, or CoCa); only CLIP's own ViT towers are supported")
    config = {k: v for k, v in config.items() if not (k == "custom_text" and not v)}
    check_config({k: v for k, v in config.items() if k != "preprocess_cfg"}, where)
    pre = dict(getattr(oc_model.visual, "preprocess_cfg", {}) or {})
    size = config["vision_cfg"]["image_size"]
    if pre.get("resize_mode", "shortest") != "shortest":
        raise ValueError(f"{where}: its preprocess resize_mode is {pre['resize_mode']!r}; our image stores resize the "
                         "shorter side then centre-crop (shortest)")
    if pre.get("size", size) not in (size, (size, size), [size, size]):
        raise ValueError(f"{where}: its preprocess size {pre['size']!r} differs from its image size {size}")
    if not isinstance(tokenizer, SimpleTokenizer):
        raise ValueError(f"{where}: open_clip tokenizes it with {type(tokenizer).__name__}; only CLIP's BPE "
                         "(open_clip's SimpleTokenizer) is supported")
    theirs, ours = tokenizer(list(PROBE_CAPTIONS), context_length=77), tokenize(list(PROBE_CAPTIONS), 77)
    if not torch.equal(theirs.to(ours.dtype), ours):
        raise ValueError(f"{where}: its tokenizer gives other ids than CLIP's lower-cased BPE on the probe captions "
                         "(another clean or reduction setting); not supported")
    config = json.loads(json.dumps(config))
    config["preprocess_cfg"] = {"mean": [float(v) for v in pre.get("mean", ())] or None,
                                "std": [float(v) for v in pre.get("std", ())] or None,
                                "interpolation": pre.get("interpolation", "bicubic")}
    config["preprocess_cfg"] = {k: v for k, v in config["preprocess_cfg"].items() if v is not None}
    state = {k: v for k, v in oc_model.state_dict().items() if k != "attn_mask"}  # open_clip names: OpenAI's
    model = dual_encoder_from_openai_state(config, state, frozen_positions, where, name=name, tokenizer="clip")
    _verify(model, oc_model, where)
    return model


@torch.no_grad()
def _verify(model: DualEncoder, oc_model, where: str) -> None:
    from .from_transformers import PROBE_CAPTIONS, PROBE_TOLERANCE
    from .tokenizer import tokenize

    oc_model.eval()
    model.eval()
    pixels = torch.randn(2, 3, *model.image_size, generator=torch.Generator().manual_seed(0))
    tokens = tokenize(list(PROBE_CAPTIONS), model.context_length)
    diff = max(float((oc_model.encode_image(pixels, normalize=True) - model.encode_image(pixels)).abs().max()),
               float((oc_model.encode_text(tokens, normalize=True) - model.encode_text(tokens)).abs().max()))
    if not diff <= PROBE_TOLERANCE:
        raise ValueError(f"{where}: the converted model's features differ from open_clip's by {diff:.3g} "
                         f"(> {PROBE_TOLERANCE}) on the probe: open_clip computes something the conversion does not "
                         "reproduce")


def load_open_clip(model: str, checkpoint: str | None = None, *, revision: str | None = None,
                   sha256: str | None = None, download_dir=paths.WEIGHTS_DIR,
                   cache_dir: str | None = None) -> tuple[DualEncoder, OpenClipWeights]:
    """``model`` + ``checkpoint`` (module docstring) through ``open_clip.create_model_and_transforms``, converted;
    with where its weights came from."""
    open_clip = open_clip_with_integrations()

    cache_dir = cache_dir or os.environ.get("HF_HUB_CACHE") or None
    found = resolve_open_clip_weights(model, checkpoint, revision=revision, sha256=sha256,
                                      download_dir=download_dir, cache_dir=cache_dir)
    pre = found.preprocess or {}
    oc_model, _, _ = open_clip.create_model_and_transforms(
        found.model_name, pretrained=found.pretrained, image_mean=pre.get("mean"), image_std=pre.get("std"),
        image_interpolation=pre.get("interpolation"), image_resize_mode=pre.get("resize_mode"), cache_dir=cache_dir,
        weights_only=True)
    tokenizer = open_clip.get_tokenizer(found.tokenizer_name)
    name = model if not checkpoint or model.startswith((LOCAL_DIR, HF_HUB)) else f"{model} {checkpoint}"
    log.info("open_clip %s: weights %s", found.source, found.weights)
    return dual_encoder_from_open_clip(oc_model, found.config, tokenizer, found.source, name=name), found
