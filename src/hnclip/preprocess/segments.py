"""GOAL's local pairs: SAM segments of each training image, each caption sentence matched to one of them.

Per image (GOAL's ``LISM/make_pseudo_local_pair_for_trainset.py``, re-written):

1. SAM automatic mask generation through ``transformers``' ``mask-generation`` pipeline, on the image
   shrunk so its longer side is at most ``max_side`` (SAM resizes to 1024 anyway; this bounds the
   memory of masks post-processed at full resolution). GOAL ran the pipeline's defaults with 128
   points per batch; so do we, unless ``sam_kwargs`` says otherwise.
2. Keep masks whose area is ``min_area_ratio <= area / image area <= max_area_ratio`` (GOAL: 0.01 and
   0.8, inclusive). A segment is its mask's bounding box in original pixels, ``[x1, y1, x2, y2)``; its
   crop is that box of the original image (background kept, as GOAL's ``keep_original_background``
   does) through the image store's geometry (shorter side to S, centre crop).
3. Candidates are the whole image plus the segments; the caption is cut with
   :func:`~hnclip.preprocess.sentences.split_sentences`. Crops and sentences are embedded with the
   backbone being fine-tuned (GOAL used a separate CLIP ViT-L/14-336; the brief and the paper's
   protocol use the backbone), and each sentence goes to its highest-cosine candidate.
   With a ``sentence_matcher`` (:func:`hnclip.preprocess.oracle.synthetic_sentence_matcher`, config
   ``preprocess.matcher: oracle``) each segment is paired with the sentence the matcher names for its box
   instead (the toy's stand-in for GOAL's crop-reading CLIP), scored by the same cosine; a segment it names
   no sentence for is an error (the oracle matcher needs the oracle segmenter's boxes).
4. Sentences matched to the whole image are dropped (GOAL's released training lists are the
   ``*_del_org.json`` files). If that drops every sentence, each sentence is matched among the
   segments only; an image without any segment pairs every sentence with the whole image. Both cases
   are counted in ``index.json``, nothing is skipped silently.
5. Pairs are kept best score first, at most ``max_pairs`` (GOAL trains on the best one; StructXLIP
   uses the top 3 for its local edge term). Each pair records the sentence, its character span and its
   CLIP-token span ``[start, end)`` in the full caption (SOT = position 0, not clipped to a context
   length), the cosine, its crop's row, and its box in the image store's frame as fractions of S
   (``box_store``, None when the box lies outside the centre crop: GOAL scales boxes as if the image
   had been resized without cropping, which misplaces them on non-square images).

Product layout (``out_dir``): ``segments.jsonl`` (one record per manifest row, manifest order),
``crops.npy`` (uint8 [M, S, S, 3], memory-mappable) and ``index.json``, written last.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.lib.format import open_memmap
from PIL import Image
from tqdm import tqdm

from .sentences import char_span_to_tokens, split_sentences, token_offsets

__all__ = ["SegmentIndex", "Segment", "box_in_store", "build_segments", "crop_segment", "filter_segments",
           "load_mask_generator", "mask_box", "match_sentences", "named_pairs", "product_dir", "random_sam_config",
           "save_random_sam"]

log = logging.getLogger(__name__)

RECORDS_FILE = "segments.jsonl"
CROPS_FILE = "crops.npy"
INDEX_FILE = "index.json"
WHOLE_IMAGE = -1  # the ``segment`` of a pair matched to the whole image
FORMAT_VERSION = 1


@dataclass(frozen=True)
class Segment:
    """A kept mask: its box ``(x1, y1, x2, y2)`` with exclusive ends, and its area over the image's."""

    box: tuple[int, int, int, int]
    area_ratio: float


def mask_box(mask: np.ndarray) -> tuple[int, int, int, int] | None:
    """Tight box ``(x1, y1, x2, y2)``, ends exclusive, of a boolean [H, W] mask; None if it is empty."""
    rows, cols = np.any(mask, axis=1), np.any(mask, axis=0)
    if not rows.any():
        return None
    y1, y2 = np.flatnonzero(rows)[[0, -1]]
    x1, x2 = np.flatnonzero(cols)[[0, -1]]
    return int(x1), int(y1), int(x2) + 1, int(y2) + 1


