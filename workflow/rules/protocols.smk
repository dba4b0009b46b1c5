# The published evaluation protocols side by side (hnclip.protocols): test-split variants of other papers
# (DOCCI's 5,100 of GOAL, DCI's 7,805 of LoTLIP, ...) prepared like test splits, the main models scored on
# them, and one table beside the paper's protocol. The paper's protocol stays every other table's.
# PROTOCOL_SPEC (common.smk) names the cells; the spec_protocols rule writes it as the table's spec file.


rule spec_protocols:
    output:
        spec="results/specs/protocols.json",
    log:
        "results/logs/specs/protocols.log",
    localrule: True
    params:
        # as the spec rule's digest: a config change that changes the protocol spec rewrites the file
        digest=lambda w: protocols.protocol_spec_digest(config),
    run:
        protocols.write_protocol_spec(config, output.spec, log=log[0])


rule prepare_protocol_split:
    input:
        unpack(get_prepare_inputs),
    output:
        manifest="results/data/{benchmark}/protocols/{variant}.csv",
        images=directory("results/data/{benchmark}/protocols/{variant}_images"),
    log:
        "results/logs/prepare/{benchmark}_{variant}.log",
    wildcard_constraints:
        variant=protocols.variant_pattern(config),
    conda:
        # as rule prepare's: CLIP's tokenizer counts the captions cut at the text tower's positions
        "../../envs/train.yaml"
    resources:
        **get_resources("prepare"),
    params:
        image_size=lookup(dpath="backbone/image_size", within=config),
        context_length=lookup(dpath="backbone/context_length", within=config),
        model=prepare_model_option,
    shell:
        "python -m hnclip prepare --source {input.source} --split {wildcards.variant} --image-size {params.image_size} "
        "--context-length {params.context_length} {params.model} --manifest {output.manifest} "
        "--images {output.images} 2> {log}"


rule evaluate_protocol:
    input:
        model=f"{paths.run_dir()}/model",
        manifest="results/data/{eval_benchmark}/protocols/{variant}.csv",
        images="results/data/{eval_benchmark}/protocols/{variant}_images",
    output:
        paths.protocol_path(),
    log:
        paths.log_path("protocols", f"{paths.RUN}/{{eval_benchmark}}/{{variant}}"),
    wildcard_constraints:
        variant=protocols.variant_pattern(config),
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        run=get_run_info,
        batch_size=lookup(dpath="evaluate/batch_size", within=config),
    shell:
        "python -m hnclip evaluate --model {input.model} --manifest {input.manifest} --images {input.images} "
        "--eval-benchmark {wildcards.eval_benchmark} --split {wildcards.variant} --run-info {params.run:q} "
        "--batch-size {params.batch_size} --threads {threads} --out {output} 2> {log}"


rule evaluate_protocol_zeroshot:
    input:
        model="results/backbone/model",
        manifest="results/data/{eval_benchmark}/protocols/{variant}.csv",
        images="results/data/{eval_benchmark}/protocols/{variant}_images",
    output:
        paths.zeroshot_protocol_path(),
    log:
        paths.log_path("protocols", "zeroshot/{eval_benchmark}/{variant}"),
    wildcard_constraints:
        variant=protocols.variant_pattern(config),
    conda:
        "../../envs/train.yaml"
    threads: get_threads("evaluate")
    resources:
        **get_resources("evaluate"),
    params:
        run=json.dumps(plan.zeroshot_run(config)),
        batch_size=lookup(dpath="evaluate/batch_size", within=config),
    shell:
        "python -m hnclip evaluate --model {input.model} --manifest {input.manifest} --images {input.images} "
        "--eval-benchmark {wildcards.eval_benchmark} --split {wildcards.variant} --run-info {params.run:q} "
        "--batch-size {params.batch_size} --threads {threads} --out {output} 2> {log}"


rule table_protocols:
    input:
        spec="results/specs/protocols.json",
        evals=protocol_eval_paths(),
        summaries=protocol_run_summaries(),
    output:
        report(
            "results/tables/protocols.html",
            caption="../report/protocols.rst",
            category="Tables",
            labels={"table": "protocols"},
        ),
        csv="results/tables/protocols.csv",
        md="results/tables/protocols.md",
        tex="results/tables/protocols.tex",
    log:
        "results/logs/tables/protocols.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        prefix=lambda w, output: output.csv.removesuffix(".csv"),
    shell:
        "python -m hnclip table-protocols --spec {input.spec} --out-prefix {params.prefix} 2> {log}"
