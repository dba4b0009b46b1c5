"""DCI, Densely Captioned Images (Urbanek et al., CVPR 2024): annotation JSONs + SA-1B photos -> manifest.

Layout parsed (``root`` = the folder ``dci.tar.gz`` was unpacked into, or its top folder itself)::

    root/densely_captioned_images/annotations/<key>.json   one JSON object per annotated image:
        {"image": "sa_1543972.jpg", "short_caption": "...", "extra_caption": "...",
         "mask_data": {...}, "mask_keys": [...], "summaries": {...}, ...}
    root/densely_captioned_images/photos/<image>           the JPEGs of SA-1B's ``sa_000138.tar``
    root/densely_captioned_images/splits.json, complete/   (sDCI's 77-token material, not read here)
    root/DCI_test.json                                     GOAL's test list, placed by hand (optional)

Where this comes from: github.com/facebookresearch/DCI (README "Dataset" section: 7,805 images, the
annotation JSON schema, "download the archive sa_000138.tar and extract the images in the photos
folder"; ``dataset/densely_captioned_images/dataset/config.py`` for ``annotations/`` and ``photos/``;
``scripts/download.py`` for ``dci.tar.gz``; licence CC-BY-NC 4.0 in ``LICENSE``).

Caption: DCI's own "extended caption" (``DenseCaptionedImage.get_extended_caption`` in
``dense_image.py``) is ``short_caption + "\\n" + extra_caption``; each part is stripped and an empty
``extra_caption`` contributes nothing. Rows follow the sorted annotation file names (TULIP's Long-DCI
constructor uses the same order) under both protocols.

Protocols (``load_dci(..., protocol=...)``). DCI's publisher ships no train/test split for long
captions (``splits.json`` belongs to the 77-token sDCI task), yet the paper trains on DCI (DCI
in-domain, DCI -> DOCCI transfer), as GOAL does:

- ``"goal"``: GOAL's split (Choi et al., CVPR 2025; github.com/PerceptualAI-Lab/GOAL, file
  ``datasets/DCI_test.json``; the TakumiHirose11/GOAL repository has no such file). That file is a JSON
  list of 1,999 objects ``{"filename": "<GOAL's local path>/photos/sa_1543972.jpg", "caption":
  "..."}``. ``test`` = the annotated images whose photo file name (the last
  component of ``filename``) the list names, 1,999; ``train`` = every other annotated image, 5,806.
  Only the file names are used: the captions stay DCI's extended caption (GOAL's look like the
  ``extra_caption`` alone, which its LISM scripts read), so both protocols pair an image with the
  same text. Download the file
  from https://github.com/PerceptualAI-Lab/GOAL/blob/main/datasets/DCI_test.json and put it,
  unchanged, at ``root/DCI_test.json`` (or ``root/densely_captioned_images/DCI_test.json``). As
  published (added in commit eee0686, unchanged since) it has 1,704,117 bytes, sha256
  35227d8dfe02eccfff44947ecd0c265fb20ce3c03a59c85f062356b7c15165ae; the repository states no licence.
- ``"all"``: all 7,805 annotated images are the test set, no train split: the public long-text
  retrieval evaluation of DCI (LoTLIP, github.com/wuw2019/LoTLIP ``dataloaders/dci_retrieval.py``,
  reused by Long-CLIP-era papers). Its DCI numbers are not comparable with GOAL-protocol ones.
- ``"auto"`` (the default, what ``load_benchmark`` and so the config get): ``"goal"`` when the split
  file is present, else ``"all"`` for ``test`` (logged as a warning) and an error naming the missing
  file for ``train``. The protocol used is in ``manifest.attrs["protocol"]``.

Test variant (``TEST_VARIANTS``, a split name ``load_benchmark`` accepts, for the report's protocol
table): ``test_all`` = protocol ``"all"``'s test (7,805, LoTLIP) whatever ``"auto"`` would choose; the
paper's ``test`` is GOAL's 1,999 when GOAL's file is present.
"""

from __future__ import annotations

import logging
from pathlib import Path, PurePosixPath

import pandas as pd
from tqdm import tqdm

