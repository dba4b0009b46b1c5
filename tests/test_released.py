"""Released checkpoints (`models:`) and fine-tuning on your data (scale own): the config checks name their key,
the released table's cells are the ones derived here by hand, the released table is laid out as the main table,
config/finetune.yaml plans prepare, train, evaluate, table, card and export only, and a report on your data
names your benchmark and judges nothing of the paper."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import copy_checkout, user_env
from hub_cache import write_hub_cache

from hnclip import released
from hnclip.config.validation import ConfigError, validate_config
from hnclip.config_checks import check_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def _config(**extra) -> dict:
    base = {
        "backbone": {"source": "openai", "checkpoint": "x.pt"},
        "benchmarks": {
            "mine": {"label": "Mine", "adapter": "table", "root": "/data/mine", "train_set": "mine",
                     "table": {"files": {"train": "a.csv", "test": "b.csv"}}},
            "other": {"adapter": "table", "root": "/data/other", "splits": ["test"], "table": {"files": {"test": "c.csv"}}},
            "trainonly": {"adapter": "table", "root": "/data/t", "splits": ["train"], "table": {"files": {"train": "t.csv"}}},
        },
        "methods": {"longclip": {"label": "FT", "framework": "longclip", "hn": False},
                    "hnclip": {"framework": "longclip", "hn": True}},
        "experiments": {"main": {"benchmarks": ["mine"], "methods": ["longclip", "hnclip"]}},
        "seeds": [0],
    }
    for key, value in extra.items():
        base[key] = value
    return validate_config(base, SCHEMA)


@pytest.fixture()
def hub_cache(tmp_path, monkeypatch):
    """A Hugging Face Hub cache (HF_HUB_CACHE) holding openai/clip-vit-base-patch16's config.json, in the cache's
    layout (refs/main names the snapshot), so a config naming that Hub id checks without a network."""
    cache = write_hub_cache(tmp_path / "hub-cache", "openai/clip-vit-base-patch16")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_models_entries_are_checked_naming_the_key(hub_cache):
    check_config(_config(models={"ok": {"source": "transformers", "checkpoint": "openai/clip-vit-base-patch16"}}))
    cases = [
        ({"m": {"source": "open_clip", "checkpoint": "laion2b_s34b_b79k"}}, r"models\.m\.model: required for source open_clip"),
        ({"m": {"source": "goal", "checkpoint": "goal.pth"}}, r"models\.m\.base: required for source goal"),
        ({"m": {"source": "longclip"}}, r"models\.m\.checkpoint: required for source longclip"),
        ({"m": {"source": "finelip", "checkpoint": "f.pt", "stretch": True}}, r"models\.m\.stretch: source finelip has"),
        ({"m": {"source": "openai", "checkpoint": "o.pt", "base": "x/y"}}, r"models\.m\.base: only for sources goal"),
        ({"m": {"source": "openai", "checkpoint": "o.pt", "benchmarks": ["mien"]}},
         r"models\.m\.benchmarks\[0\]: unknown benchmark 'mien'; did you mean 'mine'"),
        ({"m": {"source": "openai", "checkpoint": "o.pt", "benchmarks": ["trainonly"]}},
         r"models\.m\.benchmarks\[0\]: benchmark 'trainonly' has no test split"),
    ]
    for models, message in cases:
        with pytest.raises(ConfigError, match=message):
            check_config(_config(models=models))
    with pytest.raises(ConfigError, match=r"models"):
        _config(models={"../escape": {"source": "openai", "checkpoint": "o.pt"}})


def test_a_models_row_naming_a_local_file_or_folder_that_is_not_there_fails_at_config_time(tmp_path, monkeypatch,
                                                                                           hub_cache):
    monkeypatch.chdir(tmp_path)  # relative paths are read from the working directory, as Snakemake's
    (tmp_path / "weights").mkdir()
    (tmp_path / "weights" / "goal.pth").write_bytes(b"")
    (tmp_path / "weights" / "base-clip").mkdir()
    check_config(_config(models={"g": {"source": "goal", "checkpoint": "weights/goal.pth", "base": "weights/base-clip"},
                                 "hub": {"source": "transformers", "checkpoint": "openai/clip-vit-base-patch16"}}))
    cases = [
        ({"source": "goal", "checkpoint": "weights/gaol.pth", "base": "weights/base-clip"},
         r"models\.m\.checkpoint: no such file weights/gaol\.pth"),
        ({"source": "openai", "checkpoint": "ViT-B-16.pt"}, r"models\.m\.checkpoint: no such file ViT-B-16\.pt"),
        # spelled like a Hub id OWNER/NAME, but weights/ is a folder here: a missing local folder
        ({"source": "transformers", "checkpoint": "weights/my-clip"},
         r"models\.m\.checkpoint: no such folder weights/my-clip .*weights/ exists here.*not a Hub id"),
        ({"source": "transformers", "checkpoint": "./my-clip"}, r"models\.m\.checkpoint: no such folder \./my-clip"),
        ({"source": "goal", "checkpoint": "weights/goal.pth", "base": "weights/base-clp"},
         r"models\.m\.base: no such folder weights/base-clp"),
    ]
    for entry, message in cases:
        with pytest.raises(ConfigError, match=message):
            check_config(_config(models={"m": entry}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hub-cache", "weights"]  # nothing made


def test_converting_a_missing_relative_transformers_folder_says_so_and_leaves_nothing(tmp_path, monkeypatch):
    from hnclip.models.format_loaders import fetch_transformers_model

    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights").mkdir()
    with pytest.raises(FileNotFoundError, match=r"models\.m\.checkpoint 'weights/my-clip': no such folder"):
        fetch_transformers_model("weights/my-clip", tmp_path / "downloads", key="models.m.checkpoint")
    assert not (tmp_path / "downloads").exists() and list((tmp_path / "weights").iterdir()) == []


def test_a_hub_id_spelled_folder_that_is_no_folder_and_no_reachable_hub_model_fails_at_config_time(tmp_path,
                                                                                                 monkeypatch):
    """`weights/my-clip` with neither weights/ nor weights/my-clip here reads as a Hub id; offline (no network, or
    HF_HUB_OFFLINE) and with no copy in resources/checkpoints/ or the Hub cache, the check says so in one line
    naming the key and the path, instead of the conversion job failing with the Hub's generic message."""
    import httpx
    from huggingface_hub import HfApi

    from hnclip import hub_models

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(hub_models, "_ASKED", {})
    asked = []

    def no_network(self, repo_id, **kwargs):  # what huggingface_hub raises without a network
        asked.append(repo_id)
        raise httpx.ConnectError("[Errno -2] Name or service not known")

    monkeypatch.setattr(HfApi, "model_info", no_network)
    models = {"mine": {"source": "transformers", "checkpoint": "weights/my-clip"}}
    with pytest.raises(ConfigError) as error:
        check_config(_config(models=models))
    text = str(error.value)
    assert text.startswith("config key models.mine.checkpoint: 'weights/my-clip' is neither a folder here "
                           f"(relative paths are read from {tmp_path}) nor a Hub model reachable from here: the Hub "
                           "cannot be reached from here (ConnectError: [Errno -2] Name or service not known)")
    assert "resources/checkpoints/weights--my-clip/" in text and "\n" not in text and asked == ["weights/my-clip"]
    # a base spelled as a Hub id, likewise
    goal = {"source": "goal", "checkpoint": str(tmp_path / "g.pth"), "base": "openai/clip-vit-base-patch16"}
    (tmp_path / "g.pth").write_bytes(b"")
    with pytest.raises(ConfigError, match=r"^config key models\.g\.base: 'openai/clip-vit-base-patch16' is neither"):
        check_config(_config(models={"g": goal}))
    # HF_HUB_OFFLINE: the Hub is not asked
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match=r"models\.mine\.checkpoint: .*HF_HUB_OFFLINE is set and neither "
                                          r"resources/checkpoints/weights--my-clip/ nor the Hub cache"):
        check_config(_config(models=models))
    assert asked == ["weights/my-clip", "openai/clip-vit-base-patch16"]
    # a job's own parse of the workflow never asks the Hub; a copy fetched before counts as reachable
    monkeypatch.delenv("HF_HUB_OFFLINE")
    check_config(_config(models=models), probe_hub=False)
    (tmp_path / "resources/checkpoints/weights--my-clip").mkdir(parents=True)
    (tmp_path / "resources/checkpoints/weights--my-clip/config.json").write_text("{}")
    monkeypatch.setattr(hub_models, "_ASKED", {})
    check_config(_config(models=models))
    assert len(asked) == 2


