"""Cross-reference checks of a validated workflow config that the JSON schema cannot express
(:func:`check_config`); each error names the offending key."""

from __future__ import annotations

from hnclip.checkpoint_formats import BACKBONE_FIELD_HINTS, backbone_origin, stretchable_sources
from hnclip.config.errors import fail, unknown
from hnclip.experiments import experiment_entry, experiment_names
from hnclip.plan.benchmarks import benchmark_splits
from hnclip.released import check_models
from hnclip.tuning.section import check_tuning

__all__ = ["check_config", "config_warnings", "fail", "unknown"]


_OWN_FILES = {"table": "files", "webdataset": "shards"}  # your own captions: adapter -> its splits' key


def _check_own_captions(name: str, bench: dict) -> None:
    """Adapters table and webdataset need their block, whose files or shards list exactly the splits."""
    adapter = bench["adapter"]
    for other in _OWN_FILES:
        if other != adapter and other in bench:
            fail(f"benchmarks.{name}.{other}", f"only for adapter {other} (this benchmark's adapter is {adapter!r})")
    if adapter not in _OWN_FILES:
        return
    key = f"benchmarks.{name}.{adapter}"
    files = (bench.get(adapter) or {}).get(_OWN_FILES[adapter]) or {}
    if not files:
        fail(f"{key}.{_OWN_FILES[adapter]}", f"required for adapter {adapter}: each split's "
                                              f"{'table file' if adapter == 'table' else 'shards'}, "
                                              "e.g. {train: ..., test: ...} (docs/own-data.md, Your own captions)")
    splits = benchmark_splits(bench)
    for split in splits:
        if split not in files:
            fail(f"{key}.{_OWN_FILES[adapter]}", f"has no {split!r} entry, but benchmarks.{name}.splits lists "
                                                  f"{split!r} (set splits: {sorted(files)} if that is all there is)")
    for split in files:
        if split not in splits:
            fail(f"{key}.{_OWN_FILES[adapter]}.{split}", f"split {split!r} is not in benchmarks.{name}.splits "
                                                          f"{splits}; add it there or remove it here")


def check_config(config: dict, probe_hub: bool = True) -> None:
    """Cross-reference checks the JSON schema cannot express; each error names the offending key.

    ``probe_hub``: a Hub model named in ``models:`` with no copy here is looked up on the Hub (one request per
    id, :mod:`hnclip.hub_models`); the workflow turns it off in a job's own parse of the Snakefile."""
    benchmarks, methods = config["benchmarks"], config["methods"]
    for name, bench in benchmarks.items():
        _check_own_captions(name, bench)
        train_set = bench.get("train_set")
        if train_set is not None:
            if train_set not in benchmarks:
                fail(f"benchmarks.{name}.train_set", unknown("benchmark", train_set, benchmarks))
            if "train" not in benchmark_splits(benchmarks[train_set]):
                fail(f"benchmarks.{name}.train_set", f"benchmark {train_set!r} has no train split")
    origin = backbone_origin(config)
    if origin.trained_in_dag:
        bench = config["pretrain"]["benchmark"]
        if bench not in benchmarks:
            fail("pretrain.benchmark", unknown("benchmark", bench, benchmarks))
        long = config["pretrain"]["long"]
        micro_batch = long.get("train", {}).get("micro_batch")
        if micro_batch and micro_batch % long["processes"]:
            fail("pretrain.long.processes", f"{long['processes']} does not divide pretrain.long.train.micro_batch "
                                             f"{micro_batch} (each process takes an even share)")
    for field in origin.needs:
        if not config["backbone"].get(field):
            hint = f" ({BACKBONE_FIELD_HINTS[field]})" if field in BACKBONE_FIELD_HINTS else ""
            fail(f"backbone.{field}", f"required when backbone.source is {origin.name!r}{hint}")
    if config["backbone"].get("stretch") and not origin.stretchable:
        fail("backbone.stretch", f"stretches a converted 77-position tower (sources {', '.join(stretchable_sources())}); "
                                  f"source {origin.name!r} has its positions already")
    check_models(config, probe_hub)
    _check_files_from(benchmarks)
    experiments = config.get("experiments", {})
    for exp_name, exp in experiments.items():
        for i, bench in enumerate(exp.get("benchmarks", [])):
            if bench not in benchmarks:
                fail(f"experiments.{exp_name}.benchmarks[{i}]", unknown("benchmark", bench, benchmarks))
            if not experiment_entry(exp_name).trains:  # scored by other experiments' models: no runs of its own
                if "test" not in benchmark_splits(benchmarks[bench]):
                    fail(f"experiments.{exp_name}.benchmarks[{i}]", f"benchmark {bench!r} has no test split")
                continue
            if benchmarks[bench].get("train_set") is None:
                fail(f"experiments.{exp_name}.benchmarks[{i}]",
                      f"benchmark {bench!r} has no train_set, so it has no in-domain runs")
        where = f"experiments.{exp_name}"
        referenced = [(f"{where}.methods[{i}]", m) for i, m in enumerate(exp.get("methods", []))]
        if "method" in exp:
            referenced.append((f"{where}.method", exp["method"]))
        referenced += [(f"{where}.pairs[{i}].{k}", p[k]) for i, p in enumerate(exp.get("pairs", []))
                       for k in ("plain", "hn") if k in p]
        referenced += [(f"{where}.variants[{i}].method", v["method"]) for i, v in enumerate(exp.get("variants", []))]
        for key, method in referenced:
            if method not in methods:
                fail(key, unknown("method", method, methods))
        for i, pair in enumerate(exp.get("pairs", [])):
            for k in ("train", "eval"):
                if k in pair and pair[k] not in benchmarks:
                    fail(f"experiments.{exp_name}.pairs[{i}].{k}", unknown("benchmark", pair[k], benchmarks))
            if "train" in pair and "train" not in benchmark_splits(benchmarks[pair["train"]]):
                fail(f"experiments.{exp_name}.pairs[{i}].train", f"benchmark {pair['train']!r} has no train split")
    for exp_name in experiment_names():  # each experiment's own checks (hnclip.experiments)
        check = experiment_entry(exp_name).check
        if exp_name in experiments and check is not None:
            check(config, experiments[exp_name])
    _check_preprocess(config, experiments)
    check_tuning(config)
    if "rehearsal" in config and config["scale"] != "rehearsal":
        fail("scale", f"is {config['scale']!r}, but a config with a rehearsal section runs on stand-in files: "
                       "its numbers must be labelled 'rehearsal'")


