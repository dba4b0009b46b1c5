# The backbone every run fine-tunes. Embedded default: Long-CLIP-L's history at toy scale: CLIP on the
# short captions of a large pool of scenes with a 77-token tower, Long-CLIP's stretch to 248 positions,
# then Long-CLIP-style training on the pool's long captions (the role ShareGPT4V plays). The pool is
# rendered like the benchmark and never holds one of its scenes. Otherwise: a Long-CLIP/OpenAI checkpoint.


if config["backbone"]["source"] == "pretrain":
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
            f"results/data/{config['pretrain']['benchmark']}/source.json",
        output:
            manifest="results/backbone/pool/train.csv",
            images=directory("results/backbone/pool/train_images"),
        log:
            "results/logs/backbone/pool.log",
        benchmark:
            "results/benchmarks/backbone/pool.tsv"
        conda:
            "../../envs/data.yaml"
        params:
            size=lookup(dpath="pretrain/pool/size", within=config),
            seed=lookup(dpath="pretrain/pool/seed", within=config),
            image_size=lookup(dpath="backbone/image_size", within=config),
        shell:
            "python -m hnclip pool --source {input} --count {params.size} --seed {params.seed} "
            "--image-size {params.image_size} --manifest {output.manifest} --images {output.images} 2> {log}"

    rule init_backbone:
        output:
            directory("results/backbone/init"),
        log:
            "results/logs/backbone/init.log",
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
            model="results/backbone/init",
            manifest=rules.pretrain_pool.output.manifest,
            images=rules.pretrain_pool.output.images,
        output:
            model=directory("results/backbone/pretrained/model"),
            summary="results/backbone/pretrained/summary.json",
        log:
            "results/logs/backbone/pretrain.log",
        benchmark:
            "results/benchmarks/backbone/pretrain.tsv"
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
                        **config["pretrain"]["train"],
                        "caption_column": config["pretrain"]["caption_column"],
                        "seed": config["seeds"][0],
                    }
                )
            ),
            out_dir=lambda w, output: Path(output.summary).parent,
        shell:
            "python -m hnclip train --init {input.model} --manifest {input.manifest} --images {input.images} "
            "--out {params.out_dir} --checkpoint-dir results/checkpoints/backbone "
            "--threads 1 {params.overrides} 2> {log}"

    rule stretch_backbone:
        input:
            "results/backbone/pretrained/model",
        output:
            directory("results/backbone/stretched"),
        log:
            "results/logs/backbone/stretch.log",
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
            model="results/backbone/stretched",
            manifest=rules.pretrain_pool.output.manifest,
            images=rules.pretrain_pool.output.images,
        output:
            model=directory("results/backbone/model"),
            summary="results/backbone/summary.json",
        log:
            "results/logs/backbone/pretrain_long.log",
        benchmark:
            "results/benchmarks/backbone/pretrain_long.tsv"
        conda:
            "../../envs/train.yaml"
        threads: config["pretrain"]["long"]["processes"]
        resources:
            **get_resources("train"),
        params:
            overrides=" ".join(
                f"--set {item}"
                for item in override_items(
                    {
                        **config["pretrain"]["long"]["train"],
                        "caption_column": config["pretrain"]["long"]["caption_column"],
                        "seed": config["seeds"][0],
                    }
                )
            ),
            out_dir=lambda w, output: Path(output.summary).parent,
            processes=lookup(dpath="pretrain/long/processes", within=config),
        shell:
            "torchrun --standalone --nproc-per-node {params.processes} -m "
            "hnclip train --init {input.model} --manifest {input.manifest} --images {input.images} "
            "--out {params.out_dir} --checkpoint-dir results/checkpoints/backbone_long "
            "--threads 1 {params.overrides} 2> {log}"

else:

    rule convert_backbone:
        output:
            directory("results/backbone/model"),
        log:
            "results/logs/backbone/convert.log",
        conda:
            "../../envs/train.yaml"
        params:
            source=lookup(dpath="backbone/source", within=config),
            checkpoint=lookup(dpath="backbone/checkpoint", within=config),
            pins=" ".join(
                f"--{key} {config['backbone'][key]}"
                for key in ("revision", "sha256")
                if config["backbone"][key]
            ),
        shell:
            "python -m hnclip convert-checkpoint --format {params.source} --source {params.checkpoint} "
            "{params.pins} --out {output} 2> {log}"
