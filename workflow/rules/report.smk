# The deliverable: one self-contained HTML report of every table, figure and claim, with provenance.
# The claims are judged first, into results/claims.json, from the files they read (all declared); the
# report renders those verdicts and judges nothing itself.


# the effective config (files, layered --configfile and --config overrides) for the verbs that read it whole
# (the tuning search, the report's check of the rates against the tuning record); its digest rewrites it
rule effective_config:
    output:
        "results/config.json",
    log:
        "results/logs/effective_config.log",
    localrule: True
    params:
        digest=lambda w: hashlib.sha256(
            json.dumps(config, sort_keys=True).encode()
        ).hexdigest(),
    run:
        Path(output[0]).write_text(
            json.dumps(config, indent=1, sort_keys=True) + "\n", encoding="utf-8"
        )


rule claims:
    input:
        unpack(lambda w: get_claims_inputs()),
    output:
        "results/claims.json",
    log:
        "results/logs/claims.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        scale=config["scale"],
    shell:
        "python -m hnclip claims --scale {params.scale} --specs {input.specs} --evals {input.evals} "
        "--premise {input.premise} --run-logs {input.run_logs} --out {output} 2> {log}"


rule report:
    input:
        unpack(lambda w: get_report_inputs()),
    output:
        "results/report.html",
    log:
        "results/logs/report.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        title=lookup(dpath="report/title", within=config),
        scale=config["scale"],
        # what the report judges (claims, premise, regime, geometry), or on your own data the backbone it names
        judged=lambda w, input: " ".join(
            f"--{key.replace('_', '-')} {' '.join(str(p) for p in input[key]) if isinstance(input[key], list) else input[key]}"
            for key in (
                "claims",
                "premise",
                "regime",
                "geometry",
                "backbone",
                "tuning",
                "effective_config",
                "own_summary",
            )
            if key in input.keys()
        ),
    shell:
        "python -m hnclip report --title {params.title:q} --scale {params.scale} --specs {input.specs} "
        "--evals {input.evals} --tables {input.tables} --figures {input.figures} "
        "--summaries {input.summaries} {params.judged} --out {output} 2> {log}"


# What the run shows, in one short file (the README's table) and as JSON another machine's run compares with
# (`hnclip summary --compare`).
# On your own data (scale own): the main table's rows, HN-CLIP minus plain fine-tuning, changed captions, last-epoch
# rises (hnclip.analysis.own_results).
rule summary:
    input:
        unpack(lambda w: get_summary_inputs()),
    output:
        md="results/summary.md",
        json="results/summary.json",
    log:
        "results/logs/summary.log",
    localrule: True
    conda:
        "../../envs/report.yaml"
    params:
        scale=config["scale"],
        args=get_summary_args,
        release=(
            f"--release {Path(config['backbone']['checkpoint']).name}"
            if BACKBONE_ORIGIN.ships_its_spec and not OWN_DATA
            else ""
        ),
    shell:
        "python -m hnclip summary --scale {params.scale} {params.args} {params.release} "
        "--out-json {output.json} --out-md {output.md} > {log} 2>&1"
