"""Fine-tuning on your own data (config/finetune.yaml, scale own) through Snakemake, offline (marked e2e).

A tab-separated CSV of a few dozen images, a small random open_clip model (open_clip's local-dir: and hf-hub:
formats, the latter in a Hugging Face cache written in tmp_path) and a small random transformers CLIPModel
(save_pretrained, with a bilinear image processor): each serves once as the backbone and as an evaluate-only row of
``models:``. What is checked is what a user of config/finetune.yaml is promised:

- the DAG is prepare, train, evaluate, table, card and export: no backbone pretraining, no claims, no regime;
- the report names the user's benchmark and its sizes and nothing of the paper (no "standing in for DOCCI");
- the released-checkpoints table holds the evaluate-only rows beside the retrained one;
- an evaluate-only row of the very model the backbone was converted from scores exactly the zero-shot row (two
  routes: rule convert_backbone + prepare's store, rule convert_released + a linked store), and a bilinear model's
  stores are resized bilinearly.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch
import yaml
from test_data_own_captions import write_image, write_table

ARCH = {"embed_dim": 32, "quick_gelu": False,
        "vision_cfg": {"image_size": 32, "patch_size": 8, "width": 64, "layers": 1, "head_width": 32},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 1}}
COMMIT = "c" * 40
COLOURS = ("red", "green", "blue", "yellow", "purple", "orange")


def _captions(root):
    rows = [(f"images/{i}.jpg", f"a {COLOURS[i % 6]} photo, number {i}, of a {'big' if i % 2 else 'small'} room")
            for i in range(40)]
    for i in range(40):
        write_image(root / "images" / f"{i}.jpg", 100 + i)
    write_table(root / "train.csv", rows[:28])
    write_table(root / "test.csv", rows[28:] + [("images/30.jpg", "photo thirty, a second caption")])


def _open_clip_folder(folder, seed: int) -> bytes:
    from open_clip.model import CLIP
    from safetensors.torch import save

    torch.manual_seed(seed)
    model = CLIP(**ARCH)
    blob = save({k: v.contiguous() for k, v in model.state_dict().items()})
    folder.mkdir(parents=True)
    config = {"model_cfg": ARCH, "preprocess_cfg": {"mean": [0.48, 0.46, 0.41], "std": [0.27, 0.26, 0.28]}}
    (folder / "open_clip_config.json").write_text(json.dumps(config))
    (folder / "open_clip_model.safetensors").write_bytes(blob)
    return blob


def _transformers_folder(folder, seed: int) -> None:
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor

    from hnclip.export.transformers_format import clip_tokenizer

    config = CLIPConfig(
        text_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2,
                     "max_position_embeddings": 77},
        vision_config={"hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 1, "num_attention_heads": 2,
                       "image_size": 32, "patch_size": 8}, projection_dim=32)
    torch.manual_seed(seed)
    CLIPModel(config).save_pretrained(folder)
    images = CLIPImageProcessor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}, resample=2)
    CLIPProcessor(image_processor=images, tokenizer=clip_tokenizer(77)).save_pretrained(folder)


def _run(root, targets, overlay, env):
    (root / "mine.yaml").write_text(yaml.safe_dump(overlay))
    proc = subprocess.run([sys.executable, "-m", "snakemake", *targets, "--cores", "1", "--configfile",
                           "config/finetune.yaml", "mine.yaml"], cwd=root, env=env, capture_output=True, text=True,
                          timeout=1800)
    if proc.returncode != 0:
        logs = "\n".join(f"== {p}\n{p.read_text()[-1500:]}" for p in (root / "results/logs").rglob("*.log")
                         if p.stat().st_size)
        pytest.fail(f"snakemake failed:\n{proc.stderr[-4000:]}\n{logs[-6000:]}")
    return proc.stderr


@pytest.mark.e2e
def test_your_csv_fine_tunes_from_an_open_clip_model_with_released_rows_beside_it(tmp_path):
    from checkout import copy_checkout, user_env

    from hnclip.rehearsal.hub_cache import populate_hub_cache

    data = tmp_path / "data"
    _captions(data)
    backbone = tmp_path / "oc-backbone"
    _open_clip_folder(backbone, seed=0)
    other = _open_clip_folder(tmp_path / "oc-other", seed=1)
    cache = tmp_path / "hf-cache"
    populate_hub_cache(cache, "model", "someone/oc-tiny", {
        "open_clip_config.json": (tmp_path / "oc-other" / "open_clip_config.json").read_bytes(),
        "open_clip_model.safetensors": other}, COMMIT)
    _transformers_folder(tmp_path / "hf-tiny", seed=2)

    root = copy_checkout(tmp_path / "checkout")
    overlay = {
        "backbone": {"model": f"local-dir:{backbone}", "checkpoint": None, "image_size": 32},
        "benchmarks": {"my_captions": {"label": "My shapes (CSV)", "root": str(data)}},
        "train": {"micro_batch": 8, "epochs": 2},
        "models": {
            "same": {"label": "The backbone itself", "source": "open_clip", "model": f"local-dir:{backbone}"},
            "oc_hub": {"source": "open_clip", "model": "hf-hub:someone/oc-tiny", "revision": COMMIT, "stretch": True},
            "hf_tiny": {"label": "Tiny CLIPModel", "source": "transformers", "checkpoint": str(tmp_path / "hf-tiny")},
        },
    }
    env = user_env(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    log = _run(root, [], overlay, env)
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, re.M))
    assert ran == {"fetch_benchmark", "prepare", "convert_backbone", "train", "evaluate_zeroshot", "spec", "table",
                   "table_epochs", "table_cost", "figure_epochs", "figure_training", "export", "convert_released",
                   "store_released", "evaluate_released", "spec_released", "table_released", "summary", "report",
                   "all"}, ran
    results = root / "results"
    assert not (results / "claims.json").exists() and not (results / "pretrain").exists()
    # config/finetune.yaml trains plain fine-tuning only: the summary says HN-CLIP's difference is not measured
    summary_md = (results / "summary.md").read_text()
    assert "HN-CLIP − plain fine-tuning: not measured (the main experiment trains no 'hnclip'" in summary_md
    assert json.loads((results / "summary.json").read_text())["main"] == {"my_captions": None}

    html = (results / "report.html").read_text()
    assert 'id="scale-banner">Results on your data: My shapes (CSV).' in html
    assert "My shapes (CSV): 28 training pairs, 12 test images (13 captions)" in html
    assert "local-dir:" in html  # the backbone named
    for paper_word in ("standing in", "DOCCI", "synthetic", "claims-summary", "Toy-scale"):
        assert paper_word not in html, paper_word
    released = (results / "tables/released.md").read_text()
    for row in ("Zero-shot backbone", "Fine-tuned (CLIP loss)", "The backbone itself (released)",
                "oc_hub (released)", "Tiny CLIPModel (released)"):
        assert row in released, row

    # the backbone converted twice, by two rules, scores the same queries the same
    zeroshot = json.loads((results / "evals/zeroshot/my_captions.json").read_text())
    same = json.loads((results / "evals/released/same/my_captions.json").read_text())
    assert same["ranks"] == zeroshot["ranks"] and same["metrics"] == zeroshot["metrics"]
    assert (same["n_images"], same["n_texts"]) == (12, 13)
    # a bilinear CLIPModel gets a store of its own, resized bilinearly; the backbone's geometry is linked
    index = json.loads((results / "released/hf_tiny/data/my_captions/test_images/index.json").read_text())
    assert index["resample"] == "bilinear"
    assert (results / "released/same/data/my_captions/test_images/images.npy").stat().st_ino == \
        (results / "data/my_captions/test_images/images.npy").stat().st_ino
    stretched = json.loads((results / "released/oc_hub/model/model.json").read_text())["spec"]
    assert stretched["context_length"] == 248
    for fmt in ("open_clip", "transformers"):
        export = results / "exports/my_captions/longclip/g0/f1/s0" / fmt
        assert (export / "README.md").is_file(), export


@pytest.mark.e2e
def test_a_transformers_backbone_fine_tunes_on_stores_at_its_own_geometry(tmp_path):
    from checkout import copy_checkout, user_env

    data = tmp_path / "data"
    _captions(data)
    _transformers_folder(tmp_path / "hf-tiny", seed=3)
    root = copy_checkout(tmp_path / "checkout")
    overlay = {
        "backbone": {"source": "transformers", "model": None, "checkpoint": str(tmp_path / "hf-tiny"),
                     "image_size": 32},
        "benchmarks": {"my_captions": {"root": str(data)}},
        "train": {"micro_batch": 8, "epochs": 1},
    }
    _run(root, ["results/evals/my_captions/longclip/g0/f1/s0/my_captions.json"], overlay, user_env(HF_HUB_OFFLINE="1"))
    results = root / "results"
    for split in ("train", "test"):
        assert json.loads((results / f"data/my_captions/{split}_images/index.json").read_text())["resample"] == "bilinear"
    record = json.loads((results / "evals/my_captions/longclip/g0/f1/s0/my_captions.json").read_text())
    assert (record["n_images"], record["n_texts"]) == (12, 13)
    # a wrong image size names the key before anything is prepared
    overlay["backbone"]["image_size"] = 64
    (root / "mine.yaml").write_text(yaml.safe_dump(overlay))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "--forceall",
                           "results/data/my_captions/test.csv", "--configfile", "config/finetune.yaml", "mine.yaml"],
                          cwd=root, env=user_env(HF_HUB_OFFLINE="1"), capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0
    assert "backbone.image_size is 64, but the backbone" in proc.stderr + "".join(
        p.read_text() for p in (results / "logs/prepare").glob("*.log"))


@pytest.mark.e2e
@pytest.mark.slow
def test_hn_clip_beside_plain_fine_tuning_on_your_data_gets_a_summary_with_the_paired_difference(tmp_path):
    """experiments.main.methods [longclip, hnclip]: summary.md and summary.json hold HN-CLIP minus plain fine-tuning
    (the records' average R@1, computed here) with an interval around it and each run's last-epoch rise; the report
    shows them with the loss / learning-rate figure and the gallery of the captions whose rank changed most."""
    from checkout import copy_checkout, user_env

    data = tmp_path / "data"
    _captions(data)
    backbone = tmp_path / "oc-backbone"
    _open_clip_folder(backbone, seed=0)
    root = copy_checkout(tmp_path / "checkout")
    overlay = {
        "backbone": {"model": f"local-dir:{backbone}", "checkpoint": None, "image_size": 32},
        "benchmarks": {"my_captions": {"label": "My shapes (CSV)", "root": str(data)}},
        "train": {"micro_batch": 8, "epochs": 2, "lr": 1.0e-3},
        "experiments": {"main": {"benchmarks": ["my_captions"], "methods": ["longclip", "hnclip"]}},
        "export": {"formats": ["open_clip"]},
    }
    log = _run(root, [], overlay, user_env(HF_HUB_OFFLINE="1"))
    ran = set(re.findall(r"^(?:local)?rule (\w+):", log, re.M))
    assert {"summary", "figure_training", "gallery", "report"} <= ran, ran
    results = root / "results"
    records = {m: json.loads((results / f"evals/my_captions/{m}/g{g}/f1/s0/my_captions.json").read_text())
               for m, g in (("hnclip", "0.5"), ("longclip", "0"))}
    average = {m: (r["metrics"]["i2t_r1"] + r["metrics"]["t2i_r1"]) / 2 for m, r in records.items()}
    expected = average["hnclip"] - average["longclip"]
    summary = json.loads((results / "summary.json").read_text())
    main = summary["main"]["my_captions"]
    assert main["difference"] == pytest.approx(expected, abs=1e-9)
    assert main["interval"][0] <= main["difference"] <= main["interval"][1]
    assert (main["against"], main["seeds"]) == ("longclip", 1)
    rises = summary["own"]["my_captions"]["improving"]
    assert [(r["row"], r["epochs"]) for r in rises] == [("Fine-tuned (CLIP loss)", [1, 2]), ("HN-CLIP", [1, 2])]
    md = (results / "summary.md").read_text()
    assert f"HN-CLIP − Fine-tuned (CLIP loss) (plain fine-tuning), average R@1, 95 % paired bootstrap interval over " \
           f"test images: {expected:+.2f} [{main['interval'][0]:+.2f}, {main['interval'][1]:+.2f}] (1 seed)" in md
    html = (results / "report.html").read_text()
    assert 'id="own-results-my_captions"' in html and f"{expected:+.2f}" in html
    for figure in ("epochs", "training", "gallery"):
        assert f'id="figure-{figure}"' in html, figure
