"""hnclip.config.validation: one line per error with the key path and a did-you-mean; --config text coerced
to the schema's types where (and only where) it came from the command line."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from hnclip.config.validation import ConfigError, coerce_cli_values, format_key, load_schema, validate_config
from hnclip.config_checks import check_config

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"
SCHEMA = load_schema(SCHEMA_PATH)
MINIMAL = {"benchmarks": {"synthetic": {"adapter": "synthetic", "root": "r", "train_set": "synthetic"}},
           "methods": {"hnclip": {"framework": "longclip", "hn": True}}}


def config(**extra) -> dict:
    return {**copy.deepcopy(MINIMAL), **extra}


def test_key_paths_read_like_the_yaml():
    assert format_key(["experiments", "main", "methods", 0]) == "experiments.main.methods[0]"
    assert format_key(["pairs", 2, "train"]) == "pairs[2].train"
    assert format_key([]) == "(top level)"


def test_text_from_the_command_line_becomes_the_type_the_schema_asks_for():
    # what Snakemake's BaseLoader makes of --config train={epochs: 5, lr: 2e-4, eval_every_epoch: false} ...
    overrides = {"train": {"epochs": "5", "lr": "2e-4", "eval_every_epoch": "false"}, "seeds": ["0", "7"],
                 "backbone": {"checkpoint": "null", "name": "123"},
                 "resources": {"train": {"gpu": "2", "runtime": "1.5", "slurm_partition": "gpu"}}}
    cfg = config(**copy.deepcopy(overrides))
    coerce_cli_values(cfg, overrides, SCHEMA)
    assert cfg["train"] == {"epochs": 5, "lr": 2e-4, "eval_every_epoch": False}
    assert cfg["seeds"] == [0, 7]
    # a string key stays a string, even when it looks like a number; a nullable one can be null
    assert cfg["backbone"] == {"checkpoint": None, "name": "123"}
    # a free-form mapping (resources.*) reads each scalar as YAML would
    assert cfg["resources"]["train"] == {"gpu": 2, "runtime": 1.5, "slurm_partition": "gpu"}
    assert type(cfg["resources"]["train"]["gpu"]) is int


def test_values_from_a_file_are_never_coerced():
    cfg = config(train={"epochs": "5", "warmup_steps": "3"})  # as if a YAML file quoted them
    coerce_cli_values(cfg, {"train": {"warmup_steps": "3"}}, SCHEMA)  # only warmup_steps came from --config
    assert cfg["train"] == {"epochs": "5", "warmup_steps": 3}
    with pytest.raises(ConfigError, match=r"^config key train\.epochs: '5' is not of type integer$"):
        validate_config(cfg, SCHEMA_PATH)


def test_text_that_is_not_the_wanted_type_stays_text_and_fails_validation():
    overrides = {"gamma": "abc", "train": {"epochs": "1.5"}}
    cfg = config(**copy.deepcopy(overrides))
    with pytest.raises(ConfigError) as error:
        validate_config(cfg, SCHEMA_PATH, overrides=overrides)
    assert str(error.value).splitlines() == ["config key gamma: 'abc' is not of type number",
                                             "config key train.epochs: '1.5' is not of type integer"]


@pytest.mark.parametrize("extra, message", [
    ({"trian": {}}, "config key trian: unknown key; did you mean 'train'?"),
    ({"train": {"warmup": 3}}, "config key train.warmup: unknown key; did you mean 'warmup_steps'?"),
    ({"zzz": 1}, "config key zzz: unknown key; known: scale, cpu_kernels, backbone, models, pretrain, benchmarks, train, gamma, "
                 "token_weight, seeds, methods, competitor, tuning, experiments, preprocess, evaluate, statistics, "
                 "export, geometry, report, rehearsal, resources"),
    ({"scale": "toys"}, "config key scale: 'toys' is not allowed; did you mean 'toy'?"),
    ({"experiments": {"main": {"benchmarks": ["synthetic"]}}},
     "config key experiments.main.methods: required, but missing"),
    ({"experiments": {"gamma_sweep": {"benchmarks": ["synthetic"], "method": "hnclip", "gammas": []}}},
     "config key experiments.gamma_sweep.gammas: must not be empty (got [])"),
    ({"seeds": []}, "config key seeds: must not be empty (got [])"),
    ({"gamma": -1}, "config key gamma: -1 is out of range (must be >= 0)"),
])
def test_each_error_is_one_line_with_the_key_the_problem_and_a_suggestion(extra, message):
    with pytest.raises(ConfigError) as error:
        validate_config(config(**extra), SCHEMA_PATH)
    assert str(error.value) == message


def test_a_valid_config_gets_the_schema_defaults_filled_in():
    cfg = validate_config(config(train={"epochs": 2}), SCHEMA_PATH)
    assert cfg["train"]["epochs"] == 2 and cfg["train"]["micro_batch"] == 16  # default filled beside it
    assert cfg["scale"] == "toy" and cfg["experiments"] == {} and cfg["seeds"] == [0, 1]


def test_the_embedded_default_and_the_paper_grid_validate():
    for name in ("config.yaml", "paper.yaml"):
        validate_config(yaml.safe_load((REPO / "config" / name).read_text()), SCHEMA_PATH)


def test_a_main_experiment_without_a_baseline_is_refused_naming_the_key():

    cfg = config(experiments={"main": {"benchmarks": ["synthetic"], "methods": ["hnclip"]}})
    validate_config(cfg, SCHEMA_PATH)
    with pytest.raises(ConfigError, match=r"^config key experiments\.main\.methods: .*no baseline"):
        check_config(cfg)
    cfg = config(experiments={"main": {"benchmarks": ["synthetic"], "methods": ["longclip", "hnclip"]}},
                 methods={**MINIMAL["methods"], "longclip": {"framework": "longclip", "hn": False}})
    check_config(validate_config(cfg, SCHEMA_PATH))
