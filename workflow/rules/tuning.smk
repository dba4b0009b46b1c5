# The tuning protocol (hnclip.tuning): every main-table method's rate chosen on the val split by one rule.
# Not part of `all`: `snakemake tune` (under an hour on 2 cores for the embedded default: its record's provenance) writes
# results/tuning/record.json; shipping it means copying it over the config's tuning.record, whose choices the
# config's rates must then be (tests/test_tuning.py). Its grid points' runs stay in results/tuning/work/ (not
# declared outputs, so an interrupted search resumes: finished points are read, a half-trained one continues
# from its checkpoint; hnclip.tuning.work keys them on everything that changes a point). With
# tuning.long_budget, HN-CLIP, the competitor and its methods then train 10 epochs at their chosen rates
# (results/tuning/work/long_budget/, resumed alike; hnclip.tuning.long_budget), in the same job.


rule tune:
    input:
        unpack(get_tune_inputs),
        config="results/config.json",
    output:
        record="results/tuning/record.json",
    log:
        "results/logs/tune.log",
    conda:
        "../../envs/train.yaml"
    threads: workflow.cores
    params:
        data=lambda w, input: Path(input.manifest).parent,
        work="results/tuning/work",
    shell:
        "python -m hnclip tune --effective-config {input.config} --backbone {input.model} --data {params.data} "
        "--work {params.work} --out {output.record} --threads {threads} 2> {log}"
