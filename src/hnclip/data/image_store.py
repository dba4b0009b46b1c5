"""Decode and resize every image once, into one uint8 array that training reads without decoding.

DOCCI's and DCI's JPEGs are several megapixels; decoding one costs ~50-100 ms, i.e. more than a
ViT-L forward per image, and a run reads every image once per epoch (x ~150 runs in the paper grid).
The store applies open_clip's evaluation geometry once (shorter side to ``image_size``, bicubic,
centre crop) and keeps the result as ``images.npy`` (uint8 [N, H, W, 3]) next to ``index.json``.
Readers memory-map it: a batch is a slice copy.

A damaged store is found and named, at two costs. Every open compares the file's size with what its
``.npy`` header describes (a stat and a 128-byte read), so a truncated or padded file fails naming the path
instead of with numpy's bare "mmap length is greater than file size". ``build_store`` records the file's
SHA-256 (hashed row by row as it is written, no extra read) in ``index.json``; :meth:`ImageStore.verify`
re-hashes the file and compares, one sequential read (~1 s per GB on a loaded 2-core CPU: 1.5 s for
DOCCI's training store at 224 px). ``hnclip train`` and ``hnclip evaluate`` verify the stores they read
once per job; other readers (DataLoader workers, the gallery) rely on the size check.

One deliberate difference from open_clip's transform: images are converted to RGB *before* the
resize (open_clip converts after). For RGB and greyscale images the two orders give identical
pixels; for palette and RGBA images converting first avoids PIL's nearest-neighbour resize of
palettes and its alpha-premultiplied resize.
"""

from __future__ import annotations

import hashlib
import json
import logging
import multiprocessing
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.lib.format import open_memmap
from PIL import Image
from tqdm import tqdm

from hnclip.hashing import sha256_file

__all__ = ["ImageStore", "build_store", "manifest_digest", "rebuild_hint", "resize_center_crop",
           "to_model_input", "write_store"]

log = logging.getLogger(__name__)

IMAGES_FILE = "images.npy"
INDEX_FILE = "index.json"
RESAMPLE = {"bicubic": Image.Resampling.BICUBIC, "bilinear": Image.Resampling.BILINEAR}
_FLUSH_EVERY = 1024  # rows between msyncs, so dirty pages are written back while the build runs


def resize_center_crop(image: Image.Image, image_size: int, resample: str = "bicubic") -> Image.Image:
    """open_clip's eval geometry: torchvision ``Resize(image_size)`` then ``CenterCrop(image_size)``.

    Reproduced operation by operation: the long side is truncated with ``int`` (not rounded), an image
    whose shorter side already equals ``image_size`` is not resampled, and the crop offset uses
    Python's ``round`` (half to even).
    """
    width, height = image.size
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(image_size * long / short)
    new_w, new_h = (image_size, new_long) if width <= height else (new_long, image_size)
    if (new_w, new_h) != (width, height):
        image = image.resize((new_w, new_h), RESAMPLE[resample])
    top = int(round((new_h - image_size) / 2.0))
    left = int(round((new_w - image_size) / 2.0))
    return image.crop((left, top, left + image_size, top + image_size))


def _load_image(task: tuple[str, str, int, str]) -> np.ndarray:
    path, image_id, image_size, resample = task
    if not os.path.isfile(path):
        raise FileNotFoundError(f"image of image_id {image_id!r} does not exist: {path}")
    try:
        with Image.open(path) as image:
            image = image.convert("RGB")  # forces the full decode, so truncated files fail here
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as e:
        raise ValueError(f"cannot decode image {path} (image_id {image_id!r}): {e}") from e
    return np.asarray(resize_center_crop(image, image_size, resample), dtype=np.uint8)


def manifest_digest(manifest: pd.DataFrame) -> str:
    """SHA-256 of the (image_id, image_path) rows: what the store's content depends on, captions excluded."""
    digest = hashlib.sha256()
    for image_id, image_path in zip(manifest["image_id"], manifest["image_path"], strict=True):
        digest.update(f"{image_id}\t{image_path}\n".encode())
    return digest.hexdigest()


