"""Evaluation with a framework's own score: Recall@K from a score function, FineLIP end to end, and the
framework files saved beside a model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
from test_train_support import make_captions, write_store

from hnclip.config.train import TrainConfig
from hnclip.evaluate import evaluate_model, recall_at_k_from_scores
from hnclip.framework_loading import load_framework
from hnclip.frameworks import build_framework, save_framework
from hnclip.models import create_model, save_model


def brute_force_from_matrix(scores: np.ndarray, text_image_ids, ks) -> dict:
    """Rank = number of gallery items with a strictly higher score; i2t takes the image's best caption."""
    n_images, n_texts = scores.shape
    i2t = [min(sum(scores[i, u] > scores[i, t] for u in range(n_texts))
               for t in range(n_texts) if text_image_ids[t] == i) for i in range(n_images)]
    t2i = [sum(scores[i, t] > scores[text_image_ids[t], t] for i in range(n_images)) for t in range(n_texts)]
    result = {}
    for k in ks:
        result[f"i2t_r{k}"] = 100.0 * sum(r < k for r in i2t) / n_images
        result[f"t2i_r{k}"] = 100.0 * sum(r < k for r in t2i) / n_texts
    return result


@pytest.mark.parametrize("chunk_size", [1, 2, 256])
def test_recall_from_scores_matches_brute_force_with_ties_and_several_captions(chunk_size):
    scores = torch.tensor([[0.9, 0.9, 0.1, 0.5, 0.3],  # image 0's captions 0, 1; 0.9 tie is no loss
                           [0.2, 0.95, 0.4, 0.3, 0.6],  # image 1's caption 2 ranks third
                           [0.9, 0.1, 0.8, 0.7, 0.1]], dtype=torch.float64)  # image 2's captions 3, 4
    ids = [0, 0, 1, 2, 2]
    got = recall_at_k_from_scores(lambda i, t: scores[i][:, t], 3, 5, ks=(1, 2), text_image_ids=torch.tensor(ids),
                                  chunk_size=chunk_size)
    assert got == pytest.approx(brute_force_from_matrix(scores.numpy(), ids, (1, 2)), abs=1e-9)
    # by hand: i2t ranks 0 (0.9 ties count no loss), 2 (0.95, 0.6 above 0.4), 2 (0.9, 0.8 above 0.7);
    # t2i ranks: caption 0: 0 (tie with image 2), 1: 1, 2: 1, 3: 0, 4: 2
    assert got == pytest.approx({"i2t_r1": 100 / 3, "i2t_r2": 100 / 3, "t2i_r1": 40.0, "t2i_r2": 80.0}, abs=1e-9)


def test_recall_from_scores_rejects_an_image_without_captions():
    with pytest.raises(ValueError, match="image 2 has no caption"):
        recall_at_k_from_scores(lambda i, t: torch.zeros(len(i), len(t)), 3, 2, text_image_ids=torch.tensor([0, 1]))


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = tmp_path_factory.mktemp("finelip_eval")
    image_ids = [f"im{i}" for i in range(6)]
    store = write_store(root / "store", image_ids)
    ids = image_ids + image_ids[:3]  # images 0-2 have two captions
    manifest = pd.DataFrame({"image_id": ids, "image_path": [str(root / f"{i}.jpg") for i in ids],
                             "caption": make_captions(len(ids), seed=3)})
    return manifest, store


def test_finelip_evaluation_ranks_by_its_blended_score(split):
    from hnclip.data.image_store import ImageStore, to_model_input

    manifest, store_dir = split
    store = ImageStore(store_dir)
    torch.manual_seed(0)
    model = create_model("micro", seed=1)
    fw = build_framework(TrainConfig(framework="finelip"), model)
    with torch.no_grad():  # one forward of everything, the full matrix at once: the reference
        pixels = to_model_input(store.read(np.arange(6)), model.image_mean, model.image_std)
        images = fw.encode_images(model.eval(), pixels)
        texts = fw.encode_texts(model, model.tokenize(list(manifest["caption"])))
        full = fw.score(images, texts).double().numpy()
    ids = [i % 6 for i in range(9)]
    expected = brute_force_from_matrix(full, ids, (1, 5, 10))
    got = evaluate_model(model, manifest, store, batch_size=4, device="cpu", framework=fw, score_chunk=2)
    assert got == pytest.approx(expected, abs=1e-9)
    cosine = (images["features"] @ texts["features"].T).double().numpy()
    by_cosine = brute_force_from_matrix(cosine, ids, (1, 5, 10))
    assert by_cosine != pytest.approx(expected, abs=1e-9)  # the blend ranks differently here: a real check
    plain = evaluate_model(model, manifest, store, device="cpu")
    assert plain == pytest.approx(by_cosine, abs=1e-9)  # without the framework: cosine of global features


def test_framework_files_round_trip_and_fail_naming_the_file(tmp_path):
    model = create_model("micro", seed=0)
    assert load_framework(save_model(model, tmp_path / "plain"), model) is None  # no framework.json: cosine
    cfg = TrainConfig(framework="finelip", framework_settings={"slots": 2, "score_weight": 0.3})
    fw = build_framework(cfg, model)
    folder = save_model(model, tmp_path / "m")
    save_framework(fw, folder)
    loaded = load_framework(folder, model)
    assert loaded.cfg == cfg and loaded.slots == 2
    assert all(torch.equal(loaded.state_dict()[k], v) for k, v in fw.state_dict().items())

    longclip = build_framework(TrainConfig(), model)
    save_framework(longclip, folder)  # same folder: no stale FineLIP weights left behind
    assert not (folder / "framework.safetensors").exists()
    assert load_framework(folder, model).name == "longclip"

    save_framework(fw, folder)
    meta = json.loads((folder / "framework.json").read_text())
    meta["config"]["finelip"]["slots"] = 3
    (folder / "framework.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"framework\.json: module weights do not fit framework 'finelip'"):
        load_framework(folder, model)
    (folder / "framework.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="framework.safetensors is missing"):
        load_framework(folder, model)


def test_training_set_keeps_the_subset_rows_of_the_manifest_for_frameworks():
    from hnclip.training.inputs import load_training_set

    class Store:
        def row(self, image_id):
            return int(image_id[1:])

    manifest = pd.DataFrame({"image_id": ["a0", "a1", "a2", "a3"], "caption": ["w x", "x y", "y z", "z w"],
                             "short_caption": ["s0", "s1", "s2", "s3"]})
    data = load_training_set(manifest, Store(), "caption", "m.csv", subset_ids=["a3", "a1"])
    assert data.image_ids == ["a1", "a3"]
    assert list(data.manifest["short_caption"]) == ["s1", "s3"] and list(data.manifest.index) == [0, 1]
