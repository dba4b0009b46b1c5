"""Benchmark files in each publisher's exact layout, written from records: the adapters' test fixtures and
the rehearsal's benchmarks come from these writers, so both exercise one description of each format.

Each ``write_<benchmark>`` writes the layout an adapter reads (archives already unpacked), exactly as
:mod:`hnclip.data`'s module docstrings describe it and as the publisher's files have it. Image pixels
come from an ``image`` callback; its default reproduces the small solid-colour JPEGs the adapter tests
have always used. The ``*_archive`` functions pack such a layout the way the publisher distributes it
(``docci_images.tar.gz``, ``dci.tar.gz``, SA-1B's ``sa_000138.tar``, ``Urban1k.zip``, VG's
``images.zip``/``images2.zip``), byte-for-byte deterministic (fixed member times, gzip without a
timestamp), so a checksum lock written on one run accepts the files of the next.
"""

from __future__ import annotations

import gzip
import io
import json
import tarfile
import zipfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from PIL import Image

__all__ = [
    "DCI_MASK_DATA",
    "jpeg_bytes",
    "long_dci_csv",
    "sa1b_archive",
    "tar_archive",
    "tree_members",
    "write_dci",
    "write_docci",
    "write_goal_split",
    "write_karpathy",
    "write_urban1k",
    "write_vg",
    "zip_archive",
]

ImageFor = Callable[[object], Image.Image]
_FIXED_TIME = 1_700_000_000  # member mtime in archives: any constant keeps their bytes reproducible
_ZIP_TIME = (2023, 11, 14, 22, 13, 20)


def jpeg_bytes(image: Image.Image, quality: int = 90) -> bytes:
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


def _save_jpeg(image: Image.Image, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jpeg_bytes(image))


# --------------------------------------------------------------------------------------------- DOCCI
def write_docci(root, records: list[dict], *, lines: list[str] | None = None,
                image: ImageFor | None = None) -> Path:
    """``docci_descriptions.jsonlines`` (one JSON object per line, or the raw ``lines``) + ``images/``.

    ``image(i)`` draws the image of ``records[i]`` (default: a 12 x 8 solid colour).
    """
    root = Path(root)
    (root / "images").mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines if lines is not None else [json.dumps(r) for r in records]) + "\n"
    (root / "docci_descriptions.jsonlines").write_text(text, encoding="utf-8")
    image = image or (lambda i: Image.new("RGB", (12, 8), (20 * i, 100, 50)))
    for i, record in enumerate(records):
        _save_jpeg(image(i), root / "images" / record["image_file"])
    return root


# ----------------------------------------------------------------------------------------------- DCI
# one mask entry in DCI's annotation schema; the adapters never read it, the files always carry it
DCI_MASK_DATA = {"0": {"idx": 0, "label": "x", "caption": "y", "parent": -1, "requirements": [],
                       "mask_quality": 0}}


def write_dci(root, annotations: Mapping[str, dict], *, image: ImageFor | None = None) -> Path:
    """``densely_captioned_images/{annotations/<key>.json, photos/<image>, splits.json}``.

    ``annotations``: file name -> ``{"image", "short_caption", "extra_caption"}`` (missing fields stay
    missing, for tests of malformed files); each gets DCI's ``mask_data``, ``mask_keys`` and
    ``summaries``. ``image(i)`` draws the photo of the i-th annotation (default 10 x 10 solid colour).
    """
    base = Path(root) / "densely_captioned_images"
    (base / "annotations").mkdir(parents=True, exist_ok=True)
    (base / "photos").mkdir(exist_ok=True)
    (base / "splits.json").write_text(json.dumps({"train": [], "valid": [], "test": list(annotations)}))
    image = image or (lambda i: Image.new("RGB", (10, 10), (i * 60, 0, 0)))
    for i, (name, record) in enumerate(annotations.items()):
        full = {**record, "mask_data": DCI_MASK_DATA, "mask_keys": ["0"], "summaries": {"base": ["short"]}}
        (base / "annotations" / name).write_text(json.dumps(full), encoding="utf-8")
        if "image" in record:
            _save_jpeg(image(i), base / "photos" / record["image"])
    return Path(root)