def filter_segments(masks: Sequence[np.ndarray], min_area_ratio: float = 0.01,
                    max_area_ratio: float = 0.8) -> list[Segment]:
    """Segments of the masks whose area ratio lies in ``[min_area_ratio, max_area_ratio]``, in mask order."""
    if not 0 <= min_area_ratio <= max_area_ratio <= 1:
        raise ValueError(f"need 0 <= min_area_ratio <= max_area_ratio <= 1, got {min_area_ratio}, {max_area_ratio}")
    kept = []
    for mask in masks:
        mask = np.asarray(mask, dtype=bool)
        ratio = float(mask.sum()) / mask.size
        box = mask_box(mask)
        if box is not None and min_area_ratio <= ratio <= max_area_ratio:
            kept.append(Segment(box, ratio))
    return kept


def _scale_box(box, from_size: tuple[int, int], to_size: tuple[int, int]) -> tuple[int, int, int, int]:
    """A box in a (w, h) image moved to a (W, H) image of the same scene, grown outward to whole pixels."""
    (w, h), (big_w, big_h) = from_size, to_size
    if (w, h) == (big_w, big_h):
        return tuple(int(v) for v in box)
    x1, y1, x2, y2 = box
    return (max(0, math.floor(x1 * big_w / w)), max(0, math.floor(y1 * big_h / h)),
            min(big_w, math.ceil(x2 * big_w / w)), min(big_h, math.ceil(y2 * big_h / h)))


def box_in_store(box, width: int, height: int, image_size: int) -> tuple[float, float, float, float] | None:
    """``box`` (original pixels) in the image store's frame, as fractions of S, clipped; None if outside.

    Follows :func:`hnclip.data.image_store.resize_center_crop` exactly: shorter side to S (the longer
    one truncated with ``int``), then a centre crop whose offset rounds half to even.
    """
    short, long = (width, height) if width <= height else (height, width)
    new_long = int(image_size * long / short)
    new_w, new_h = (image_size, new_long) if width <= height else (new_long, image_size)
    left, top = int(round((new_w - image_size) / 2.0)), int(round((new_h - image_size) / 2.0))
    x1, y1, x2, y2 = box
    sx, sy = new_w / width, new_h / height
    fx1, fx2 = (min(max(x * sx - left, 0.0), image_size) / image_size for x in (x1, x2))
    fy1, fy2 = (min(max(y * sy - top, 0.0), image_size) / image_size for y in (y1, y2))
    if fx2 <= fx1 or fy2 <= fy1:
        return None
    return fx1, fy1, fx2, fy2


def crop_segment(image: Image.Image, box, image_size: int) -> np.ndarray:
    """uint8 [S, S, 3]: the box of the (RGB) original, shorter side to S and centre-cropped like the store."""
    from hnclip.data.image_store import resize_center_crop

    return np.asarray(resize_center_crop(image.crop(tuple(box)), image_size), dtype=np.uint8)


def match_sentences(similarity: np.ndarray) -> tuple[list[tuple[int, int, float]], str]:
    """Pairs ``(sentence, candidate, cosine)`` by the rules of the module docstring, best first; and how.

    ``similarity`` is [n_candidates, n_sentences], candidate 0 the whole image. The second value is
    ``"segments"`` (normal), ``"rematched"`` (every sentence preferred the whole image) or ``"whole_image"``
    (no segment). Ties go to the lower candidate index, then the earlier sentence.
    """
    similarity = np.asarray(similarity, dtype=np.float64)
    if similarity.ndim != 2 or similarity.shape[0] < 1 or similarity.shape[1] < 1:
        raise ValueError(f"similarity must be [n_candidates >= 1, n_sentences >= 1], got {similarity.shape}")
    n_candidates, n_sentences = similarity.shape
    if n_candidates == 1:
        pairs, how = [(j, 0, similarity[0, j]) for j in range(n_sentences)], "whole_image"
    else:
        best = similarity.argmax(axis=0)
        pairs = [(j, int(best[j]), similarity[best[j], j]) for j in range(n_sentences) if best[j] != 0]
        how = "segments"
        if not pairs:
            best = 1 + similarity[1:].argmax(axis=0)
            pairs, how = [(j, int(best[j]), similarity[best[j], j]) for j in range(n_sentences)], "rematched"
    pairs.sort(key=lambda p: (-p[2], p[0]))
    return [(j, i, float(s)) for j, i, s in pairs], how


