"""safetensors files: the same bytes for the same tensors in every process, and read errors naming the file.

Why the header is rewritten: safetensors keeps a file's ``__metadata__`` in a Rust ``HashMap``, whose order
is seeded per process, so two saves of one model with two or more metadata keys (``framework.safetensors``:
format and framework) gave two sha256 in two processes, and the model cards and provenance that record
checksums differed for the same model. :func:`save_weights` lets safetensors write the file, then writes
its header again with the metadata keys sorted and the tensor entries in the order of their bytes, padded
with spaces to the header's length as safetensors pads it: the tensors' bytes are never touched.

Why loads are wrapped: safetensors' own errors (``SafetensorError: ... incomplete metadata``) do not say
which file; a truncated or foreign weights file given to ``hnclip export`` or ``hnclip evaluate`` is named.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

__all__ = ["WeightsFileError", "canonical_header", "load_weights", "save_weights"]

_SIZE = struct.Struct("<Q")  # the header's length, little-endian u64, first in the file


class WeightsFileError(ValueError):
    """A weights file that cannot be read as safetensors; the message names it."""


def canonical_header(header: dict) -> bytes:
    """``header`` (a safetensors header, parsed) as compact JSON: ``__metadata__`` first with its keys sorted,
    then the tensors in the order of their data offsets (the order of their bytes in the file)."""
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    ordered = {}
    if header.get("__metadata__"):
        ordered["__metadata__"] = dict(sorted(header["__metadata__"].items()))
    for name in sorted(tensors, key=lambda k: (tuple(tensors[k]["data_offsets"]), k)):
        ordered[name] = tensors[name]
    return json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def save_weights(tensors: dict, path, metadata: dict[str, str] | None = None) -> Path:
    """Write ``tensors`` (name -> torch tensor) to the safetensors file ``path``, atomically, its bytes a
    function of the tensors and ``metadata`` alone (module docstring)."""
    from safetensors.torch import save_file

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        save_file(tensors, str(tmp), metadata=metadata)
        with open(tmp, "r+b") as handle:
            (size,) = _SIZE.unpack(handle.read(_SIZE.size))
            canonical = canonical_header(json.loads(handle.read(size)))
            if len(canonical) <= size:  # the usual case: the same entries in another order
                handle.seek(_SIZE.size)
                handle.write(canonical + b" " * (size - len(canonical)))
            else:  # longer than safetensors' own (another escaping): the data move behind a new header
                data = handle.read()
                padded = canonical + b" " * (-len(canonical) % 8)
                handle.seek(0)
                handle.write(_SIZE.pack(len(padded)) + padded + data)
                handle.truncate()
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def load_weights(path, device: str = "cpu") -> dict:
    """The tensors of the safetensors file ``path``; :class:`WeightsFileError` naming it if it cannot be read
    (truncated, not safetensors), FileNotFoundError if it is missing."""
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"weights file {path} does not exist")
    try:
        return load_file(str(path), device=device)
    except Exception as err:  # safetensors' SafetensorError, or an OSError reading it
        raise WeightsFileError(
            f"{path}: cannot be read as safetensors ({type(err).__name__}: {err}); the file is damaged (a copy "
            f"cut short, a full disk) or not a weights file: write it again (rerun the job that made it)"
        ) from err