def write_goal_split(path, records: list) -> Path:
    """GOAL's ``datasets/DCI_test.json``: a JSON list of ``{"filename", "caption"}``, indented by 4 as published."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(records, indent=4), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ Long-DCI
def long_dci_csv(rows: list[tuple[str, str]]) -> bytes:
    """The bytes of ``dci_long.csv`` for ``rows`` (what the Hub dataset holds)."""
    import pandas as pd

    return pd.DataFrame({"filepath": [r[0] for r in rows], "title": [r[1] for r in rows]}).to_csv(
        index=False, sep="\t").encode("utf-8")


# ------------------------------------------------------------------------------------------ Urban-1K
def write_urban1k(root, captions: Mapping[str, str], *, image: ImageFor | None = None) -> Path:
    """``Urban1k/image/<n>.jpg`` and ``Urban1k/caption/<n>.txt`` (the zip's layout); ``image(stem)``."""
    base = Path(root) / "Urban1k"
    (base / "image").mkdir(parents=True, exist_ok=True)
    (base / "caption").mkdir(exist_ok=True)
    image = image or (lambda stem: Image.new("RGB", (8, 8), (int(stem) * 20, 0, 90)))
    for stem, text in captions.items():
        (base / "caption" / f"{stem}.txt").write_text(text, encoding="utf-8")
        _save_jpeg(image(stem), base / "image" / f"{stem}.jpg")
    return Path(root)


# --------------------------------------------------------------------------- Karpathy's COCO / Flickr30k
def write_karpathy(root, dataset: str, images: list[dict], *, image_dir: str | None = None,
                   image: ImageFor | None = None) -> Path:
    """Karpathy's ``dataset_<dataset>.json`` (``{"images": images, "dataset": dataset}``) and each record's
    JPEG at ``<filepath>/<filename>`` (COCO's records) or ``<image_dir>/<filename>`` (Flickr30k's, which
    have no ``filepath``); a record without a ``filename`` gets no image. ``image(i)`` draws the i-th
    record's (default 8 x 8 solid colour)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / f"dataset_{dataset}.json").write_text(json.dumps({"images": images, "dataset": dataset}),
                                                   encoding="utf-8")
    image = image or (lambda i: Image.new("RGB", (8, 8), (i * 37 % 256, 90, 0)))
    for i, record in enumerate(images):
        if "filename" in record:
            folder = record.get("filepath", image_dir)
            _save_jpeg(image(i), root / (folder or ".") / record["filename"])
    return root


# ------------------------------------------------------------------------------------ VG paragraphs
def write_vg(root, paragraphs: list[dict], splits: Mapping[str, list], folders: Mapping[int, str], *,
             image: ImageFor | None = None) -> Path:
    """im2p's ``paragraphs_v1.json`` and ``{train,val,test}_split.json`` + ``VG_100K*/<image_id>.jpg``.

    ``folders``: image_id -> the folder its JPEG is written to (which may differ from its ``url``'s);
    ``image(image_id)`` draws it (default 8 x 8 solid colour).
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    (root / "paragraphs_v1.json").write_text(json.dumps(paragraphs))
    for name, ids in splits.items():
        (root / f"{name}_split.json").write_text(json.dumps(ids))
    image = image or (lambda image_id: Image.new("RGB", (8, 8), (image_id % 256, 0, 0)))
    for image_id, folder in folders.items():
        _save_jpeg(image(image_id), root / folder / f"{image_id}.jpg")
    return root


# -------------------------------------------------------------------------------------------- archives
def tar_archive(files: Iterable[tuple[str, bytes]], *, gzipped: bool) -> bytes:
    """A tar (gzip-compressed if asked) of ``(member name, bytes)``, reproducible byte for byte."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in files:
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), _FIXED_TIME, 0o644
            tar.addfile(info, io.BytesIO(data))
    if not gzipped:
        return buf.getvalue()
    return gzip.compress(buf.getvalue(), compresslevel=6, mtime=0)


def zip_archive(files: Iterable[tuple[str, bytes]]) -> bytes:
    """A zip of ``(member name, bytes)`` with fixed member times, reproducible byte for byte."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(zipfile.ZipInfo(name, date_time=_ZIP_TIME), data)
    return buf.getvalue()


def tree_members(root, prefix: str = "") -> list[tuple[str, bytes]]:
    """``(prefix + relative posix path, bytes)`` of every file under ``root``, sorted."""
    root = Path(root)
    return [(prefix + p.relative_to(root).as_posix(), p.read_bytes())
            for p in sorted(root.rglob("*")) if p.is_file()]


def sa1b_archive(photos: Mapping[str, bytes]) -> bytes:
    """SA-1B's ``sa_000138.tar``: ``./sa_<id>.jpg`` with each image's ``./sa_<id>.json`` annotation beside it
    (only the JPEGs are unpacked by the DCI and Long-DCI sources)."""
    members = []
    for name, data in sorted(photos.items()):
        stem = name.rsplit(".", 1)[0]
        members.append((f"./{name}", data))
        members.append((f"./{stem}.json", json.dumps({"image": {"file_name": name}, "annotations": []}).encode()))
    return tar_archive(members, gzipped=False)
