"""Per-epoch evaluation tokenises the evaluation captions once per run, and the cached tokens give the
same metrics and per-query ranks as tokenising batch by batch."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from test_train_support import (
    make_captions,
    make_dataset,
    read_csv_rows,
    run_training,
    small_config,
    write_store,
)

from hnclip.config.train import TrainConfig
from hnclip.data.image_store import ImageStore
from hnclip.evaluate import evaluate_model, tokenize_captions
from hnclip.frameworks import build_framework
from hnclip.models import create_model
from hnclip.models.dual_encoder import DualEncoder


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_tokens")
    image_ids = [f"ev{i}" for i in range(7)]
    store = write_store(root / "store", image_ids, seed=5)
    ids = image_ids + image_ids[:3]  # images 0-2 have two captions
    manifest = pd.DataFrame({"image_id": ids, "image_path": [str(root / f"{i}.jpg") for i in ids],
                             "caption": make_captions(len(ids), seed=9)})
    manifest.to_csv(root / "test.csv", index=False)
    return manifest, store, root / "test.csv"


@pytest.mark.parametrize("framework", [None, "finelip"])
def test_cached_tokens_give_the_metrics_and_ranks_of_tokenising_per_batch(split, framework):
    manifest, store_dir, _ = split
    store = ImageStore(store_dir)
    model = create_model("micro", seed=2)
    fw = None if framework is None else build_framework(TrainConfig(framework=framework), model)
    tokens = tokenize_captions(model, manifest)
    assert tokens.shape == (len(manifest), model.context_length)
    for batch_size in (3, 64):  # batches that split the captions, and one that holds them all
        plain = evaluate_model(model, manifest, store, batch_size=batch_size, device="cpu", framework=fw,
                               return_ranks=True)
        cached = evaluate_model(model, manifest, store, batch_size=batch_size, device="cpu", framework=fw,
                                return_ranks=True, tokens=tokens)
        assert cached == plain  # exactly: the same ids go through the same encoder
    with pytest.raises(ValueError, match="tokens has 9 rows, the evaluation manifest 10 captions"):
        evaluate_model(model, manifest, store, device="cpu", tokens=tokens[:9])


def test_the_training_loop_tokenises_the_evaluation_captions_once_per_run(tmp_path, split, monkeypatch):
    manifest, store_dir, manifest_path = split
    eval_captions = [str(c) for c in manifest["caption"]]
    calls = []
    real = DualEncoder.tokenize

    def counting(self, texts):
        calls.append(list(texts) if not isinstance(texts, str) else [texts])
        return real(self, texts)

    monkeypatch.setattr(DualEncoder, "tokenize", counting)
    paths = make_dataset(tmp_path / "data", n=8)
    run_training(paths, tmp_path, small_config(epochs=3), eval_manifest=manifest_path, eval_store_dir=store_dir)
    eval_calls = [c for c in calls if set(c) <= set(eval_captions)]
    assert eval_calls == [eval_captions]  # three evaluations, one tokenisation of the whole split
    assert len(read_csv_rows(tmp_path / "out" / "epochs.csv")) == 3

    # and the logged metrics are the uncached path's: re-evaluate the final model the old way
    from hnclip.models import load_model

    final = evaluate_model(load_model(tmp_path / "out" / "model"), manifest, ImageStore(store_dir), device="cpu")
    last = read_csv_rows(tmp_path / "out" / "epochs.csv")[-1]
    assert all(float(last[k]) == pytest.approx(v, abs=1e-9) for k, v in final.items())
    assert torch.equal(tokenize_captions(load_model(tmp_path / "out" / "model"), manifest),
                       real(load_model(tmp_path / "out" / "model"), eval_captions))


def test_the_loop_evaluates_every_given_split_after_each_epoch_and_names_it(tmp_path, split):
    # a DOCCI run is evaluated after each epoch on DOCCI and Long-DCI: two splits here, each row naming
    # its benchmark, the same metrics as evaluating the split alone, and each tokenised once
    manifest, store_dir, manifest_path = split
    other = manifest.iloc[:5].copy()
    other.to_csv(tmp_path / "other.csv", index=False)
    paths = make_dataset(tmp_path / "data", n=8)
    run_training(paths, tmp_path, small_config(epochs=2), eval_manifest=[manifest_path, tmp_path / "other.csv"],
                 eval_store_dir=[store_dir, store_dir], eval_benchmark=["docci", "long_dci"])
    rows = read_csv_rows(tmp_path / "out" / "epochs.csv")
    assert [(r["epoch"], r["benchmark"]) for r in rows] == [("1", "docci"), ("1", "long_dci"), ("2", "docci"),
                                                           ("2", "long_dci")]
    ranks = read_csv_rows(tmp_path / "out" / "epoch_ranks.csv")
    assert [len(r["text_image"].split()) for r in ranks] == [10, 5, 10, 5]
    from hnclip.models import load_model

    final = evaluate_model(load_model(tmp_path / "out" / "model"), other, ImageStore(store_dir), device="cpu")
    assert all(float(rows[-1][k]) == pytest.approx(v, abs=1e-9) for k, v in final.items())


@pytest.mark.parametrize("framework", [None, "finelip"])
def test_captions_batched_by_length_come_back_in_manifest_order_with_their_own_features(split, framework):
    # encode_split batches captions by token length (less padding); each row's features must be the ones
    # that caption gets encoded alone, in the manifest's order, whatever the batch size
    from hnclip.evaluate import encode_split, encode_split_with_framework

    manifest, store_dir, _ = split
    manifest = manifest.copy()
    words = str(manifest["caption"].iloc[0]).split()
    manifest["caption"] = [" ".join(words[:3 + (7 * i) % 11]) for i in range(len(manifest))]  # mixed lengths
    model = create_model("micro", seed=2).eval()
    store = ImageStore(store_dir)
    fw = None if framework is None else build_framework(TrainConfig(framework=framework), model).eval()
    with torch.no_grad():
        if fw is None:
            alone = {"features": torch.cat([model.encode_text(model.tokenize([c])) for c in manifest["caption"]])}
        else:
            each = [fw.encode_texts(model, model.tokenize([c])) for c in manifest["caption"]]
            alone = {k: torch.cat([e[k] for e in each]) for k in each[0]}
    for batch_size in (3, 64):
        if fw is None:
            _, texts = encode_split(model, manifest, store, batch_size=batch_size, device="cpu")
            texts = {"features": texts}
        else:
            _, texts = encode_split_with_framework(fw, model, manifest, store, batch_size=batch_size, device="cpu")
        assert texts.keys() == alone.keys()
        for key, value in alone.items():
            torch.testing.assert_close(texts[key], value, rtol=0, atol=1e-5)
