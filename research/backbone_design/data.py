"""Research harness: cached scene sets (images uint8 + tokens) for backbone design experiments."""

import hashlib
import json
import os
import random
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))
from hnclip.data.image_store import resize_center_crop  # noqa: E402
from hnclip.data.synthetic import (  # noqa: E402
    Slice,
    describe_scene,
    describe_scene_pool,
    describe_scene_short,
    family_slice,
    iter_scenes,
    render_scene,
    sample_scene,
)
from hnclip.models.tokenizer import tokenize  # noqa: E402

CACHE = Path(os.environ.get("HNCLIP_RESEARCH_CACHE", Path.home() / ".cache/hnclip-research"))
CACHE.mkdir(exist_ok=True, parents=True)


def _key(spec):
    return hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]


def encode(scenes, image_size, render=96, phrasing=None):
    imgs = np.stack(
        [np.asarray(resize_center_crop(render_scene(s, render), image_size), dtype=np.uint8) for s in scenes]
    )
    describe = describe_scene_pool if phrasing == "pool" else describe_scene
    long = tokenize([describe(s) for s in scenes], 248).numpy().astype(np.int32)
    short = tokenize([describe_scene_short(s) for s in scenes], 77).numpy().astype(np.int32)
    return imgs, long, short


def benchmark(
    family="synthetic",
    seed=2,
    inventory=7,
    backgrounds=1,
    objects=(7, 7),
    patterns=("solid",),
    cluster_size=1,
    max_changes=2,
    n_train=1536,
    n_val=512,
    n_test=1024,
    image_size=32,
):
    spec = dict(
        kind="bench",
        family=family,
        seed=seed,
        inventory=inventory,
        backgrounds=backgrounds,
        objects=list(objects),
        patterns=list(patterns) if patterns else None,
        cluster_size=cluster_size,
        max_changes=max_changes,
        n=[n_train, n_val, n_test],
        image_size=image_size,
    )
    path = CACHE / f"bench_{_key(spec)}.npz"
    where = family_slice(family, inventory, backgrounds, seed, tuple(objects) if objects else None, patterns)
    if path.exists():
        d = np.load(path, allow_pickle=True)
        return {k: d[k] for k in d.files}
    seen = set()
    out = {}
    sigs = []
    for split, count in (("train", n_train), ("val", n_val), ("test", n_test)):
        if count == 0:
            continue
        scenes = [
            s for _, _, s in iter_scenes(family, split, count, seed, cluster_size, max_changes, seen, where)
        ]
        clusters = [
            c for _, c, _ in iter_scenes(family, split, count, seed, cluster_size, max_changes, set(), where)
        ]
        out[f"{split}_img"], out[f"{split}_tok"], out[f"{split}_short"] = encode(scenes, image_size)
        out[f"{split}_cluster"] = np.asarray(clusters[:count])
        sigs += [repr(s.signature()) for s in scenes]
    out["signatures"] = np.asarray(sigs)
    np.savez(path, **out)
    return out


def pool(
    family="synthetic",
    count=60000,
    seed=0,
    image_size=32,
    exclude=(),
    mode="broad",
    slice_inventory=7,
    slice_count=64,
    slice_objects=(4, 7),
    slice_backgrounds=1,
    slice_patterns=None,
    mix_broad=0.0,
    families=None,
    shift_share=0.0,
    phrasing=None,
):
    """mode broad: the whole family; mode slices: scenes from ``slice_count`` random narrow slices
    (seeds 1000+k), ``mix_broad`` share from the whole family."""
    spec = dict(
        kind="pool",
        family=family,
        count=count,
        seed=seed,
        image_size=image_size,
        mode=mode,
        slice_inventory=slice_inventory,
        slice_count=slice_count,
        slice_objects=list(slice_objects),
        slice_backgrounds=slice_backgrounds,
        slice_patterns=slice_patterns,
        mix_broad=mix_broad,
        families=families,
        nex=len(exclude),
        **({"shift_share": shift_share} if shift_share else {}),
        **({"phrasing": phrasing} if phrasing else {}),
    )
    path = CACHE / f"pool_{_key(spec)}.npz"
    if path.exists():
        d = np.load(path)
        return {k: d[k] for k in d.files}
    exclude = set(exclude)
    fams = families or [family]
    scenes = []
    for i in range(count):
        rng = random.Random(f"rs:{seed}:{i}")
        fam = "synthetic_shift" if shift_share and rng.random() < shift_share else fams[i % len(fams)]
        if mode == "broad" or rng.random() < mix_broad:
            where = Slice()
        else:
            k = rng.randrange(slice_count)
            where = family_slice(
                fam, slice_inventory, slice_backgrounds, 1000 + k, tuple(slice_objects), slice_patterns
            )
        while True:
            s = sample_scene(fam, rng, where)
            if repr(s.signature()) not in exclude:
                break
        scenes.append(s)
    imgs, long, short = encode(scenes, image_size, phrasing=phrasing)
    np.savez(path, img=imgs, tok=long, short=short)
    return dict(img=imgs, tok=long, short=short)