from .adapter_utils import (
    PROTOCOL,
    BenchmarkFormatError,
    check_count,
    decode_all_images,
    find_layout_root,
    make_manifest,
    read_json,
    require_image,
    require_text,
    resolve_expected,
    safe_relative_path,
)

__all__ = [
    "ANNOTATIONS_DIR",
    "EXPECTED_COUNTS",
    "GOAL_SPLIT_FILE",
    "GOAL_SPLIT_URL",
    "PHOTOS_DIR",
    "PROTOCOLS",
    "TEST_VARIANTS",
    "TOP_FOLDER",
    "find_goal_split_file",
    "join_caption",
    "load",
    "load_dci",
    "read_goal_test_images",
]

log = logging.getLogger(__name__)

TOP_FOLDER = "densely_captioned_images"
ANNOTATIONS_DIR = "annotations"
PHOTOS_DIR = "photos"
GOAL_SPLIT_FILE = "DCI_test.json"
GOAL_SPLIT_URL = "https://github.com/PerceptualAI-Lab/GOAL/blob/main/datasets/DCI_test.json"
PROTOCOLS = ("auto", "goal", "all")
# protocol -> split -> record count; GOAL's train is DCI's 7,805 annotated images minus its 1,999
EXPECTED_COUNTS = {"all": {"test": 7805}, "goal": {"train": 5806, "test": 1999}}
# test splits of the published protocols, by name: split -> (protocol, what it is)
TEST_VARIANTS = {"test_all": "all 7,805 annotated images (LoTLIP's long-text DCI retrieval)"}
_VARIANT_PROTOCOL = {"test_all": "all"}


def join_caption(short_caption: str, extra_caption: str) -> str:
    """DCI's extended caption: the standard caption, a newline, the extra description (stripped parts)."""
    return "\n".join(part for part in (short_caption.strip(), extra_caption.strip()) if part)


def find_goal_split_file(root: Path) -> Path | None:
    """GOAL's ``DCI_test.json`` in ``root`` or in the archive's top folder; ``None`` when in neither.

    Two copies are an error rather than a silent preference: they could differ, and the split decides
    which images a model is trained on.
    """
    root = Path(root)
    candidates = [root / GOAL_SPLIT_FILE]
    if root.name != TOP_FOLDER:
        candidates.append(root / TOP_FOLDER / GOAL_SPLIT_FILE)
    found = [p for p in candidates if p.is_file()]
    if len(found) > 1:
        raise ValueError(f"dci: GOAL's split file is present twice ({found[0]} and {found[1]}); keep one")
    return found[0] if found else None


def read_goal_test_images(path: Path) -> set[str]:
    """The photo file names (``sa_1543972.jpg``) GOAL's ``DCI_test.json`` lists as its test set.

    Raises BenchmarkFormatError naming the file and the record index for anything but a list of
    objects with a string ``filename``, and for a photo listed twice.
    """
    records = read_json(path, "dci")
    if not isinstance(records, list):
        raise BenchmarkFormatError(
            f"dci: GOAL split file {path} is a JSON {type(records).__name__}, not a list of "
            '{"filename": ..., "caption": ...} objects'
        )
    first_index: dict[str, int] = {}
    for i, record in enumerate(records):
        where = f"dci: GOAL split file {path} record {i}"
        if not isinstance(record, dict):
            raise BenchmarkFormatError(f"{where} is a JSON {type(record).__name__}, not an object")
        # GOAL's paths point into its authors' machine (../DCI/.../photos/sa_1543972.jpg): only the
        # file name is meaningful here.
        name = PurePosixPath(require_text(record, "filename", where).replace("\\", "/")).name
        if not name:
            raise BenchmarkFormatError(f"{where}: filename {record['filename']!r} names no file")
        if name in first_index:
            raise BenchmarkFormatError(
                f"dci: GOAL split file {path} lists photo {name!r} twice "
                f"(records {first_index[name]} and {i})"
            )
        first_index[name] = i
    if not first_index:
        raise BenchmarkFormatError(f"dci: GOAL split file {path} lists no image")
    return set(first_index)