def _check_files_from(benchmarks: dict) -> None:
    """A benchmark reading another's files (``files_from``) names one that fetches its own, with the same
    adapter and root, so the config shows the one folder both read."""
    for name, bench in benchmarks.items():
        source = bench.get("files_from")
        if source is None:
            continue
        key = f"benchmarks.{name}.files_from"
        if source not in benchmarks or source == name:
            fail(key, unknown("benchmark", source, [b for b in benchmarks if b != name]))
        if benchmarks[source].get("files_from") is not None:
            fail(key, f"benchmark {source!r} reads another benchmark's files itself; name the one that fetches them")
        for field in ("adapter", "root"):
            if bench[field] != benchmarks[source][field]:
                fail(f"benchmarks.{name}.{field}", f"is {bench[field]!r}, but files_from {source!r} reads the files of "
                                                    f"benchmarks.{source}, whose {field} is {benchmarks[source][field]!r}")


def _check_preprocess(config: dict, experiments: dict) -> None:
    """GOAL/StructXLIP runs need a segmenter that can work on their training sets."""
    from hnclip.frameworks.registry import framework_entry
    from hnclip.plan.grid import _runs_of

    pre = config.get("preprocess", {})
    for run in (r for name in experiments for r in _runs_of(config, name)):
        if not framework_entry(config["methods"][run.method]["framework"]).products:
            continue
        adapter = config["benchmarks"][run.train_set]["adapter"]
        if pre.get("segmenter") == "oracle" and not adapter.startswith("synthetic"):
            fail("preprocess.segmenter", f"'oracle' works on synthetic benchmarks only, but method "
                                          f"{run.method!r} trains on {run.train_set!r} ({adapter})")
        if pre.get("segmenter", "sam") == "sam" and not pre.get("sam_model"):
            fail("preprocess.sam_model", f"method {run.method!r} needs segments: set a SAM folder or hf://OWNER/REPO")


def config_warnings(config: dict) -> list[str]:
    """What a valid config holds that it most likely does not mean, one line each naming the key (the workflow
    logs them at config time; nothing stops).

    ``backbone.model`` with ``backbone.source: transformers``: a transformers CLIPModel brings its architecture
    in its own config.json, so the name is not used, and one left over from config/finetune.yaml's open_clip
    backbone (ViT-B-32) would describe another model than the one converted.

    A rate or ``competitor`` that is not the tuning record's choice (``tuning.record``), named with the record
    file (:func:`hnclip.tuning.record.record_warnings`, the check the report's tuning section makes)."""
    from hnclip.tuning.record import record_warnings

    backbone = config.get("backbone") or {}
    warnings = []
    origin = backbone_origin(backbone.get("source"))
    if origin.ecosystem and not origin.reads_model and backbone.get("model"):
        warnings.append(f"config key backbone.model: {backbone['model']!r} is not used with backbone.source "
                        f"transformers (the architecture comes from the config.json of {backbone.get('checkpoint')}); "
                        "set backbone.model: null (config/finetune.yaml sets it for its open_clip backbone)")
    return warnings + record_warnings(config)