def test_a_failed_hub_fetch_names_key_and_path_and_leaves_no_folder(tmp_path, monkeypatch):
    from hnclip.models.format_loaders import fetch_transformers_model

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # offline: the Hub cache alone, which is empty
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    with pytest.raises(FileNotFoundError) as error:
        fetch_transformers_model("weights/my-clip", tmp_path / "downloads", key="models.mine.checkpoint")
    text = str(error.value)
    assert text.startswith("models.mine.checkpoint 'weights/my-clip': neither a folder here (relative paths are "
                           f"read from {tmp_path}) nor a Hub model that could be fetched (") and "\n" not in text
    assert not (tmp_path / "downloads" / "weights--my-clip").exists()
    assert [p.name for p in (tmp_path / "downloads").iterdir()] == [".weights--my-clip.fetching"]  # the lock only


def test_backbone_sources_of_the_ecosystem_are_checked_naming_the_key():
    check_config(_config(backbone={"source": "open_clip", "model": "local-dir:/m"}))
    check_config(_config(backbone={"source": "transformers", "checkpoint": "openai/clip-vit-base-patch32",
                                   "stretch": True}))
    with pytest.raises(ConfigError, match=r"backbone\.model: required when backbone\.source is 'open_clip'"):
        check_config(_config(backbone={"source": "open_clip", "checkpoint": "laion2b_s34b_b79k"}))
    with pytest.raises(ConfigError, match=r"backbone\.checkpoint: required when backbone\.source is 'transformers'"):
        check_config(_config(backbone={"source": "transformers"}))
    with pytest.raises(ConfigError, match=r"backbone\.stretch: .*source 'longclip' has its positions already"):
        check_config(_config(backbone={"source": "longclip", "checkpoint": "l.pt", "stretch": True}))


