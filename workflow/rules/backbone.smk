# The backbone every run fine-tunes: a random-init model pretrained on short captions with a 77-token
# tower and stretched to 248 positions (embedded default), or a Long-CLIP/OpenAI checkpoint converted.


if config["backbone"]["source"] == "pretrain":

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
            manifest=f"results/data/{config['pretrain']['benchmark']}/train.csv",
            images=f"results/data/{config['pretrain']['benchmark']}/train_images",
        output:
            model=directory("results/backbone/pretrained/model"),
            summary="results/backbone/pretrained/summary.json",
        log:
            "results/logs/backbone/pretrain.log",
        benchmark:
            "results/benchmarks/backbone/pretrain.tsv"
        conda:
            "../../envs/train.yaml"
        threads: workflow.cores
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
            "--threads {threads} {params.overrides} 2> {log}"

    rule stretch_backbone:
        input:
            "results/backbone/pretrained/model",
        output:
            directory("results/backbone/model"),
        log:
            "results/logs/backbone/stretch.log",
        conda:
            "../../envs/train.yaml"
        params:
            keep=lookup(dpath="backbone/frozen_positions", within=config),
            context_length=lookup(dpath="backbone/context_length", within=config),
        shell:
            "python -m hnclip stretch --model {input} --keep {params.keep} "
            "--context-length {params.context_length} --out {output} 2> {log}"

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
        shell:
            "python -m hnclip convert-checkpoint --format {params.source} --source {params.checkpoint} "
            "--out {output} 2> {log}"