def named_pairs(image_id: str, segments: Sequence[Segment], sentences: list[str], similarity: np.ndarray,
                named: dict) -> tuple[list[tuple[int, int, float]], str]:
    """Pairs ``(sentence, candidate, cosine)``, best first: each segment with the sentence a sentence matcher
    names for its box (``named``: box -> sentence text, one of the caption's ``sentences``); the second value
    is ``"named"``, or ``"whole_image"`` for an image without segments (every sentence then goes with the whole
    image, as :func:`match_sentences` does)."""
    pairs = []
    for k, segment in enumerate(segments):
        text = named.get(tuple(segment.box))
        if text is None:
            raise ValueError(f"image_id {image_id!r}: the sentence matcher names no sentence for segment box "
                             f"{tuple(segment.box)} (preprocess.matcher oracle needs preprocess.segmenter oracle)")
        if text not in sentences:
            raise ValueError(f"image_id {image_id!r}: the matcher's sentence {text!r} is not a sentence of its caption")
        j = sentences.index(text)
        pairs.append((j, k + 1, float(similarity[k + 1, j])))
    if not pairs:
        return [(j, 0, float(similarity[0, j])) for j in range(len(sentences))], "whole_image"
    pairs.sort(key=lambda p: (-p[2], p[0]))
    return pairs, "named"


# ----------------------------------------------------------------------------------------------- SAM
def load_mask_generator(sam_dir, device: str = "cpu", points_per_batch: int = 128, **sam_kwargs):
    """A callable ``(PIL image, image_id) -> list of bool [H, W] masks`` running SAM from a local folder.

    ``sam_dir`` holds a ``SamModel`` and its image processor as ``save_pretrained`` writes them (a
    Hugging Face snapshot folder, e.g. of ``facebook/sam-vit-huge``); nothing is downloaded and no
    remote code runs. ``sam_kwargs`` go to every pipeline call (``pred_iou_thresh``, ...).
    """
    from transformers import SamImageProcessor, SamModel, pipeline

    sam_dir = Path(sam_dir)
    if not sam_dir.is_dir():
        raise FileNotFoundError(f"SAM checkpoint folder {sam_dir} does not exist (set it in the config)")
    model = SamModel.from_pretrained(sam_dir, local_files_only=True).eval()
    processor = SamImageProcessor.from_pretrained(sam_dir, local_files_only=True)
    generator = pipeline("mask-generation", model=model, image_processor=processor, device=device)

    def generate(image: Image.Image, image_id: str | None = None) -> list[np.ndarray]:
        out = generator(image, points_per_batch=points_per_batch, **sam_kwargs)
        return [np.asarray(m.cpu() if hasattr(m, "cpu") else m, dtype=bool) for m in out["masks"]]

    return generate


def random_sam_config(image_size: int = 64):
    """A randomly initialised SAM small enough for ``image_size`` px images on a CPU in about a second.

    For tests and CPU smoke runs of the SAM call path only: its masks are meaningless.
    """
    from transformers import SamConfig

    return SamConfig(
        vision_config={"hidden_size": 16, "output_channels": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": image_size, "patch_size": 16, "window_size": 2, "global_attn_indexes": [0],
                       "num_pos_feats": 4, "mlp_dim": 32},
        prompt_encoder_config={"hidden_size": 8, "image_size": image_size, "patch_size": 16,
                               "mask_input_channels": 4},
        mask_decoder_config={"hidden_size": 8, "mlp_dim": 16, "num_hidden_layers": 1, "num_attention_heads": 2,
                             "iou_head_hidden_dim": 8},
    )


