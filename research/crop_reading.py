"""What the released backbone reads of GOAL's pairs under the oracle matcher (docs/toy-design.md, "Fixing the
toy", item 1): one object per train scene (the first 512, the object drawn by a seeded generator), its box crop
(GOAL's) and the object kept in place with the rest painted background, each against its own sentence; whole
scenes against their captions for scale. R@1 over the 512 and inside micro-batches of 16, cosines.

Usage, after the default benchmark is fetched and the backbone installed (seconds):

    PYTHONPATH=$PWD/src .venv/bin/python research/crop_reading.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

sys.path.insert(0, str(Path(__file__).parent))
from baseline_inputs import encode_pixels, encode_texts, retrieval  # noqa: E402

from hnclip.data.image_store import resize_center_crop  # noqa: E402
from hnclip.data.synthetic.captions import object_sentences  # noqa: E402
from hnclip.data.synthetic.scenes import STYLES, scene_from_record  # noqa: E402
from hnclip.models import load_model  # noqa: E402
from hnclip.preprocess.oracle import object_boxes  # noqa: E402

BENCHMARK = Path("resources/synthetic")
SCENES, SIZE = 512, 48


def inputs(record: dict, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray, str]:
    """One scene's (box crop, object in place, whole scene) at the backbone's size, and the object's sentence."""
    image = Image.open(BENCHMARK / "images" / f"{record['image_id']}.png").convert("RGB")
    boxes, own = object_boxes(record["objects"], image.width), object_sentences(scene_from_record(record))
    k = int(rng.integers(len(boxes)))
    x1, y1, x2, y2 = boxes[k]
    pixels = np.asarray(image).copy()
    inside = np.zeros(pixels.shape[:2], dtype=bool)
    inside[y1:y2, x1:x2] = True
    pixels[~inside] = np.array(STYLES["synthetic"].backgrounds[record["background"]][1], dtype=np.uint8)
    return (np.asarray(resize_center_crop(image.crop(boxes[k]), SIZE)),
            np.asarray(resize_center_crop(Image.fromarray(pixels), SIZE)),
            np.asarray(resize_center_crop(image, SIZE)), own[k])


@torch.no_grad()
def main() -> None:
    torch.set_num_threads(1)
    model = load_model("results/backbone/model").eval()
    records = [json.loads(line) for line in (BENCHMARK / "captions.jsonl").read_text().splitlines()]
    records = [r for r in records if r["split"] == "train"][:SCENES]
    rng = np.random.default_rng(0)
    crops, in_place, whole, sentences = zip(*(inputs(r, rng) for r in records), strict=True)
    unit = lambda f: torch.nn.functional.normalize(f, dim=-1)  # noqa: E731
    own, captions = unit(encode_texts(model, list(sentences))), unit(encode_texts(model, [r["caption"] for r in records]))
    for name, pixels, texts in (("box crop vs its object's sentence", crops, own),
                                ("object in place vs its sentence", in_place, own),
                                ("whole scene vs caption", whole, captions)):
        features = unit(encode_pixels(model, np.stack(pixels)))
        print(f"{name}: over {len(records)}: {retrieval(features, texts)}; in micro-batches of 16: "
              f"{retrieval(features, texts, 16)}")


if __name__ == "__main__":
    main()