def load_dci(
    root: Path,
    split: str,
    *,
    protocol: str = "auto",
    expected_count=PROTOCOL,
    verify_images: bool = False,
) -> pd.DataFrame:
    """DCI ``split`` under ``protocol`` (see the module docstring); ``image_id`` is the photo's stem.

    Raises ValueError for an unknown split or protocol and for ``train`` under ``"all"``,
    FileNotFoundError when ``"goal"`` (or ``"auto"`` with ``train``) finds no split file,
    BenchmarkFormatError naming the file for malformed JSON, a missing field, an empty caption, a
    missing photo or a GOAL-listed photo that no annotation describes, and CountMismatchError when
    the count is not the protocol's.
    """
    if protocol not in PROTOCOLS:
        raise ValueError(f"dci: unknown protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if split in _VARIANT_PROTOCOL:  # a named protocol's test split, chosen by name rather than by "auto"
        split, protocol = "test", _VARIANT_PROTOCOL[split]
    if split not in ("train", "test"):
        raise ValueError(f"dci: unknown split {split!r}; known: train, test, {', '.join(TEST_VARIANTS)}")
    base = find_layout_root(Path(root), ANNOTATIONS_DIR, (TOP_FOLDER,), "dci")
    split_file = find_goal_split_file(Path(root)) if protocol != "all" else None
    protocol = _resolve_protocol(protocol, split, split_file, Path(root))
    expected = resolve_expected(expected_count, EXPECTED_COUNTS[protocol], "dci", split)

    goal_test = read_goal_test_images(split_file) if protocol == "goal" else None
    annotations = base / ANNOTATIONS_DIR
    files = sorted(annotations.glob("*.json"))
    if not files:
        raise BenchmarkFormatError(f"dci: {annotations} holds no annotation *.json file")
    rows, annotated = [], set()
    for path in tqdm(files, desc="dci annotations", unit="file", disable=len(files) < 1000):
        record = read_json(path, "dci")
        where = f"dci: annotation {path}"
        if not isinstance(record, dict):
            raise BenchmarkFormatError(f"{where} is a JSON {type(record).__name__}, not an object")
        image = safe_relative_path(require_text(record, "image", where), where)
        annotated.add(image.name)
        if goal_test is not None and (image.name in goal_test) != (split == "test"):
            continue
        short = require_text(record, "short_caption", where, allow_empty=True)
        extra = require_text(record, "extra_caption", where, allow_empty=True)
        caption = join_caption(short, extra)
        if not caption:
            raise BenchmarkFormatError(f"{where}: short_caption and extra_caption are both empty")
        image_path = require_image(base / PHOTOS_DIR / image, where)
        rows.append((image.stem, image_path, caption))
    if goal_test is not None:
        unknown = sorted(goal_test - annotated)
        if unknown:
            raise BenchmarkFormatError(
                f"dci: GOAL split file {split_file} lists {len(unknown)} photo(s) no annotation in "
                f"{annotations} describes, e.g. {unknown[0]!r}; the annotations are incomplete or the "
                "file is not GOAL's DCI_test.json"
            )
    check_count("dci", split, len(rows), expected, split_file or annotations)
    manifest = make_manifest(rows, "dci", annotations)
    manifest.attrs["protocol"] = protocol
    if verify_images:
        decode_all_images(manifest, "dci")
    return manifest


def _resolve_protocol(protocol: str, split: str, split_file: Path | None, root: Path) -> str:
    missing = (
        f"GOAL's split file {GOAL_SPLIT_FILE} is not in {root} (nor in {root / TOP_FOLDER}); "
        f"download it from {GOAL_SPLIT_URL} and put it there unchanged"
    )
    if protocol == "all":
        if split == "train":
            raise ValueError(
                "dci: protocol 'all' has no train split (all 7,805 annotated images are the test set); "
                "use protocol 'goal' to train on DCI"
            )
        return "all"
    if split_file is not None:
        log.info("dci: %s split from GOAL's %s", split, split_file)
        return "goal"
    if protocol == "goal" or split == "train":
        raise FileNotFoundError(f"dci: split {split!r} under GOAL's protocol needs its test list: {missing}")
    log.warning(
        "dci: %s; testing on all 7,805 annotated images (LoTLIP's protocol), whose numbers are not "
        "comparable with GOAL-protocol DCI numbers",
        missing,
    )
    return "all"


load = load_dci