def test_the_released_table_holds_the_main_rows_beside_the_released_ones():
    config = _config(models={"goal_mine": {"label": "GOAL", "source": "goal", "checkpoint": "g.pth", "base": "a/b",
                                           "benchmarks": ["mine"]},
                             "vitb": {"source": "open_clip", "model": "ViT-B-32", "checkpoint": "laion2b_s34b_b79k"}})
    assert released.released_evaluations(config) == [("goal_mine", "mine"), ("vitb", "mine"), ("vitb", "other")]
    spec = released.released_spec(config)
    rows = [(c["row"], c["group"], c["eval_path"]) for c in spec["cells"]]
    # by hand: main's zero-shot and its two methods on the one benchmark main scores, then the released rows
    assert rows == [
        ("Zero-shot backbone", "Mine", "results/evals/zeroshot/mine.json"),
        ("FT", "Mine", "results/evals/mine/longclip/g0/f1/s0/mine.json"),
        ("hnclip", "Mine", "results/evals/mine/hnclip/g0.5/f1/s0/mine.json"),
        ("GOAL (released)", "Mine", "results/evals/released/goal_mine/mine.json"),
        ("vitb (released)", "Mine", "results/evals/released/vitb/mine.json"),
        ("vitb (released)", "other", "results/evals/released/vitb/other.json"),
    ]
    assert spec["cells"][3]["run"] == {"train_set": "released", "method": "goal_mine", "gamma": 0.0, "fraction": 0.0,
                                       "seed": 0}
    assert released.convert_options(config, "goal_mine") == "--format goal --source g.pth --base a/b"
    stretched = _config(models={"s": {"source": "transformers", "checkpoint": "my dir", "stretch": True}})
    assert released.convert_options(stretched, "s") == "--format transformers --source 'my dir' --stretch 20"


def _record(run: dict, bench: str, hits: list[int]) -> dict:
    """An evaluation record of len(hits) images, one caption each, image i ranking its caption at hits[i]."""
    n = len(hits)
    metrics = {f"{d}_r{k}": 100.0 * sum(r < k for r in hits) / n for d in ("i2t", "t2i") for k in (1, 5, 10, 25, 50)}
    return {"run": run, "eval_benchmark": bench, "split": "test", "n_images": n, "n_texts": n, "metrics": metrics,
            "ranks": {"i2t": hits, "t2i": hits, "text_image": list(range(n))}}


