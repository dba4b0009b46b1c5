"""A YAML syntax error in a config file is reported with its file, line and column: by hnclip's loader
(the embedded default in the Snakefile, `hnclip plan`), and, for a --configfile that Snakemake itself reads
before the workflow starts, by Snakemake's --verbose (the README's advice)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from checkout import copy_checkout, user_env

from hnclip.config.validation import ConfigError, load_config_file

REPO = Path(__file__).resolve().parents[1]
# line 3 opens a flow sequence that line 4 never closes: PyYAML stops at line 4, column 6
BROKEN = "scale: toy\ntrain:\n  lr: [1, 2\nseeds: [0]\n"


def test_a_syntax_error_names_the_file_line_and_column(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text(BROKEN)
    with pytest.raises(ConfigError, match=rf"^config file {path}, line 4, column 6: not valid YAML: "
                                          r"while parsing a flow sequence expected ',' or '\]'"):
        load_config_file(path)


def test_a_file_that_is_not_a_mapping_is_named(tmp_path):
    path = tmp_path / "list.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match=rf"config file {path}: expected a mapping"):
        load_config_file(path)
    (tmp_path / "empty.yaml").write_text("")
    assert load_config_file(tmp_path / "empty.yaml") == {}


def test_hnclip_plan_names_the_line_of_a_broken_configfile(tmp_path):
    path = tmp_path / "site.yaml"
    path.write_text(BROKEN)
    proc = subprocess.run([sys.executable, "-m", "hnclip", "plan", "--configfile", str(path)], capture_output=True,
                          text=True, env={**user_env(), "PYTHONPATH": str(REPO / "src")}, cwd=REPO, timeout=300)
    assert proc.returncode != 0
    assert f"config file {path}, line 4, column 6" in proc.stdout + proc.stderr


def test_snakemake_names_the_line_of_a_broken_embedded_default_before_any_job(tmp_path):
    root = copy_checkout(tmp_path / "checkout")
    (root / "config/config.yaml").write_text(BROKEN)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n"], cwd=root, env=user_env(), capture_output=True,
                          text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"config file {root / 'config/config.yaml'}, line 4, column 6: not valid YAML" in out
    assert "Traceback" not in out


def test_snakemake_verbose_names_the_line_of_a_broken_configfile(tmp_path):
    """Snakemake parses --configfile before the Snakefile runs, so the workflow cannot intercept it; its
    --verbose traceback ends with PyYAML's file, line and column (what the README tells users to add)."""
    path = tmp_path / "site.yaml"
    path.write_text(BROKEN)
    proc = subprocess.run([sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory",
                           str(tmp_path), "-n", "--cores", "1", "--verbose", "--configfile", str(path)],
                          env=user_env(), capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "Config file is not valid JSON or YAML" in out
    assert f'in "{path}", line 4, column 6' in out


def test_a_transformers_backbone_over_finetune_yaml_warns_of_its_leftover_model_name(tmp_path):
    """config/finetune.yaml's open_clip backbone sets ``model: ViT-B-32``; a layer switching to a transformers
    CLIPModel folder keeps it (mappings merge), and the name described another model in the report and the
    conversion record: the config warns naming the key, and says nothing once it is null or for open_clip."""
    from hnclip.config_checks import config_warnings
    from hnclip.workflow_config import load_config

    folder = tmp_path / "my-clip"
    folder.mkdir()
    finetune = Path(__file__).resolve().parents[1] / "config" / "finetune.yaml"
    data = tmp_path / "captions"
    data.mkdir()
    for split in ("train", "test"):
        (data / f"{split}.csv").write_text("filepath\ttitle\n")

    def layered(backbone: dict) -> dict:
        overlay = tmp_path / "layer.yaml"
        overlay.write_text(yaml.safe_dump({"backbone": backbone, "benchmarks": {"my_captions": {"root": str(data)}}}))
        return load_config([finetune, overlay])

    warnings = config_warnings(layered({"source": "transformers", "checkpoint": str(folder)}))
    assert len(warnings) == 1 and "backbone.model" in warnings[0] and "'ViT-B-32'" in warnings[0]
    assert "transformers" in warnings[0] and "null" in warnings[0]
    assert config_warnings(layered({"source": "transformers", "checkpoint": str(folder), "model": None})) == []
    assert config_warnings(layered({})) == []