def build_store(manifest: pd.DataFrame, out_dir, image_size: int, resample: str = "bicubic",
                workers: int = 1) -> None:
    """Write ``out_dir/images.npy`` (uint8 [N, image_size, image_size, 3]) and ``out_dir/index.json``.

    Rows follow the manifest, one per distinct ``image_id`` (first appearance): a test split listing an
    image once per caption (your own captions) stores it once; the rows of one id must name one image.
    Memory stays flat in N: images are written one at a time into a
    memory-mapped file. ``workers`` > 1 decodes in that many spawned processes (decoding dominates);
    rows still land in manifest order. The array is written under a temporary name and ``index.json``
    last, so a store with an index is always complete.
    """
    for column in ("image_id", "image_path"):
        if column not in manifest.columns:
            raise ValueError(f"manifest for the image store lacks column {column!r}")
    if resample not in RESAMPLE:
        raise ValueError(f"resample must be one of {sorted(RESAMPLE)}, got {resample!r}")
    if not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive int, got {image_size!r}")
    if len(manifest) == 0:
        raise ValueError("manifest for the image store has no rows")
    repeated = manifest["image_id"].duplicated()
    if repeated.any():
        paths = manifest.groupby("image_id", sort=False)["image_path"].nunique()
        if (paths > 1).any():
            raise ValueError(f"manifest for the image store lists image_id {paths.index[paths > 1][0]!r} with "
                             "several image paths")
        manifest = manifest[~repeated]
    image_ids = [str(i) for i in manifest["image_id"]]

    tasks = [(str(p), i, image_size, resample) for i, p in zip(image_ids, manifest["image_path"], strict=True)]
    if workers > 1:
        # spawn, not fork: the caller may hold torch/OpenMP threads, which fork can deadlock.
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            write_store(image_ids, pool.imap(_load_image, tasks, chunksize=16), out_dir, image_size, resample,
                        manifest_digest(manifest))
    else:
        write_store(image_ids, map(_load_image, tasks), out_dir, image_size, resample, manifest_digest(manifest))


def write_store(image_ids: Sequence[str], arrays, out_dir, image_size: int, resample: str = "bicubic",
                manifest_sha256: str = "") -> None:
    """Write a store from ``arrays`` (uint8 [image_size, image_size, 3] each, in ``image_ids`` order).

    For images that exist only in memory (the rendered pretraining pool); :func:`build_store` decodes
    files into it. The array is written under a temporary name and ``index.json`` last, so a store
    with an index is always complete; its size and sha256 go into the index for :meth:`ImageStore.verify`.
    """
    image_ids = [str(i) for i in image_ids]
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_images = out_dir / (IMAGES_FILE + ".tmp")
    images = open_memmap(tmp_images, mode="w+", dtype=np.uint8, shape=(len(image_ids), image_size, image_size, 3))
    digest = hashlib.sha256()
    with open(tmp_images, "rb") as handle:  # the header open_memmap wrote; the rows follow it in order
        digest.update(handle.read(images.offset))
    try:
        written = _fill(images, arrays, digest)
        if written != len(image_ids):
            raise ValueError(f"image store {out_dir}: got {written} images for {len(image_ids)} image_ids")
        images.flush()
    except BaseException:
        del images
        tmp_images.unlink(missing_ok=True)
        raise
    del images  # closes the map before the rename
    os.replace(tmp_images, out_dir / IMAGES_FILE)
    index = {"image_ids": image_ids, "image_size": image_size, "count": len(image_ids), "resample": resample,
             "manifest_sha256": manifest_sha256, "images_sha256": digest.hexdigest(),
             "images_bytes": (out_dir / IMAGES_FILE).stat().st_size}
    tmp_index = out_dir / (INDEX_FILE + ".tmp")
    tmp_index.write_text(json.dumps(index, sort_keys=True), encoding="utf-8")
    os.replace(tmp_index, out_dir / INDEX_FILE)


def _fill(images: np.ndarray, arrays, digest) -> int:
    """Write ``arrays`` row by row, hashing the bytes as stored; returns how many there were."""
    row = -1
    for row, array in enumerate(tqdm(arrays, total=len(images), desc="image store", unit="img")):
        if row >= len(images):
            raise ValueError(f"more images than the store's {len(images)} rows")
        images[row] = array
        digest.update(images[row].tobytes())  # the bytes as stored, in file order
        if (row + 1) % _FLUSH_EVERY == 0:
            images.flush()
    return row + 1


def rebuild_hint(root) -> str:
    """What to do about a damaged store: it is never repaired in place (its rows could not be trusted),
    and Snakemake rebuilds a missing one, with every job that read it, on the next run."""
    root = Path(root)
    return (f"delete the store folder and rerun the workflow, which rebuilds it: rm -rf {root} && snakemake "
            "--cores all (with the same --configfile/--config as before; outside the workflow: rerun the "
            f"`hnclip prepare` that wrote {root})")


def _npy_layout(path: Path) -> tuple[tuple[int, ...], np.dtype, int]:
    """(shape, dtype, header bytes) from a .npy file's header, without mapping its data."""
    from numpy.lib import format as npy

    try:
        with open(path, "rb") as handle:
            version = npy.read_magic(handle)
            read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
            shape, _, dtype = read_header(handle)
            return tuple(shape), dtype, handle.tell()
    except FileNotFoundError:
        raise FileNotFoundError(f"image store file {path} does not exist (store incomplete); "
                                f"{rebuild_hint(path.parent)}") from None
    except (ValueError, OSError, SyntaxError) as e:
        raise ValueError(f"image store file {path} has no valid .npy header ({e}); {rebuild_hint(path.parent)}") from e


