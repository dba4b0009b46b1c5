"""From what a config names (``backbone.*``, ``models.<name>.*``) to a model folder: fetched, pinned, converted.

One entry point, :func:`convert_source`, for every format the pipeline starts from or evaluates. What each
format's ``checkpoint`` (and ``model``, ``base``) name is its row's ``description`` in
:mod:`hnclip.checkpoint_formats`, the one place a format is described (the schema's ``source`` texts and
config/README.md are written from it); the loaders live in :mod:`.format_loaders` (Long-CLIP's ``.pt``:
:mod:`.checkpoints`, open_clip: :mod:`.from_open_clip`, transformers: :mod:`.from_transformers`, GOAL and
StructXLIP: :mod:`.publishers`).

Hub files go through the checksum lock (:mod:`hnclip.data.weights`): ``revision`` pins the commit, ``sha256`` the
weights file (a transformers repository: its ``model.safetensors``). ``stretch`` applies Long-CLIP's 77 -> 248
stretch keeping that many rows (:func:`hnclip.models.factory.stretch_model`); the result must have
``context_length`` positions. Beside the model, ``conversion.json`` records what it was made from.

Each format is one row of :mod:`hnclip.checkpoint_formats` (what it needs, whether it stretches, its words);
a new format is a loader and a registration, with no branch here.
"""

from __future__ import annotations

from pathlib import Path

from hnclip import paths
from hnclip.checkpoint_formats import FIELD_HINTS, checkpoint_format, format_names, resolve

__all__ = ["convert_source"]

def convert_source(fmt: str, checkpoint: str | None, out_dir, *, model: str | None = None, base: str | None = None,
                   base_revision: str | None = None, revision: str | None = None, sha256: str | None = None,
                   stretch: int | None = None, context_length: int | None = None,
                   download_dir=paths.WEIGHTS_DIR, cache_dir: str | None = None, key: str = "backbone") -> Path:
    """Convert what ``fmt`` + ``checkpoint`` (+ ``model``, ``base``) name into the model folder ``out_dir``
    (module docstring) with the format's registered loader; ``key`` is the config section named in errors
    (``backbone``, ``models.<name>``)."""
    from hnclip.fileio import write_json_atomic
    from hnclip.hashing import sha256_file
    from hnclip.model_files import CONVERSION_JSON, MODEL_JSON

    from .factory import stretch_model
    from .format_loaders import ConvertRequest
    from .io import save_model

    if fmt not in format_names():
        raise ValueError(f"{key}.source {fmt!r}: not a format to convert; known: {', '.join(format_names())}")
    spec = checkpoint_format(fmt)
    given = {"checkpoint": checkpoint, "model": model, "base": base}
    for field in spec.needs:
        if not given[field]:
            hint = f" ({FIELD_HINTS[field]})" if field in FIELD_HINTS else ""
            raise ValueError(f"{key}.{field}: required for source {fmt}{hint}")
    out_dir = Path(out_dir)
    request = ConvertRequest(fmt, checkpoint, out_dir, model=model, base=base, base_revision=base_revision,
                             revision=revision, sha256=sha256, stretch=stretch, download_dir=download_dir,
                             cache_dir=cache_dir, key=key)
    dual, weights = resolve(spec.loader)(request)
    if dual is not None:
        if stretch is not None:
            dual = stretch_model(dual, keep=stretch)
        if context_length is not None and dual.context_length != context_length:
            hint = (f"set {key}.stretch: true (Long-CLIP's stretch, {dual.context_length} -> 248)"
                    if stretch is None and dual.context_length < context_length else f"set {key}.context_length")
            raise ValueError(f"{key}: the converted model has {dual.context_length} text positions, but "
                             f"{key}.context_length is {context_length}; {hint}")
        save_model(dual, out_dir)
    record = {"format": fmt, "checkpoint": checkpoint, "model": model, "base": base, "revision": revision,
              "base_revision": base_revision, "stretch": stretch,
              "weights_sha256": sha256_file(weights) if weights is not None and Path(weights).is_file() else None,
              "spec_sha256": sha256_file(out_dir / MODEL_JSON)}
    write_json_atomic(out_dir / CONVERSION_JSON, {k: v for k, v in record.items() if v is not None}, sort_keys=True)
    return out_dir
