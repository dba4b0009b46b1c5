"""sha256 of a file, the two folder fingerprints a training run records, and a saved model's weight digest: the
one place files are hashed.

The two fingerprints hash different bytes (a product's relative paths and file digests, recursively; the
initial model's top-level file names and raw bytes) and stay that way on purpose: both go into a run's
``data_fingerprint``, which every checkpoint and summary records, so changing either would make every
unfinished run refuse its own checkpoint.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from hnclip import paths

__all__ = ["fingerprint_files", "fingerprint_tree", "sha256_file", "weights_digest"]

CHUNK = 1 << 20
_PROGRESS_FROM = 256 * CHUNK  # files this large show a progress bar when asked (a 7 GB archive: tens of seconds)


def sha256_file(path, *, progress: bool = False) -> str:
    """Hex sha256 of a file's bytes, read in 1 MiB blocks; ``progress``: a tqdm bar for files over 256 MiB."""
    path = Path(path)
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        if progress:
            from tqdm import tqdm

            size = path.stat().st_size
            with tqdm(total=size, unit="B", unit_scale=True, desc=f"sha256 {path.name}",
                      disable=size < _PROGRESS_FROM) as bar:
                while block := handle.read(CHUNK):
                    digest.update(block)
                    bar.update(len(block))
        else:
            while block := handle.read(CHUNK):
                digest.update(block)
    return digest.hexdigest()


def fingerprint_tree(path) -> str:
    """sha256 of a file's bytes, or of a folder's relative paths and file digests (recursive, sorted)."""
    path = Path(path)
    if path.is_file():
        return sha256_file(path)
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(f"{item.relative_to(path).as_posix()}\0{sha256_file(item)}\n".encode())
    return digest.hexdigest()


def fingerprint_files(directory) -> str:
    """sha256 over the names and bytes of a folder's files (the initial model: ~1.7 GB for ViT-L, ~2 s)."""
    digest = hashlib.sha256()
    for path in sorted(Path(directory).iterdir()):
        if path.is_file():
            digest.update(path.name.encode() + b"\0")
            with path.open("rb") as handle:
                while block := handle.read(CHUNK):
                    digest.update(block)
    return digest.hexdigest()


def weights_digest(model_dir) -> str:
    """sha256 (first 16 hex digits) over a saved model's tensors (``model.safetensors``) in name order: each
    tensor's name, dtype and shape on a line, then its bytes. File metadata (a writer's version, key order)
    does not enter it, so two machines' backbones compare by their weights alone (the regime records it;
    benchmarks/kernel_hash.py --weights prints it)."""
    import torch
    from safetensors.torch import load_file  # torch's loader: bfloat16 weights too (numpy has no such dtype)

    path = Path(model_dir) / "model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no model.safetensors in {model_dir} (a saved model's folder, e.g. "
                                f"{paths.BACKBONE_MODEL})")
    tensors = load_file(str(path))
    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        dtype = str(tensor.dtype).removeprefix("torch.")  # numpy's names: float32, int64
        digest.update(f"{name} {dtype} {tuple(tensor.shape)}\n".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:16]