class ImageStore:
    """Read side of a store built by :func:`build_store`; pickles by path, so DataLoader workers reopen it."""

    def __init__(self, out_dir):
        self.root = Path(out_dir)
        index_path = self.root / INDEX_FILE
        if not index_path.is_file():
            raise FileNotFoundError(f"image store {self.root} has no {INDEX_FILE} (incomplete or never built); "
                                    f"{rebuild_hint(self.root)}")
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            self.image_ids: list[str] = [str(i) for i in index["image_ids"]]
            self.image_size = int(index["image_size"])
            self.manifest_sha256 = str(index.get("manifest_sha256", ""))
            # how the rows were resized (index.json's resample; every store is bicubic unless built otherwise)
            self.resample = str(index.get("resample", "bicubic"))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"image store index {index_path} is malformed: {e!r}; {rebuild_hint(self.root)}") from e
        self._rows = {image_id: row for row, image_id in enumerate(self.image_ids)}
        if len(self._rows) != len(self.image_ids):
            raise ValueError(f"image store index {index_path} repeats an image_id")
        self.images_sha256 = index.get("images_sha256")
        self._images = None
        path = self.root / IMAGES_FILE
        expected = (len(self.image_ids), self.image_size, self.image_size, 3)
        shape, dtype, header = _npy_layout(path)
        if shape != expected or dtype != np.uint8:
            raise ValueError(f"{path} holds {dtype} {shape}, but {index_path} describes uint8 {expected}; "
                             f"{rebuild_hint(self.root)}")
        size, want = path.stat().st_size, header + int(np.prod(shape))
        if size != want:
            raise ValueError(f"image store file {path} is {'truncated' if size < want else 'too long'}: "
                             f"{size:,} bytes, but its header describes {want:,} ({len(self)} images of "
                             f"{self.image_size}x{self.image_size}x3); {rebuild_hint(self.root)}")

    def verify(self) -> bool:
        """Re-hash ``images.npy`` against the SHA-256 recorded at build time; a mismatch raises naming the
        file and both hashes. Returns False (checking the size only) for a store built before hashes were
        recorded."""
        path = self.root / IMAGES_FILE
        if not self.images_sha256:
            log.warning("image store %s records no checksum (built by an older version): size checked only", path)
            return False
        actual = sha256_file(path)
        if actual != self.images_sha256:
            raise ValueError(f"image store file {path} is corrupted: sha256 {actual}, but {self.root / INDEX_FILE} "
                             f"recorded {self.images_sha256} when it was built; {rebuild_hint(self.root)}")
        return True

    @property
    def images(self) -> np.ndarray:
        """The read-only memory map (opened on first use in each process)."""
        if self._images is None:
            self._images = np.load(self.root / IMAGES_FILE, mmap_mode="r")
        return self._images

    def __getstate__(self):
        # A pickled np.memmap carries its whole content; send the path and reopen on the other side.
        state = self.__dict__.copy()
        state["_images"] = None
        return state

    def __len__(self) -> int:
        return len(self.image_ids)

    def row(self, image_id: str) -> int:
        try:
            return self._rows[image_id]
        except KeyError:
            raise KeyError(f"image_id {image_id!r} is not in the image store {self.root}") from None

    def read(self, rows: Sequence[int]) -> np.ndarray:
        """uint8 [B, H, W, 3] copy of ``rows`` (any order, repeats allowed); no decoding."""
        rows = np.asarray(rows, dtype=np.int64).reshape(-1)
        bad = rows[(rows < 0) | (rows >= len(self))]
        if len(bad):
            raise IndexError(f"row {int(bad[0])} is outside the image store {self.root} (0..{len(self) - 1})")
        return np.ascontiguousarray(self.images[rows])


def to_model_input(batch_uint8: np.ndarray, mean, std, device=None):
    """float32 [B, 3, H, W]: ``(pixels / 255 - mean) / std``, as ToTensor + Normalize compute it.

    With ``device`` the uint8 batch is moved first: a quarter of the float32 transfer.
    """
    import torch  # lazy: spawned store-building workers import this module and never need torch

    if batch_uint8.dtype != np.uint8 or batch_uint8.ndim != 4 or batch_uint8.shape[-1] != 3:
        raise ValueError(f"expected a uint8 [B, H, W, 3] batch, got {batch_uint8.dtype} {batch_uint8.shape}")
    # torch.from_numpy warns on read-only arrays (a raw memmap slice): copy those, and only those.
    writable = batch_uint8.flags.writeable and batch_uint8.flags.c_contiguous
    pixels = torch.from_numpy(batch_uint8 if writable else np.array(batch_uint8, order="C"))
    if device is not None:
        pixels = pixels.to(device, non_blocking=True)
    x = pixels.permute(0, 3, 1, 2).to(torch.float32, memory_format=torch.contiguous_format).div_(255.0)
    mean = torch.as_tensor(mean, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    std = torch.as_tensor(std, dtype=torch.float32, device=x.device).view(1, -1, 1, 1)
    return x.sub_(mean).div_(std)
