"""The rehearsal's benchmarks: a few generated images per split, in each publisher's files and archives.

Each benchmark gets exactly the records per split that its config's ``expected_counts`` asks for (the
count `hnclip prepare` then enforces), drawn as simple scenes of coloured shapes with long, multi-sentence
captions (some longer than 248 CLIP tokens, so truncation runs too), and is placed as its publisher
distributes it, for the workflow's ``fetch_benchmark`` rule to check, lock and unpack:

============  ==========================================================================================
docci         ``docci_descriptions.jsonlines`` + ``docci_images.tar.gz`` in the root (placed files; the
              jsonlines also holds a ``qual_dev`` and a ``qual_test`` record, which the paper's protocol
              skips and GOAL's ``test_goal`` adds to the test records)
dci           ``dci.tar.gz`` (annotations, splits.json) + SA-1B's ``sa_000138.tar`` (photos, plus one
              photo DCI does not annotate) + GOAL's ``DCI_test.json`` naming the test photos (``test_all``:
              every annotated photo, train and test)
long_dci      ``dci_long.csv`` (and a README) as the Hub dataset ``mderakhshani/Long-DCI`` in the offline
              Hub cache, one row with an empty caption (the protocol drops and counts it,
              ``test_keep_empty`` keeps it), and
              ``sa_000138.tar`` placed in the root for the photos
urban1k       ``Urban1k.zip`` as the Hub dataset ``BeichenZhang/Urban1k`` in the offline Hub cache
vg            ``paragraphs_v1.json``, ``{train,val,test}_split.json``, ``images.zip`` (``VG_100K/``) and
              ``images2.zip`` (``VG_100K_2/``), images split between the two folders as in VG
coco          Karpathy's ``caption_datasets.zip`` (``dataset_coco.json``: the test records, five sentences
              each but one with six, plus a ``restval`` and a ``val`` record the protocol skips) and COCO's
              ``val2014.zip`` (``val2014/``) in the root
flickr30k     ``caption_datasets.zip`` (``dataset_flickr30k.json``, records without ``filepath``: the test
              records and a ``train`` one) and ``flickr30k-images.tar.gz`` (the request form's archive)
============  ==========================================================================================

The Karpathy fixtures' counts are manifest rows, five per test image (``expected_counts.test`` must be a
multiple of five).

The test-split variants of the report's protocol table (:func:`hnclip.data.test_variants`) read the same
files; their counts follow from the configured ones and the config must state them too (prepare checks
a variant against ``expected_counts`` like any split), which :func:`write_rehearsal_benchmark` checks
before writing anything.
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

from PIL import Image, ImageDraw

from .hub_cache import populate_hub_cache
from .publisher_files import (
    jpeg_bytes,
    long_dci_csv,
    sa1b_archive,
    tar_archive,
    tree_members,
    write_dci,
    write_docci,
    write_goal_split,
    write_karpathy,
    write_urban1k,
    write_vg,
    zip_archive,
)

__all__ = ["HUB_COMMIT", "SCENE_SIZES", "scene", "write_rehearsal_benchmark"]

# the commit the offline Hub cache announces for every rehearsal repository (any 40 hex digits do)
HUB_COMMIT = "0" * 32 + "5eba5a1e"
# image sizes (width, height) cycled through: portrait, landscape and square, as in the real sets
SCENE_SIZES = ((320, 240), (240, 320), (288, 288), (400, 300))
GOAL_PREFIX = "../DCI/dataset/densely_captioned_images/dataset/scripts/densely_captioned_images/photos/"

_COLOURS = {"red": (200, 40, 40), "green": (40, 160, 60), "blue": (40, 70, 200), "yellow": (230, 210, 40),
            "purple": (130, 60, 170), "orange": (240, 140, 30), "white": (245, 245, 245), "black": (20, 20, 20)}
_SHAPES = ("square", "circle", "triangle", "bar")
_PLACES = ("top left", "top right", "bottom left", "bottom right", "centre")
_TEXTURES = ("smooth", "matte", "glossy", "grainy", "striped", "dotted")
_FILLER = ("The {b} background is a {t} surface lit from the left.",
           "A thin shadow falls to the right of the {c} {s}.",
           "Nothing else stands between the {c} {s} and the edge of the frame.",
           "The {s} in {c} looks slightly tilted, its outline {t} and sharp.")


def scene(seed: int, size: tuple[int, int], sentences: int) -> tuple[Image.Image, str, list]:
    """A picture of a few shapes, a caption of ``sentences`` sentences describing them, and their boxes
    ``(x1, y1, x2, y2)`` (exclusive ends; benchmarks use them as stand-in segmentation masks)."""
    rng = random.Random(seed)
    background = rng.choice(list(_COLOURS))
    image = Image.new("RGB", size, _COLOURS[background])
    draw = ImageDraw.Draw(image)
    w, h = size
    objects, boxes = [], []
    for _ in range(rng.randint(2, 5)):
        colour, shape = rng.choice(list(_COLOURS)), rng.choice(_SHAPES)
        x1, y1 = rng.randint(0, w * 2 // 3), rng.randint(0, h * 2 // 3)
        x2, y2 = x1 + rng.randint(w // 8, w // 3), y1 + rng.randint(h // 8, h // 3)
        fill = _COLOURS[colour]
        if shape == "circle":
            draw.ellipse((x1, y1, x2, y2), fill=fill, outline=(0, 0, 0))
        elif shape == "triangle":
            draw.polygon([(x1, y2), ((x1 + x2) // 2, y1), (x2, y2)], fill=fill, outline=(0, 0, 0))
        elif shape == "bar":
            draw.rectangle((x1, y1, x2, y1 + (y2 - y1) // 4), fill=fill)
        else:
            draw.rectangle((x1, y1, x2, y2), fill=fill, outline=(0, 0, 0))
        place = _PLACES[min(4, (2 * (y1 > h // 3)) + (x1 > w // 3))] if rng.random() < 0.8 else "centre"
        objects.append((colour, shape, place))
        boxes.append((x1, y1, min(w, x2 + 1), min(h, (y1 + (y2 - y1) // 4 if shape == "bar" else y2) + 1)))
    texts = [f"A {background} picture with {len(objects)} shapes."]
    texts += [f"A {c} {s} sits near the {p} of the image." for c, s, p in objects]
    while len(texts) < sentences:
        c, s, _ = rng.choice(objects)
        texts.append(rng.choice(_FILLER).format(c=c, s=s, b=background, t=rng.choice(_TEXTURES)))
    return image, " ".join(texts[:max(1, sentences)]), boxes


class _Scenes:
    """Scenes numbered from a seed, each with its own size and caption length (3 to 24 sentences)."""

    def __init__(self, seed: int):
        self.seed = seed
        self.count = 0

    def next(self) -> tuple[Image.Image, str]:
        i = self.count
        self.count += 1
        rng = random.Random(self.seed * 100_003 + i)
        image, caption, _ = scene(self.seed * 100_003 + i, SCENE_SIZES[i % len(SCENE_SIZES)],
                                  rng.choice((3, 6, 10, 16, 24)))
        return image, caption


def _counts(settings: dict, splits: tuple[str, ...], name: str) -> dict[str, int]:
    counts = settings.get("expected_counts") or {}
    missing = [s for s in splits if not isinstance(counts.get(s), int) or counts[s] < 1]
    if missing:
        raise ValueError(f"rehearsal: benchmarks.{name}.expected_counts must give a positive count for "
                         f"split(s) {missing} (the records the rehearsal writes and prepare checks)")
    return {s: counts[s] for s in splits}


def _variant_counts(name: str, adapter: str, settings: dict, counts: dict[str, int]) -> dict[str, int]:
    """Each test-split variant's record count as the writers lay the files out, checked against the config."""
    from hnclip.data import test_variants

    rules = _VARIANTS.get(adapter, {})
    unknown = sorted(set(test_variants(adapter)) - set(rules))
    if unknown:  # an adapter grew a variant the fixtures do not know how many records it has
        raise ValueError(f"rehearsal: no fixture count for {adapter}'s test variant(s) {unknown}")
    configured = settings.get("expected_counts") or {}
    derived = {}
    for variant, (count, why) in rules.items():
        derived[variant] = count(counts)
        if configured.get(variant) != derived[variant]:
            raise ValueError(
                f"rehearsal: benchmarks.{name}.expected_counts.{variant} must be {derived[variant]} ({why}), "
                f"got {configured.get(variant)!r}: prepare checks the split {variant!r} against it")
    return derived


