# Optional target `exports`, not part of `all`: the main table's models in other libraries' formats
# (config export.formats), each folder with a model card of the run's results rows (hnclip export).


rule export:
    input:
        model=f"{paths.run_dir()}/model",
        summary=f"{paths.run_dir()}/summary.json",
        evals=get_run_evaluations,
    output:
        directory(paths.export_dir()),
    log:
        paths.log_path("export", f"{paths.RUN}/{{format}}"),
    wildcard_constraints:
        format="longclip|open_clip|transformers",
    localrule: True
    conda:
        "../../envs/train.yaml"
    params:
        run_dir=lambda w, input: Path(input.summary).parent,
        confidence=lookup(dpath="statistics/confidence", within=config),
        resamples=lookup(dpath="statistics/resamples", within=config),
        seed=lookup(dpath="statistics/seed", within=config),
        scale=lookup(dpath="scale", within=config),
    # --encoder-only: a framework-scored run (FineLIP) is exported as its encoder, its card saying so
    shell:
        "python -m hnclip export --model {input.model} --format {wildcards.format} --run {params.run_dir} "
        "--evals {input.evals} --encoder-only --confidence {params.confidence} --resamples {params.resamples} "
        "--bootstrap-seed {params.seed} --scale {params.scale} --out {output} 2> {log}"


rule exports:
    input:
        get_exports(),