def save_random_sam(path, image_size: int = 64, seed: int = 0) -> Path:
    """Write a :func:`random_sam_config` SAM and its image processor where :func:`load_mask_generator` reads."""
    import torch
    from transformers import SamImageProcessor, SamModel

    path = Path(path)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        SamModel(random_sam_config(image_size)).save_pretrained(path)
    mask_size = image_size // 4  # SAM's low-resolution masks are a quarter of its input side
    SamImageProcessor(size={"longest_edge": image_size}, pad_size={"height": image_size, "width": image_size},
                      mask_size={"longest_edge": mask_size},
                      mask_pad_size={"height": mask_size, "width": mask_size}).save_pretrained(path)
    return path


def _shrunk(image: Image.Image, max_side: int) -> Image.Image:
    if max(image.size) <= max_side:
        return image
    scale = max_side / max(image.size)
    size = (max(1, round(image.width * scale)), max(1, round(image.height * scale)))
    return image.resize(size, Image.Resampling.BILINEAR)


# ---------------------------------------------------------------------------------------- the product
def _embed(model, crops: np.ndarray, sentences: list[str], device):
    import torch

    from hnclip.data.image_store import to_model_input

    with torch.no_grad():
        image_features = model.encode_image(to_model_input(crops, model.image_mean, model.image_std, device))
        text_features = model.encode_text(model.tokenize(sentences).to(device))
    return (image_features.double() @ text_features.double().T).cpu().numpy()


def _image_record(image_id, image, caption, masks, model, device, image_size, min_area_ratio, max_area_ratio,
                  max_pairs, sam_size, sentence_of=None):
    """(record, crops of its pairs, how the sentences were matched, sentences lost to the whole image)."""
    segments = [Segment(_scale_box(s.box, sam_size, image.size), s.area_ratio)
                for s in filter_segments(masks, min_area_ratio, max_area_ratio)]
    sentences = split_sentences(caption)
    if not sentences:
        raise ValueError(f"image_id {image_id!r}: caption has no sentence: {caption!r}")
    candidates = np.stack([crop_segment(image, (0, 0, image.width, image.height), image_size)]
                          + [crop_segment(image, s.box, image_size) for s in segments])
    similarity = _embed(model, candidates, [s.text for s in sentences], device)
    if sentence_of is None:
        pairs, how = match_sentences(similarity)
    else:
        pairs, how = named_pairs(image_id, segments, [s.text for s in sentences], similarity,
                                 sentence_of(image, image_id))
    to_whole = int((similarity.argmax(axis=0) == 0).sum()) if len(segments) else 0
    offsets = token_offsets(caption)
    crop_of: dict[int, int] = {}
    records = []
    for sentence_index, candidate, score in pairs[:max_pairs]:
        sentence = sentences[sentence_index]
        segment = candidate - 1 if candidate else WHOLE_IMAGE
        box = segments[segment].box if candidate else (0, 0, image.width, image.height)
        crop_of.setdefault(candidate, len(crop_of))
        records.append({
            "sentence": sentence.text, "char_span": [sentence.start, sentence.end],
            "token_span": list(char_span_to_tokens(offsets, sentence.start, sentence.end)),
            "segment": segment, "score": score, "crop": crop_of[candidate],
            "box_store": box_in_store(box, image.width, image.height, image_size),
        })
    record = {"image_id": image_id, "width": image.width, "height": image.height, "n_masks": len(masks),
              "segments": [{"box": list(s.box), "area_ratio": s.area_ratio} for s in segments], "pairs": records}
    crops = candidates[sorted(crop_of, key=crop_of.get)]
    return record, crops, how, to_whole