def _write_files(root: Path, files: dict[str, bytes]) -> list[str]:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return sorted(files)


def _docci(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    splits = ["train"] * counts["train"] + ["test"] * counts["test"] + ["qual_dev", "qual_test"]
    records, images = [], []
    for i, split in enumerate(splits):
        image, caption = scenes.next()
        example_id = f"{split}_{i:05d}"
        records.append({"example_id": example_id, "split": split, "image_file": f"{example_id}.jpg",
                        "description": caption})
        images.append(image)
    with tempfile.TemporaryDirectory() as tmp:
        write_docci(tmp, records, image=lambda i: images[i])
        placed = _write_files(root, {
            "docci_descriptions.jsonlines": (Path(tmp) / "docci_descriptions.jsonlines").read_bytes(),
            "docci_images.tar.gz": tar_archive(tree_members(Path(tmp) / "images", "images/"), gzipped=True)})
    return {"placed": placed}


def _dci_annotations(scenes: _Scenes, n: int, first_id: int):
    annotations, photos = {}, {}
    for k in range(n):
        image, caption = scenes.next()
        short, _, extra = caption.partition(". ")
        photo = f"sa_{first_id + k}.jpg"
        annotations[f"{k}-data.json"] = {"image": photo, "short_caption": short + ".", "extra_caption": extra}
        photos[photo] = image
    return annotations, photos


def _dci(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    annotations, photos = _dci_annotations(scenes, counts["train"] + counts["test"], 1_543_970)
    extra_photo, _ = scenes.next()  # SA-1B holds photos DCI never annotated
    test_photos = [a["image"] for a in list(annotations.values())[::2][:counts["test"]]]
    if len(test_photos) < counts["test"]:
        test_photos += [a["image"] for a in annotations.values() if a["image"] not in test_photos][
            :counts["test"] - len(test_photos)]
    ordered = list(photos)
    with tempfile.TemporaryDirectory() as tmp:
        write_dci(tmp, annotations, image=lambda i: photos[ordered[i]])
        base = Path(tmp) / "densely_captioned_images"
        members = [m for m in tree_members(base, "densely_captioned_images/") if "/photos/" not in m[0]]
        photo_bytes = {p.name: p.read_bytes() for p in sorted((base / "photos").iterdir())}
    photo_bytes["sa_1543900.jpg"] = jpeg_bytes(extra_photo)
    goal = [{"filename": GOAL_PREFIX + p, "caption": annotations[k]["extra_caption"]}
            for k in annotations for p in [annotations[k]["image"]] if p in test_photos]
    with tempfile.TemporaryDirectory() as tmp:
        goal_bytes = write_goal_split(Path(tmp) / "DCI_test.json", goal).read_bytes()
    placed = _write_files(root, {"dci.tar.gz": tar_archive(members, gzipped=True),
                                 "sa_000138.tar": sa1b_archive(photo_bytes), "DCI_test.json": goal_bytes})
    return {"placed": placed}


def _long_dci(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    annotations, photos = _dci_annotations(scenes, counts["test"] + 1, 1_543_980)
    rows = [(a["image"], a["extra_caption"]) for a in annotations.values()]
    rows[1] = (rows[1][0], "")  # DCI images without an extra caption: listed, dropped by the protocol
    populate_hub_cache(hub_cache, "dataset", "mderakhshani/Long-DCI",
                       {"dci_long.csv": long_dci_csv(rows), "README.md": b"# Long-DCI (rehearsal fixture)\n"},
                       HUB_COMMIT)
    placed = _write_files(root, {"sa_000138.tar": sa1b_archive({p: jpeg_bytes(im) for p, im in photos.items()})})
    return {"placed": placed, "hub": ["datasets/mderakhshani/Long-DCI"]}


def _urban1k(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    captions, images = {}, {}
    for n in range(1, counts["test"] + 1):
        images[str(n)], caption = scenes.next()
        captions[str(n)] = caption + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        write_urban1k(tmp, captions, image=lambda stem: images[stem])
        archive = zip_archive(tree_members(Path(tmp) / "Urban1k", "Urban1k/"))
    populate_hub_cache(hub_cache, "dataset", "BeichenZhang/Urban1k", {"Urban1k.zip": archive}, HUB_COMMIT)
    root.mkdir(parents=True, exist_ok=True)
    return {"placed": [], "hub": ["datasets/BeichenZhang/Urban1k"]}


def _vg(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    per_split = {"train": counts["train"], "val": 1, "test": 1}
    paragraphs, splits, folders, images = [], {}, {}, {}
    image_id = 61
    for split, n in per_split.items():
        splits[split] = []
        for _ in range(n):
            folder = "VG_100K" if image_id % 2 else "VG_100K_2"
            images[image_id], caption = scenes.next()
            paragraphs.append({"url": f"https://cs.stanford.edu/people/rak248/{folder}/{image_id}.jpg",
                               "image_id": image_id, "paragraph": caption})
            splits[split].append(image_id)
            folders[image_id] = folder
            image_id += 1_000_003
    with tempfile.TemporaryDirectory() as tmp:
        write_vg(tmp, paragraphs, splits, folders, image=lambda i: images[i])
        files = {f: (Path(tmp) / f).read_bytes() for f in
                 ("paragraphs_v1.json", "train_split.json", "val_split.json", "test_split.json")}
        files["images.zip"] = zip_archive(tree_members(Path(tmp) / "VG_100K", "VG_100K/"))
        files["images2.zip"] = zip_archive(tree_members(Path(tmp) / "VG_100K_2", "VG_100K_2/"))
    return {"placed": _write_files(root, files)}


def _karpathy_records(counts, scenes: _Scenes, dataset: str, others: tuple[str, ...]) -> tuple[list, list]:
    """Karpathy-format records (five sentences per test image, the first test image six) and their pictures."""
    from hnclip.data.karpathy import CAPTIONS_PER_IMAGE

    n_test, rest = divmod(counts["test"], CAPTIONS_PER_IMAGE)
    if rest:
        raise ValueError(f"rehearsal: benchmarks.{dataset}.expected_counts.test must be a multiple of "
                         f"{CAPTIONS_PER_IMAGE} (manifest rows: {CAPTIONS_PER_IMAGE} captions per image), got {counts['test']}")
    records, images = [], []
    for i, split in enumerate(["test"] * n_test + list(others)):
        image, caption = scenes.next()
        sentences = [t.strip().rstrip(".") + "." for t in caption.split(". ") if t.strip()]
        sentences += [f"A picture of shapes, caption {k + 1}." for k in range(len(sentences), 6)]
        record = {"filename": f"{i + 391_895}.jpg", "split": split, "imgid": i,
                  "sentences": [{"raw": t, "tokens": t.lower().rstrip(".").split(), "sentid": 5 * i + k, "imgid": i}
                                for k, t in enumerate(sentences[:6 if i == 0 else 5])]}
        if dataset == "coco":
            record.update(filepath="val2014", filename=f"COCO_val2014_{i + 391_895:012d}.jpg", cocoid=i + 391_895)
        records.append(record)
        images.append(image)
    return records, images


def _coco(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    records, images = _karpathy_records(counts, scenes, "coco", ("restval", "val"))
    with tempfile.TemporaryDirectory() as tmp:
        write_karpathy(tmp, "coco", records, image=lambda i: images[i])
        placed = _write_files(root, {
            "caption_datasets.zip": zip_archive([("dataset_coco.json", (Path(tmp) / "dataset_coco.json").read_bytes())]),
            "val2014.zip": zip_archive(tree_members(Path(tmp) / "val2014", "val2014/"))})
    return {"placed": placed}


def _flickr30k(counts, root: Path, hub_cache: Path, scenes: _Scenes) -> dict:
    records, images = _karpathy_records(counts, scenes, "flickr30k", ("train",))
    with tempfile.TemporaryDirectory() as tmp:
        write_karpathy(tmp, "flickr30k", records, image_dir="flickr30k-images", image=lambda i: images[i])
        placed = _write_files(root, {
            "caption_datasets.zip": zip_archive([("dataset_flickr30k.json",
                                                  (Path(tmp) / "dataset_flickr30k.json").read_bytes())]),
            "flickr30k-images.tar.gz": tar_archive(tree_members(Path(tmp) / "flickr30k-images", "flickr30k-images/"),
                                                   gzipped=True)})
    return {"placed": placed}


# adapter -> (writer, the splits whose counts the config gives)
_WRITERS = {"docci": (_docci, ("train", "test")), "dci": (_dci, ("train", "test")), "long_dci": (_long_dci, ("test",)),
            "urban1k": (_urban1k, ("test",)), "vg": (_vg, ("train",)), "coco": (_coco, ("test",)),
            "flickr30k": (_flickr30k, ("test",))}
# each adapter's scene stream (its index); a new adapter goes last, so the others' fixtures keep their bytes
_SCENE_STREAMS = ("dci", "docci", "long_dci", "urban1k", "vg", "coco", "flickr30k")
# adapter -> test-split variant -> (its count from the configured counts, why), as the writers above lay it out
_VARIANTS = {
    "docci": {"test_goal": (lambda c: c["test"] + 1, "the test records and the one qual_test record")},
    "dci": {"test_all": (lambda c: c["train"] + c["test"], "every annotated photo, train and test")},
    "long_dci": {"test_keep_empty": (lambda c: c["test"] + 1, "the test rows and the one with an empty caption")},
}


def write_rehearsal_benchmark(name: str, settings: dict, hub_cache, seed: int) -> dict:
    """Place benchmark ``name``'s files (its config block ``settings``: adapter, root, expected_counts).

    Returns what was written: ``{"placed": [files in the root], "hub": [cached repositories], "records":
    {split or test variant: count}}``. Raises ValueError, before writing anything, when ``expected_counts``
    lacks a split's count or states a test variant's count other than the files will hold.
    """
    adapter = settings["adapter"]
    if adapter not in _WRITERS:
        raise ValueError(f"rehearsal: no fixture writer for adapter {adapter!r} (benchmark {name!r}); "
                         f"known: {', '.join(_WRITERS)}")
    writer, splits = _WRITERS[adapter]
    counts = _counts(settings, splits, name)
    records = {**counts, **_variant_counts(name, adapter, settings, counts)}
    root = Path(settings["root"])
    root.mkdir(parents=True, exist_ok=True)
    made = writer(counts, root, Path(hub_cache), _Scenes(seed * 7919 + _SCENE_STREAMS.index(adapter)))
    return {"adapter": adapter, "root": str(root), **made, "records": records}
