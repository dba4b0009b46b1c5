"""The synthetic benchmark's own "publisher format" written and read: images/, captions.jsonl, README.txt."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from tqdm import tqdm

from hnclip.data.roots import claim_root
from hnclip.data.synthetic.captions import describe_scene, describe_scene_short
from hnclip.data.synthetic.render import render_scene
from hnclip.data.synthetic.scenes import (
    MAX_OBJECTS,
    MIN_OBJECTS,
    PATTERNS,
    Slice,
    _style,
    family_slice,
    iter_scenes,
)

CAPTIONS_FILE = "captions.jsonl"
IMAGES_DIR = "images"
README_FILE = "README.txt"
_README_HEAD = "hnclip synthetic dense-caption benchmark"
FORMAT_VERSION = 3  # 2: near-duplicate clusters (``cluster`` field); 3: val split, narrow slices

# --------------------------------------------------------------------------------------------- files


def generate_synthetic(root, family: str, n_train: int, n_test: int, image_size: int = 128,
                       seed: int = 0, cluster_size: int = 1, max_changes: int = 2, n_val: int = 0,
                       inventory: int = 0, backgrounds: int = 0, objects=None, patterns=None,
                       root_key: str | None = None) -> None:
    """Write a ``family`` benchmark of ``n_train`` + ``n_val`` + ``n_test`` scenes under ``root``.

    ``root_key``: the config key ``root`` came from, named when the folder is refused (hnclip.data.roots).
    ``inventory`` / ``backgrounds`` (0: all), ``objects`` ([min, max]) and ``patterns`` (names) narrow
    the benchmark to a slice of its family (:func:`family_slice`, seeded by ``seed``). Every split has its own scene streams, so adding a
    validation split leaves the training and test scenes as they were.

    Scenes come in clusters of ``cluster_size`` near-duplicates (1: independent scenes), each variant
    with 1..``max_changes`` details changed from its cluster's base (:func:`vary_scene`); a cluster
    stays within its split. Deterministic in (family, counts, image_size, seed, cluster settings);
    scenes are unique across both splits (a repeat, vanishingly rare, is redrawn with its cluster).
    ``captions.jsonl`` is written last, through a temporary name, so an interrupted run never leaves a
    caption file that points at missing images.
    """
    _style(family)
    # n_train may be 0: the shifted family is an evaluation-only transfer target.
    for name, value, least in (("n_train", n_train, 0), ("n_val", n_val, 0), ("n_test", n_test, 1),
                               ("cluster_size", cluster_size, 1), ("max_changes", max_changes, 1)):
        if not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
    if not isinstance(image_size, int) or image_size < 32:
        raise ValueError(f"image_size must be an int >= 32, got {image_size!r}")
    where = family_slice(family, inventory, backgrounds, seed, tuple(objects) if objects else None, patterns)
    # refuse a user's folder before rendering into it (hnclip.data.roots); a root rendered before
    # markers existed is recognised as ours by its README's first line
    root = claim_root(root, f"hnclip fetch --adapter {family}",
                      known=(README_FILE, CAPTIONS_FILE, CAPTIONS_FILE + ".tmp", IMAGES_DIR)
                      if _is_rendered_here(root) else (), key=root_key)
    (root / IMAGES_DIR).mkdir(parents=True, exist_ok=True)
    seen: set[tuple] = set()
    records = []
    with tqdm(total=n_train + n_val + n_test, desc=f"rendering {family}", unit="img") as bar:
        for split, count in (("train", n_train), ("val", n_val), ("test", n_test)):
            for index, cluster, scene in iter_scenes(family, split, count, seed, cluster_size, max_changes, seen,
                                                     where):
                image_id = f"{family}_{split}_{index:06d}"
                render_scene(scene, image_size).save(root / IMAGES_DIR / f"{image_id}.png")
                records.append({
                    "image_id": image_id, "split": split, "family": family, "cluster": f"{split}_{cluster:06d}",
                    "caption": describe_scene(scene), "short_caption": describe_scene_short(scene),
                    "background": scene.background, "objects": [asdict(o) for o in scene.objects],
                })
                bar.update()
    (root / README_FILE).write_text(_readme(family, n_train, n_val, n_test, image_size, seed, cluster_size,
                                            max_changes, where), encoding="utf-8")
    tmp = root / (CAPTIONS_FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, root / CAPTIONS_FILE)


def _is_rendered_here(root) -> bool:
    readme = Path(root) / README_FILE
    try:
        return readme.is_file() and readme.read_text(encoding="utf-8").startswith(_README_HEAD)
    except (OSError, UnicodeDecodeError):
        return False


def read_records(root) -> list[dict]:
    """Every record of a generated benchmark's ``captions.jsonl`` (both splits), in file order."""
    path = Path(root) / CAPTIONS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no {CAPTIONS_FILE} in {root} (generate it with generate_synthetic)")
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _readme(family: str, n_train: int, n_val: int, n_test: int, image_size: int, seed: int, cluster_size: int,
            max_changes: int, where: Slice) -> str:
    kinds = ", ".join(f"{c} {s}" for c, s in where.kinds) if where.kinds else "all of the family's"
    backgrounds = ", ".join(where.backgrounds) if where.backgrounds else "all of the family's"
    return f"""{_README_HEAD} (format version {FORMAT_VERSION})

family: {family}
splits: train {n_train} images, val {n_val} images (for choosing recipes), test {n_test} images
object kinds: {kinds}
backgrounds: {backgrounds}
objects per scene: {"{} to {}".format(*(where.objects or (MIN_OBJECTS, MAX_OBJECTS)))}
fill patterns: {", ".join(where.patterns or PATTERNS)}
image size: {image_size} x {image_size} px, RGB PNG
seed: {seed}
near-duplicate clusters: {cluster_size} scenes each (a base scene and variants with 1 to {max_changes}
  details changed: one object's colour, shape, size, fill pattern or cell); a cluster stays in one split

Files
  images/<image_id>.png   one rendered scene per image
  captions.jsonl          one JSON object per line, one line per image, train lines first:
    image_id       str, unique across splits: <family>_<split>_<index>
    split          "train", "val" or "test"
    family         "{family}"
    cluster        str, the near-duplicate cluster: <split>_<cluster index>
    caption        long caption: every object (size, pattern, colour, shape, grid cell) and a chain of
                   pairwise spatial relations
    short_caption  one sentence (< 20 words): the two largest objects and the background
    background     the background, as named in the caption
    objects        list of {{shape, colour, size, pattern, cell}}; cell 0..8 in reading order of the
                   3x3 grid

Procedurally generated by hnclip.data.synthetic.generate_synthetic; regenerate rather than edit.
Toy-scale data: numbers measured on it are toy-scale results.
"""
