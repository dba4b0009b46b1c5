"""safetensors files: the same bytes for the same tensors in every process, and read errors naming the file.

Why the header is rewritten: safetensors keeps a file's ``__metadata__`` in a Rust ``HashMap``, whose order
is seeded per process, so two saves of one model with two or more metadata keys (``framework.safetensors``:
format and framework) gave two sha256 in two processes, and the model cards and provenance that record
checksums differed for the same model. :func:`save_weights` lets safetensors write the file, then writes
its header again with the metadata keys sorted and the tensor entries in the order of their bytes, padded
with spaces to the header's length as safetensors pads it: the tensors' bytes are never touched.

Why loads are wrapped: safetensors' own errors (``SafetensorError: ... incomplete metadata``) do not say
which file; a truncated or foreign weights file given to ``hnclip export`` or ``hnclip evaluate`` is named.
The same holds for torch's ``.pt``/``.pth`` files (:func:`load_torch_weights`): torch's refusal of a pickle
ends in several lines of advice, one of them to load it with ``weights_only=False`` (running its code),
and a job's log shows its last line, which named neither the file nor the refusal.
"""

from __future__ import annotations

import json
import os
import pickle
import re
import struct
from pathlib import Path

__all__ = ["WeightsFileError", "canonical_header", "load_torch_weights", "load_weights", "save_weights"]

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


def load_torch_weights(path, what: str = "torch checkpoint"):
    """``torch.load(path, weights_only=True)`` on the CPU, its errors one line naming the file.

    A pickle that needs code to load (a class, a function: ``GLOBAL print``) is refused and said to be so,
    with the global it asked for; torch's own message, advice included, is not passed on (``from None``).
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such {what} file")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as error:
        found = re.search(r"GLOBAL (\S+)", str(error))
        needs = f" (it needs the Python object {found.group(1)})" if found else ""
        raise WeightsFileError(f"{path}: refused: not a weights-only {what}{needs}; hnclip loads tensors only and "
                               "never runs code from a checkpoint: re-save its state_dict() with torch.save") from None
    except Exception as error:  # a zip or pickle torch cannot read at all: truncated, or not torch's
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise WeightsFileError(f"{path}: not a readable {what} ({first})") from None
