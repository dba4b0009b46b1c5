"""Table captions say which backbone the runs fine-tuned, from the config's ``backbone.source``: the released
toy backbone, one pretrained in the DAG, or a converted checkpoint; never "pretrained in the DAG" of a
backbone that was not (issue: every caption said so, whatever the source)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from hnclip import plan
from hnclip.cli.common import caption

CONFIG = Path(__file__).resolve().parents[1] / "config" / "config.yaml"


@pytest.mark.parametrize(("backbone", "words"), [
    ({"source": "released", "checkpoint": "resources/backbones/hnclip-toy-mini-grid/"},
     "main: toy-scale run (synthetic benchmark, released backbone hnclip-toy-mini-grid)"),
    ({"source": "pretrain", "name": "mini-grid"},
     "main: toy-scale run (synthetic benchmark, backbone mini-grid pretrained in the DAG)"),
    ({"source": "longclip", "checkpoint": "/models/longclip-L.pt", "name": "ViT-L-14"},
     "main: toy-scale run (synthetic benchmark, backbone longclip-L.pt converted from longclip)"),
    ({"source": "open_clip", "model": "hf-hub:org/clip"},
     "main: toy-scale run (synthetic benchmark, backbone clip converted from open_clip)"),
])
def test_a_toy_tables_caption_names_the_backbones_source(backbone, words):
    config = yaml.safe_load(CONFIG.read_text())
    config = copy.deepcopy(config)
    config["backbone"] = backbone
    spec = plan.experiment_spec(config, "main")
    assert spec["backbone"]["source"] == backbone["source"]
    assert caption(spec) == words


def test_the_embedded_default_says_released_and_a_paper_run_names_its_conversion():
    spec = plan.experiment_spec(yaml.safe_load(CONFIG.read_text()), "main")
    assert "released backbone hnclip-toy-mini-grid" in caption(spec) and "pretrained in the DAG" not in caption(spec)
    paper = {"experiment": "main", "scale": "paper", "backbone": {"source": "longclip", "name": "longclip-L.pt"}}
    assert caption(paper) == "main: paper-scale run (backbone longclip-L.pt converted from longclip)"
    # a spec written before the backbone was recorded keeps its old words
    assert caption({"experiment": "main", "scale": "paper"}) == "main: paper-scale run"
    assert caption({"experiment": "main", "scale": "toy"}) == "main: toy-scale run (synthetic benchmark, backbone not recorded)"
