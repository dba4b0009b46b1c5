# The backbone every run fine-tunes (results/backbone/model), by backbone.source:
# - released: a model folder shipped with the repository (the embedded default's toy Long-CLIP in
#   resources/backbones/), checked against backbone.sha256 and installed byte for byte;
# - pretrain: pretrained in the DAG by the `pretrain` recipe below;
# - longclip/openai: a Long-CLIP or OpenAI checkpoint, converted;
# - open_clip/transformers: a model of those libraries (a pretrained tag, a Hub id, a folder), converted with
#   its own preprocessing; the image stores are then prepared at its geometry (data.smk, get_prepare_inputs).
# The `pretrain` recipe is Long-CLIP-L's history at toy scale: CLIP on the short captions of a large pool
# of scenes with a 77-token tower, Long-CLIP's stretch to 248 positions, then Long-CLIP-style training on
# the pool's long captions (the role ShareGPT4V plays). The pool is rendered like the benchmarks and never
# holds one of their scenes. `snakemake backbone_release` rebuilds the released backbone with it.

PRETRAIN = config["pretrain"]
POOL_SOURCES = list(PRETRAIN["pool"]["shares"]) or [PRETRAIN["benchmark"]]
HAS_PRETRAIN_RECIPE = all(b in config["benchmarks"] for b in POOL_SOURCES) and (
    PRETRAIN["benchmark"] in config["benchmarks"]
)

if HAS_PRETRAIN_RECIPE:
    # The long-caption stage runs data-parallel on the CPU (torchrun, gloo): pretrain.long.processes
    # single-threaded processes, each on an even share of the global micro-batch (the contrastive loss
    # spans all of it). Measured on the 2-core machine: the same CPU time per step as one process, so half
    # the wall time, whereas two intra-op threads cost several times the CPU on these small matrices when
    # other jobs run. The count is a config value (a param, so changing it retrains), never derived from
    # --cores: a rerun with other cores must not retrain the backbone and everything after it; one thread
    # per process keeps the numbers independent of the machine too. The short-caption stage stays one
    # process: its steps are so cheap that the gradient all-reduce doubles their CPU time.

    rule pretrain_pool:
        input:
            [f"results/data/{b}/source.json" for b in POOL_SOURCES],
        output:
            manifest="results/pretrain/pool/train.csv",
            images=directory("results/pretrain/pool/train_images"),
        log:
            "results/logs/pretrain/pool.log",
        benchmark:
            "results/benchmarks/pretrain/pool.tsv"
        conda:
            "../../envs/data.yaml"
        params:
            size=lookup(dpath="pretrain/pool/size", within=config),
            seed=lookup(dpath="pretrain/pool/seed", within=config),
            phrasing=lookup(dpath="pretrain/pool/phrasing", within=config),
            benchmark_words=lookup(dpath="pretrain/pool/benchmark_words", within=config),
            image_size=lookup(dpath="backbone/image_size", within=config),
            shares=" ".join(
                str(PRETRAIN["pool"]["shares"].get(b, 1.0)) for b in POOL_SOURCES
            ),
            slices=" ".join(
                f"--{key.replace('_', '-')} {value}"
                for key, value in pool_slice_options(
                    PRETRAIN["pool"]["slices"]
                ).items()
            ),
        shell:
            "python -m hnclip pool --source {input} --share {params.shares} --count {params.size} "
            "--seed {params.seed} --image-size {params.image_size} {params.slices} --phrasing {params.phrasing} "
            "--benchmark-words {params.benchmark_words} "
            "--manifest {output.manifest} --images {output.images} 2> {log}"

    rule init_backbone:
        output:
            directory("results/pretrain/init"),
        log:
            "results/logs/pretrain/init.log",
        conda:
            "../../envs/train.yaml"
        params:
            name=lookup(dpath="backbone/name", within=config),
            context_length=lookup(dpath="pretrain/context_length", within=config),
            seed=config["seeds"][0],
        shell:
            "python -m hnclip init-model --name {params.name} --context-length {params.context_length} "
            "--seed {params.seed} --out {output} 2> {log}"

    rule pretrain_backbone:
        input:
            model="results/pretrain/init",
            manifest=rules.pretrain_pool.output.manifest,
            images=rules.pretrain_pool.output.images,
        output:
            model=directory("results/pretrain/short/model"),
            summary="results/pretrain/short/summary.json",
        log:
            "results/logs/pretrain/short.log",
        benchmark:
            "results/benchmarks/pretrain/short.tsv"
        conda:
            "../../envs/train.yaml"
        threads: 1
        resources:
            **get_resources("train"),
        params:
            overrides=" ".join(
                f"--set {item}"
                for item in override_items(
                    {
                        **PRETRAIN["train"],
                        "caption_column": PRETRAIN["caption_column"],
                        "seed": config["seeds"][0],
                    }
                )
            ),
            out_dir=lambda w, output: Path(output.summary).parent,
        shell:
            "python -m hnclip train --init {input.model} --manifest {input.manifest} --images {input.images} "
            "--out {params.out_dir} --checkpoint-dir results/checkpoints/pretrain_short "
            "--threads 1 {params.overrides} 2> {log}"

    rule stretch_backbone:
        input:
            "results/pretrain/short/model",
        output:
            directory("results/pretrain/stretched"),
        log:
            "results/logs/pretrain/stretch.log",
        conda:
            "../../envs/train.yaml"
        params:
            keep=lookup(dpath="backbone/frozen_positions", within=config),
            context_length=lookup(dpath="backbone/context_length", within=config),
            logit_scale=lookup(dpath="pretrain/long/logit_scale", within=config),
        shell:
            "python -m hnclip stretch --model {input} --keep {params.keep} "
            "--context-length {params.context_length} --logit-scale {params.logit_scale} "
            "--out {output} 2> {log}"

    rule pretrain_long_backbone:
        input:
            model="results/pretrain/stretched",
            manifest=rules.pretrain_pool.output.manifest,
            images=rules.pretrain_pool.output.images,
        output:
            model=directory("results/pretrain/long/model"),
            summary="results/pretrain/long/summary.json",
        log:
            "results/logs/pretrain/long.log",
        benchmark:
            "results/benchmarks/pretrain/long.tsv"
        conda:
            "../../envs/train.yaml"
        threads: PRETRAIN["long"]["processes"]
        resources:
            **get_resources("train"),
        params:
            overrides=" ".join(
                f"--set {item}"
                for item in override_items(
                    {
                        **PRETRAIN["long"]["train"],
                        "caption_column": PRETRAIN["long"]["caption_column"],
                        "seed": config["seeds"][0],
                    }
                )
            ),
            out_dir=lambda w, output: Path(output.summary).parent,
            processes=lookup(dpath="pretrain/long/processes", within=config),
        shell:
            "torchrun --standalone --nproc-per-node {params.processes} -m "
            "hnclip train --init {input.model} --manifest {input.manifest} --images {input.images} "
            "--out {params.out_dir} --checkpoint-dir results/checkpoints/pretrain_long "
            "--threads 1 {params.overrides} 2> {log}"

    # The release: the pretrained model, its figures before fine-tuning and its card, set beside the
    # shipped release (backbone.checkpoint, when backbone.source is released).
    rule backbone_figures:
        input:
            unpack(get_release_figure_inputs),
        output:
            "results/release/figures.json",
        log:
            "results/logs/release/figures.log",
        conda:
            "../../envs/train.yaml"
        threads: get_threads("evaluate")
        resources:
            **get_resources("evaluate"),
        params:
            scored=lambda w, input: " ".join(
                f"{label}={input[f'{key}_manifest']},{input[f'{key}_images']}"
                for key, label in release_scored_splits().items()
            ),
            micro_batch=lookup(dpath="train/micro_batch", within=config),
            batches=lookup(dpath="geometry/n_batches", within=config),
        shell:
            "python -m hnclip backbone-figures --model {input.model} --train-manifest {input.train_manifest} "
            "--train-images {input.train_images} --scored {params.scored} --micro-batch {params.micro_batch} "
            "--batches {params.batches} --threads {threads} --out {output} 2> {log}"

    rule backbone_release:
        input:
            model="results/pretrain/long/model",
            figures="results/release/figures.json",
            short="results/pretrain/short/summary.json",
            long="results/pretrain/long/summary.json",
            timings=[
                f"results/benchmarks/pretrain/{job}.tsv"
                for job in ("pool", "short", "long")
            ],
        output:
            directory(f"results/release/{PRETRAIN['release_name']}"),
        log:
            "results/logs/release/release.log",
        localrule: True
        conda:
            "../../envs/train.yaml"
        params:
            name=PRETRAIN["release_name"],
            recipe=json.dumps(release_recipe(), sort_keys=True),
            shipped=(
                f"--shipped {config['backbone']['checkpoint']}"
                if BACKBONE_ORIGIN.ships_its_spec
                else ""
            ),
        shell:
            "python -m hnclip release-backbone --name {params.name} --model {input.model} "
            "--figures {input.figures} --recipe {params.recipe:q} --summaries short={input.short} "
            "long={input.long} --timings pool={input.timings[0]} short={input.timings[1]} "
            "long={input.timings[2]} {params.shipped} --out {output} 2> {log}"


