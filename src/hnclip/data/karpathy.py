"""Karpathy's caption splits (Karpathy & Fei-Fei, CVPR 2015): the short-caption retrieval protocol that
the ``coco`` and ``flickr30k`` adapters share.

File parsed (``dataset_coco.json`` / ``dataset_flickr30k.json``, from Karpathy's
``caption_datasets.zip``, https://cs.stanford.edu/people/karpathy/deepimagesent/)::

    {"dataset": "coco",
     "images": [{"filepath": "val2014",                       # COCO only: the image's folder
                 "filename": "COCO_val2014_000000391895.jpg",
                 "split": "test",                             # train | val | test | restval (COCO)
                 "imgid": 0, "cocoid": 391895,                # Flickr30k: no cocoid
                 "sentences": [{"raw": "A man with a red helmet ...", "tokens": [...], "sentid": 0,
                                "imgid": 0}, ...]},
                ...]}

An image is ``root/<filepath>/<filename>`` where the record has a ``filepath`` (COCO: ``val2014/``), else
``root/<image folder>/<filename>`` (Flickr30k: ``flickr30k-images/``, the adapter's ``image_dir``).

Protocol (the one the long-caption papers report for "short" retrieval: COCO 5k and Flickr30k 1k,
R@1/5/10 in both directions): ``test`` = the records whose ``split`` is ``"test"`` in file order
(COCO 5,000 images, Flickr30k 1,000), never COCO's ``restval`` (the 30,504 val2014 images Karpathy moved
to training) nor ``val``. Each image contributes exactly :data:`CAPTIONS_PER_IMAGE` captions, its first
five ``sentences`` in file order, as ``raw`` text stripped of surrounding white space: a few COCO images
carry six or seven sentences, and the usual 25,000-caption COCO test files (VSE++/SCAN's
``testall_caps.txt``, five lines per image) keep five, as does Long-CLIP's own evaluation
(``captions[0:5]`` in its eval/retrieval/coco.py). We could not count those images offline; the number
cut is logged and kept in ``manifest.attrs["extra_sentences_dropped"]``. An image with fewer than five
sentences is an error: the protocol's recall would silently change.

Manifest: one row per caption (test splits list several captions per image, as your own captions'
``table`` adapter does: see :mod:`hnclip.data`), the rows of one image sharing its ``image_id`` (the
file name's stem) and path; evaluation encodes the image once and counts an image->text hit when any of
its five captions ranks in the top k (:func:`hnclip.evaluate.recall_at_k`). Counts are manifest rows,
like every ``expected_counts``: COCO's 5,000 test images are 25,000 rows, Flickr30k's 1,000 are 5,000.

What others evaluate differs, which is why their "COCO" and "Flickr30k" numbers are not ours: Long-CLIP's
eval/retrieval/coco.py reads COCO's val2017 (also 5,000 images) and its flickr30k.py the whole of
Flickr30k's ``results_20130124.token`` (31,783 images), where this protocol, like the retrieval
literature since Karpathy's splits, scores the Karpathy test images.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd

from .adapter_utils import (
    BenchmarkFormatError,
    CountMismatchError,
    decode_all_images,
    read_json,
    require_image,
    require_text,
    resolve_expected,
    safe_relative_path,
)

__all__ = ["CAPTIONS_PER_IMAGE", "PROTOCOL_SPLITS", "load_karpathy"]

CAPTIONS_PER_IMAGE = 5
# our split -> the ``split`` value of the records it takes; restval and train are never a test split
PROTOCOL_SPLITS = {"test": "test"}

log = logging.getLogger(__name__)


def load_karpathy(root: Path, split: str, *, benchmark: str, annotation_file: str, image_dir: str | None,
                  expected_count, counts: dict[str, int], verify_images: bool = False) -> pd.DataFrame:
    """Split ``split`` of one Karpathy file as a grouped manifest (five rows per image, file order).

    ``benchmark``: the adapter's name in messages; ``annotation_file``: the JSON's name in ``root``;
    ``image_dir``: the folder of records without a ``filepath`` (None: every record must have one);
    ``expected_count``/``counts``: as the other adapters' (:func:`~hnclip.data.adapter_utils.resolve_expected`),
    in manifest rows. Raises ValueError for a split outside the protocol (``restval`` named as such),
    BenchmarkFormatError naming the file and the record (its index and file name) for a missing
    ``split``/``filename``/``sentences``, a sentence without ``raw`` text, fewer than five sentences or a
    missing image, and CountMismatchError naming the images and captions found against the protocol's.
    """
    if split not in PROTOCOL_SPLITS:
        why = (" (COCO's restval images are Karpathy's extra training images, never a test split)"
               if split == "restval" else "")
        raise ValueError(f"{benchmark}: split {split!r} is not part of the protocol{why}; "
                         f"known: {sorted(PROTOCOL_SPLITS)}")
    expected = resolve_expected(expected_count, counts, benchmark, split)
    root = Path(root)
    path = root / annotation_file
    data = read_json(path, benchmark)
    images = data.get("images") if isinstance(data, dict) else None
    if not isinstance(images, list):
        raise BenchmarkFormatError(f"{benchmark}: {path} has no 'images' list (is it Karpathy's {annotation_file}?)")
    rows, seen, dropped = [], {}, 0
    for index, record in enumerate(images):
        where = f"{benchmark}: {path} images[{index}]"
        if not isinstance(record, dict):
            raise BenchmarkFormatError(f"{where} is a JSON {type(record).__name__}, not an object")
        filename = require_text(record, "filename", where)
        where = f"{where} ({filename})"
        if require_text(record, "split", where) != PROTOCOL_SPLITS[split]:
            continue
        image_path = require_image(root / _image_folder(record, image_dir, where) / safe_relative_path(filename, where),
                                   where)
        image_id = Path(filename).stem
        if image_id in seen:
            raise BenchmarkFormatError(f"{where}: image {filename!r} is listed twice (images[{seen[image_id]}] too)")
        seen[image_id] = index
        captions = _captions(record, where)
        dropped += len(captions) - CAPTIONS_PER_IMAGE
        rows += [(image_id, str(image_path.resolve()), c) for c in captions[:CAPTIONS_PER_IMAGE]]
    if expected is not None and len(rows) != expected:
        raise CountMismatchError(
            f"{benchmark} ({split}) in {path}: found {len(seen)} images ({len(rows)} captions), the protocol lists "
            f"{expected // CAPTIONS_PER_IMAGE} images x {CAPTIONS_PER_IMAGE} captions = {expected}; the file is a "
            "different release or the images are incomplete (pass expected_count=None only for subsets)")
    if not rows:
        raise BenchmarkFormatError(f"{benchmark}: {path} has no record with split {PROTOCOL_SPLITS[split]!r}")
    if dropped:
        log.info("%s (%s): kept the first %d sentences of each image, %d further sentences dropped",
                 benchmark, split, CAPTIONS_PER_IMAGE, dropped)
    manifest = pd.DataFrame(rows, columns=["image_id", "image_path", "caption"], dtype=object)
    manifest.attrs["extra_sentences_dropped"] = dropped
    if verify_images:
        decode_all_images(manifest.drop_duplicates("image_id"), benchmark)
    return manifest


def _image_folder(record: dict, image_dir: str | None, where: str):
    if "filepath" in record:
        return safe_relative_path(require_text(record, "filepath", where), where)
    if image_dir is None:
        raise BenchmarkFormatError(f"{where}: missing field 'filepath' (fields: {sorted(record)})")
    return image_dir


def _captions(record: dict, where: str) -> list[str]:
    """The record's sentences' ``raw`` texts in file order; fewer than five is an error."""
    sentences = record.get("sentences")
    if not isinstance(sentences, list):
        raise BenchmarkFormatError(f"{where}: missing field 'sentences' (a list; fields: {sorted(record)})"
                                   if sentences is None else f"{where}: field 'sentences' is not a list")
    captions = []
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, dict):
            raise BenchmarkFormatError(f"{where}: sentences[{i}] is not an object")
        captions.append(require_text(sentence, "raw", f"{where} sentences[{i}]"))
    if len(captions) < CAPTIONS_PER_IMAGE:
        raise BenchmarkFormatError(f"{where}: {len(captions)} sentence(s), the protocol needs {CAPTIONS_PER_IMAGE} "
                                   "per image")
    return captions