def test_the_released_table_is_the_main_layout_with_released_rows_by_their_records(tmp_path):
    from hnclip.analysis.tables import build_table

    config = _config(models={"vitb": {"source": "open_clip", "model": "ViT-B-32", "checkpoint": "t",
                                      "benchmarks": ["mine"]}})
    spec = released.released_spec(config)
    hits = {"zeroshot": [0, 3, 7, 12], "longclip": [0, 0, 2, 5], "hnclip": [0, 0, 0, 9], "vitb": [1, 0, 0, 0]}
    records = [_record(c["run"], c["eval_benchmark"], hits["zeroshot" if c.get("zeroshot") else c["run"]["method"]])
               for c in spec["cells"]]
    table = build_table(spec, records)
    assert list(table.index) == ["Zero-shot backbone", "FT", "hnclip", "vitb (released)"]
    r1 = table[("Mine", "I->T", "R@1", "mean")]
    assert list(r1) == [25.0, 50.0, 75.0, 75.0]  # images ranking their caption first, in percent
    assert table[("Mine", "T->I", "R@5", "mean")]["vitb (released)"] == 100.0
    behind = table.attrs["runs"]
    assert (("vitb (released)",), ("Mine", "I->T", "R@1")) not in behind  # no run of ours behind a released row
    assert behind[(("FT",), ("Mine", "I->T", "R@1"))][0]["method"] == "longclip"


def test_finetune_config_plans_no_pretraining_and_no_claims(tmp_path):
    """config/finetune.yaml as shipped, its benchmark's root pointed at a folder with the two tables: a dry run's
    jobs are the fine-tune's alone."""
    root = copy_checkout(tmp_path / "checkout")
    data = tmp_path / "data"
    data.mkdir()
    for name in ("train.csv", "test.csv"):
        (data / name).write_text("filepath\ttitle\n")
    (root / "mine.yaml").write_text(yaml.safe_dump({"benchmarks": {"my_captions": {"root": str(data)}}}))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/finetune.yaml", "mine.yaml"],
                          cwd=root, env=user_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", proc.stdout.split("Job stats:")[1].split("total")[0], re.M))
    assert counts == {"fetch_benchmark": "1", "prepare": "2", "convert_backbone": "1", "evaluate_zeroshot": "1",
                      "train": "1", "spec": "1", "table": "1", "table_epochs": "1", "table_cost": "1",
                      "figure_epochs": "1", "figure_training": "1", "export": "2", "summary": "1", "report": "1",
                      "all": "1"}, counts
    assert "--format open_clip --source laion2b_s34b_b79k --model ViT-B-32 --context-length 77" in proc.stdout


def test_a_report_on_your_data_names_it_and_judges_nothing(tmp_path):
    from hnclip.analysis.table_format import write_table
    from hnclip.analysis.tables import build_table
    from hnclip.cli.common import caption
    from hnclip.plan import experiment_spec
    from hnclip.report import render_report_from_files

    config = _config(scale="own")
    spec = experiment_spec(config, "main")
    hits = {"zeroshot": [0, 3, 7], "longclip": [0, 0, 2], "hnclip": [0, 0, 0]}
    records = [_record(c["run"], c["eval_benchmark"], hits["zeroshot" if c.get("zeroshot") else c["run"]["method"]])
               for c in spec["cells"]]
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs/main.json").write_text(json.dumps(spec))
    evals = []
    for i, record in enumerate(records):
        path = tmp_path / f"eval{i}.json"
        path.write_text(json.dumps(record))
        evals.append(str(path))
    for cell, path in zip(spec["cells"], evals, strict=True):
        cell["eval_path"] = path
    (tmp_path / "specs/main.json").write_text(json.dumps(spec))
    summaries = {"results/runs/mine/longclip/g0/f1/s0": {"n_train": 60, "run": {"train_set": "mine"}}}
    text = caption(spec, records, summaries)
    assert text == "main: run on your data, Mine: 60 training pairs, 3 test images"
    write_table(build_table(spec, records), tmp_path / "tables/main", caption=text)
    out = render_report_from_files(tmp_path / "report.html", "Fine-tuning on your data", "own",
                                   {"main": spec}, [tmp_path / "tables/main.csv"], [], [], [], evals=evals)
    html = out.read_text()
    assert 'class="banner own" id="scale-banner">Results on your data: Mine.' in html
    assert "Mine: 3 test images" in html and 'id="claims"' not in html and 'id="paper-vs-ours"' not in html
    assert "standing in" not in html and "Toy-scale" not in html
    with pytest.raises(ValueError, match="judges no claim"):
        render_report_from_files(tmp_path / "r2.html", "t", "own", {"main": spec}, [tmp_path / "tables/main.csv"],
                                 [], [], [], evals=evals, claims={"claims": [], "power": {}})


def test_hnclip_report_needs_claims_except_on_your_data(tmp_path):
    from hnclip.cli import main

    with pytest.raises(SystemExit, match="--claims is required at scale toy"):
        main(["report", "--title", "t", "--scale", "toy", "--out", str(tmp_path / "r.html")])