if BACKBONE_ORIGIN.installed:

    # The backbone folder, checked against backbone.sha256 (released) and copied byte for byte; its files
    # are inputs, so a changed release (or a retrained pretrain stage) reruns what follows.
    rule install_backbone:
        input:
            backbone_inputs(),
        output:
            directory("results/backbone/model"),
        log:
            "results/logs/backbone/install.log",
        conda:
            "../../envs/train.yaml"
        params:
            # the folder that holds the inputs: the released folder's two files, or the pretrain folder
            source=lambda w, input: os.path.commonpath(list(input)),
            pin=(
                f"--sha256 {config['backbone']['sha256']}"
                if config["backbone"]["sha256"]
                else ""
            ),
            image_size=lookup(dpath="backbone/image_size", within=config),
            context_length=lookup(dpath="backbone/context_length", within=config),
        shell:
            "python -m hnclip install-backbone --source {params.source} {params.pin} "
            "--image-size {params.image_size} --context-length {params.context_length} --out {output} 2> {log}"

else:

    # longclip/openai/open_clip/transformers: the checkpoint converted (hnclip.models.convert), its own image
    # normalisation, interpolation and tokenizer kept, Long-CLIP's stretch applied when backbone.stretch asks
    rule convert_backbone:
        output:
            directory("results/backbone/model"),
        log:
            "results/logs/backbone/convert.log",
        conda:
            "../../envs/train.yaml"
        params:
            source=lookup(dpath="backbone/source", within=config),
            options=backbone_convert_options(),
            context_length=lookup(dpath="backbone/context_length", within=config),
        shell:
            "python -m hnclip convert-checkpoint --format {params.source} {params.options} "
            "--context-length {params.context_length} --out {output} 2> {log}"
