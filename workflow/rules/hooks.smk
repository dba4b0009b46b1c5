# The workflow's onstart and onerror hooks (the Snakefile calls them): the local GPU cap warning, live
# trainers refused before any job, each failed job's error line. Included after common.smk.


def warn_on_local_gpu_cap(resources, local):
    """profiles/default caps GPU jobs at one at a time for a one-GPU machine; a cluster executor given
    with --profile still loads it (the workflow profile wins), which would run a grid one job at a time.
    """
    cap = resources.get("gpu")  # a snakemake Resource (value None when unset)
    if not local and getattr(cap, "value", cap) == 1:
        logger.warning(
            "hnclip: GPU jobs are capped at one at a time (resources: gpu: 1, from profiles/default) on a "
            "cluster executor; pass the cluster profile as --workflow-profile profiles/slurm instead of "
            "--profile, which replaces profiles/default."
        )


def refuse_running_trainers():
    """onstart: stop before any job when a live trainer holds the output folder of a job about to run.

    Snakemake deletes a job's outputs and log before its command starts, so a trainer's own lock
    (hnclip.run_lock) would refuse only after that damage; the second Snakemake of the README's
    "After a crash" (`--unlock` while the first still runs) is stopped here instead, naming the holder.
    """
    folders = {
        Path(path).parent
        for job in workflow.dag.needrun_jobs()
        for path in getattr(job, "output", ())
    }
    try:
        run_lock.refuse_held_folders(folders)
    except run_lock.RunLockedError as error:
        # raised afresh, so Snakemake prints the message and this line, not a traceback into src/
        raise run_lock.RunLockedError(str(error)) from None


def surface_job_errors(snakemake_logs):
    """onerror: each failed job's own error line (the last line of its log) on the console, so a refusal
    naming its config key is read where the run failed (hnclip.job_errors)."""
    for line in job_errors.job_error_lines(snakemake_logs):
        logger.error(f"hnclip: {line}")