def build_segments(manifest, model_dir, out_dir, sam_dir=None, caption_column: str = "caption",
                   min_area_ratio: float = 0.01, max_area_ratio: float = 0.8, max_pairs: int = 3,
                   max_side: int = 1024, device: str = "auto", mask_generator: Callable | None = None,
                   sam_kwargs: dict | None = None, sentence_matcher: Callable | None = None) -> dict:
    """Write the segment product of ``manifest``'s images (see the module docstring); returns the index.

    Args:
        manifest: DataFrame with ``image_id``, ``image_path`` (the originals) and ``caption_column``.
        model_dir: the backbone (:func:`hnclip.models.save_model` folder) that embeds crops and sentences;
            its image size is the crops' size S.
        sam_dir: local SAM folder for :func:`load_mask_generator`, unless ``mask_generator`` is given:
            ``(PIL image, image_id) -> bool masks`` of the image's size (e.g.
            :func:`hnclip.preprocess.oracle.synthetic_mask_generator`, or hand-made masks in tests).
        max_pairs: pairs kept per image, best first.
        max_side: longer side of the image given to SAM.
        sentence_matcher: ``(PIL image, image_id) -> {box: sentence}`` (:func:`named_pairs`); None: GOAL's
            rule, each sentence to the backbone's most similar candidate (:func:`match_sentences`).

    Cost: one SAM pass per image (seconds for ViT-H on a GPU, the dominant cost) and one backbone pass
    over the image's kept segments.
    """
    import torch

    from hnclip.data.image_store import manifest_digest
    from hnclip.models import load_model

    for column in ("image_id", "image_path", caption_column):
        if column not in manifest.columns:
            raise ValueError(f"manifest for the segment product lacks column {column!r}")
    if max_pairs < 1 or max_side < 1:
        raise ValueError(f"max_pairs and max_side must be >= 1, got {max_pairs}, {max_side}")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if mask_generator is None:
        if sam_dir is None:
            raise ValueError("build_segments needs sam_dir (a local SAM checkpoint folder) or a mask_generator")
        mask_generator = load_mask_generator(sam_dir, device, **(sam_kwargs or {}))
    model = load_model(model_dir).to(device).eval()
    image_size = int(model.image_size[0])

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp_records, tmp_raw = out_dir / (RECORDS_FILE + ".tmp"), out_dir / (CROPS_FILE + ".raw.tmp")
    stats = {"images": 0, "pairs": 0, "images_rematched": 0, "images_without_segments": 0,
             "sentences_matched_to_whole_image": 0}
    n_crops, digest = 0, hashlib.sha256()
    rows = zip(manifest["image_id"], manifest["image_path"], manifest[caption_column], strict=True)
    try:
        with open(tmp_records, "w", encoding="utf-8", newline="\n") as records, open(tmp_raw, "wb") as raw:
            for image_id, path, caption in tqdm(rows, total=len(manifest), desc="segments", unit="img"):
                image = _open_rgb(path, image_id)
                sam_image = _shrunk(image, max_side)
                record, crops, how, to_whole = _image_record(
                    str(image_id), image, str(caption), mask_generator(sam_image, str(image_id)), model, device, image_size,
                    min_area_ratio, max_area_ratio, max_pairs, sam_image.size, sentence_matcher)
                for pair in record["pairs"]:
                    pair["crop"] += n_crops
                n_crops += len(crops)
                raw.write(np.ascontiguousarray(crops).tobytes())
                line = json.dumps(record, ensure_ascii=False) + "\n"
                records.write(line)
                digest.update(line.encode("utf-8"))
                _tally(stats, record, how, to_whole)
        _raw_to_npy(tmp_raw, out_dir / CROPS_FILE, (n_crops, image_size, image_size, 3))
        os.replace(tmp_records, out_dir / RECORDS_FILE)
    finally:
        tmp_raw.unlink(missing_ok=True)
        tmp_records.unlink(missing_ok=True)
    index = {"format_version": FORMAT_VERSION, "image_ids": [str(i) for i in manifest["image_id"]],
             "count": len(manifest), "crops": n_crops, "image_size": image_size,
             "settings": {"min_area_ratio": min_area_ratio, "max_area_ratio": max_area_ratio, "max_pairs": max_pairs,
                          "max_side": max_side, "caption_column": caption_column, "sam_dir": str(sam_dir),
                          "matcher": "backbone" if sentence_matcher is None else "named",
                          "sam_kwargs": sam_kwargs or {}, "model_dir": str(model_dir)},
             "stats": stats, "manifest_sha256": manifest_digest(manifest), "content_sha256": digest.hexdigest()}
    log.info("segments of %d images: %s", len(manifest), stats)
    tmp_index = out_dir / (INDEX_FILE + ".tmp")
    tmp_index.write_text(json.dumps(index, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp_index, out_dir / INDEX_FILE)
    return index


def _tally(stats: dict, record: dict, how: str, to_whole: int) -> None:
    """Add one image's record to the product's counts: its pairs, how its sentences were matched."""
    stats["images"] += 1
    stats["pairs"] += len(record["pairs"])
    stats["images_rematched"] += how == "rematched"
    stats["images_without_segments"] += how == "whole_image"
    stats["sentences_matched_to_whole_image"] += to_whole


def _open_rgb(path, image_id) -> Image.Image:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"image of image_id {image_id!r} does not exist: {path}")
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ValueError(f"cannot decode image {path} (image_id {image_id!r}): {err}") from err


