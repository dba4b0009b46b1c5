# The backbone: where it comes from (backbone.source), its convert, install, pretrain-pool and release jobs'
# inputs and options, the prepare jobs' model input, and the files the checkout ships.
# Included after common.smk, before the rules.

# what backbone.source is (hnclip.checkpoint_formats): released, pretrained in the DAG, or converted
BACKBONE_ORIGIN = backbone_origin(config)
# a backbone converted from open_clip or transformers brings its own geometry: the image stores are prepared
# after it, at its interpolation (data.smk)
ECOSYSTEM_BACKBONE = BACKBONE_ORIGIN.ecosystem


def backbone_convert_options():
    """`hnclip convert-checkpoint`'s options for the backbone (checkpoint, model, pins, stretch)."""
    backbone = config["backbone"]
    options = [
        ("--source", backbone["checkpoint"]),
        # only open_clip reads an architecture name; a transformers CLIPModel brings its own (config_warnings)
        (
            "--model",
            backbone.get("model") if BACKBONE_ORIGIN.reads_model else None,
        ),
        ("--revision", backbone["revision"]),
        ("--sha256", backbone["sha256"]),
    ]
    if backbone.get("stretch"):
        options.append(("--stretch", backbone["frozen_positions"]))
    return " ".join(
        f"{flag} {shlex.quote(str(value))}" for flag, value in options if value
    )


def get_prepare_inputs(wildcards):
    """What a prepare job reads: the benchmark's source record, and a converted backbone whose geometry (image
    size, interpolation) the store takes."""
    inputs = {"source": paths.source_record_path(wildcards.benchmark)}
    if ECOSYSTEM_BACKBONE:
        inputs["model"] = paths.BACKBONE_MODEL
    return inputs


def prepare_model_option(wildcards, input):
    return f"--model {input.model}" if "model" in input.keys() else ""


def backbone_folder():
    """The model folder install_backbone installs: the released one (backbone.checkpoint) or the DAG's own
    pretrained one (backbone.source pretrain). A relative released folder is read from the working
    directory, else from the repository beside the Snakefile (the shipped resources/backbones/), so a run
    in another --directory installs the shipped backbone too."""
    if BACKBONE_ORIGIN.ships_its_spec:
        return shipped_path(config["backbone"]["checkpoint"])
    return paths.PRETRAINED_MODEL


def shipped_path(path):
    """A file or folder the repository ships (a released backbone, the tuning record), named relative to the
    working directory: read there, else from the repository beside the Snakefile, so that a run in another
    --directory finds what the checkout ships."""
    path = Path(path)
    shipped = Path(workflow.basedir) / path
    if not path.is_absolute() and not path.exists() and shipped.exists():
        return str(shipped)
    return str(path)


def backbone_inputs():
    """install_backbone's inputs: the released folder's two files, or the pretrain stage's folder (a
    directory output, whose files cannot be named as inputs)."""
    if BACKBONE_ORIGIN.ships_its_spec:
        return [
            f"{backbone_folder()}/{name}"
            for name in ("model.safetensors", "model.json")
        ]
    return [backbone_folder()]


def pool_slice_options(slices):
    """`hnclip pool`'s slice options for pretrain.pool.slices (none when count is 0: the whole family)."""
    if not slices["count"]:
        return {}
    return {
        "slices": slices["count"],
        "slice_inventory": slices["inventory"],
        "slice_objects": " ".join(str(n) for n in slices["objects"]),
        "slice_backgrounds": slices["backgrounds"],
    }


def release_scored_splits():
    """Input key -> label of every split a release states zero-shot R@1 on: the pretrain benchmark's
    validation and test splits, and its train set's transfer targets' test splits."""
    bench = config["pretrain"]["benchmark"]
    splits = {
        f"{bench}_{s}": f"{bench}/{s}"
        for s in ("val", "test")
        if s in plan.benchmark_splits(config["benchmarks"][bench])
    }
    train_set = config["benchmarks"][bench].get("train_set") or bench
    for target in plan.transfer_targets(config, train_set):
        splits[f"{target}_test"] = f"{target}/test"
    return splits


def get_release_figure_inputs(wildcards):
    bench = config["pretrain"]["benchmark"]
    train_set = config["benchmarks"][bench].get("train_set") or bench
    inputs = {
        "model": paths.PRETRAINED_MODEL,
        "train_manifest": paths.manifest_path(train_set, "train"),
        "train_images": paths.images_dir(train_set, "train"),
    }
    for key, label in release_scored_splits().items():
        benchmark, split = label.split("/")
        inputs[f"{key}_manifest"] = paths.manifest_path(benchmark, split)
        inputs[f"{key}_images"] = paths.images_dir(benchmark, split)
    return inputs


def release_recipe():
    """What the released backbone is a function of: the pretrain recipe, the architecture settings, the
    first seed and the CPU kernel setting (the config hash its card records)."""
    return {
        "pretrain": config["pretrain"],
        "backbone": {
            k: config["backbone"][k]
            for k in ("name", "image_size", "context_length", "frozen_positions")
        },
        "seed": config["seeds"][0],
        "cpu_kernels": config["cpu_kernels"],
    }