def _raw_to_npy(raw_path: Path, npy_path: Path, shape: tuple[int, ...]) -> None:
    """Copy the appended crop bytes into a memory-mappable .npy (the row count is known only at the end)."""
    tmp = npy_path.with_name(npy_path.name + ".tmp")
    target = open_memmap(tmp, mode="w+", dtype=np.uint8, shape=shape)
    if shape[0]:
        source = np.memmap(raw_path, dtype=np.uint8, mode="r", shape=shape)
        for start in range(0, shape[0], 1024):
            target[start:start + 1024] = source[start:start + 1024]
        del source
    target.flush()
    del target
    os.replace(tmp, npy_path)


def product_dir(path) -> Path:
    """A product's folder from the folder itself or its ``index.json`` (the file a workflow tracks)."""
    path = Path(path)
    return path.parent if path.name == INDEX_FILE else path


class SegmentIndex:
    """Read side of :func:`build_segments`: records by image_id and the memory-mapped crops.

    ``out_dir`` is the product folder or its ``index.json``, which is written last and carries the
    records' sha256, so a workflow can track (and a resume fingerprint can hash) that one small file.
    """

    def __init__(self, out_dir):
        self.root = product_dir(out_dir)
        index_path = self.root / INDEX_FILE
        if not index_path.is_file():
            raise FileNotFoundError(f"segment product {self.root} has no {INDEX_FILE} (incomplete or never built)")
        try:
            index = json.loads(index_path.read_text(encoding="utf-8"))
            if index["format_version"] != FORMAT_VERSION:
                raise ValueError(f"format_version {index['format_version']} (expected {FORMAT_VERSION})")
            self.image_size = int(index["image_size"])
            self.content_sha256 = str(index["content_sha256"])
            self.stats = dict(index["stats"])
            n_crops = int(index["crops"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
            raise ValueError(f"segment product index {index_path} is malformed: {err!r}") from err
        self.records: dict[str, dict] = {}
        records_path = self.root / RECORDS_FILE
        with open(records_path, encoding="utf-8") as handle:
            for line_number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                    image_id = str(record["image_id"])
                    if not record["pairs"]:
                        raise ValueError("no pairs")
                    for pair in record["pairs"]:
                        if not 0 <= int(pair["crop"]) < n_crops:
                            raise ValueError(f"crop row {pair['crop']} outside 0..{n_crops - 1}")
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
                    raise ValueError(f"{records_path}, line {line_number}: malformed record ({err!r})") from err
                self.records[image_id] = record
        self.crops = np.load(self.root / CROPS_FILE, mmap_mode="r")
        expected = (n_crops, self.image_size, self.image_size, 3)
        if self.crops.shape != expected or self.crops.dtype != np.uint8:
            raise ValueError(f"{self.root / CROPS_FILE} holds {self.crops.dtype} {self.crops.shape}, but "
                             f"{index_path} describes uint8 {expected}")

    def __len__(self) -> int:
        return len(self.records)

    def record(self, image_id: str) -> dict:
        try:
            return self.records[image_id]
        except KeyError:
            raise KeyError(f"image_id {image_id!r} has no record in the segment product "
                           f"{self.root / RECORDS_FILE}") from None
