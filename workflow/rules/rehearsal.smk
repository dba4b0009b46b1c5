# The rehearsal (config/rehearsal.yaml layered over config/paper.yaml): before the first job, make the
# stand-ins for what the paper grid downloads (checkpoint, SAM, benchmark files, Hub cache), once.
# The paper's rules then run unchanged on them; nothing here is active without a `rehearsal` section.
import os
import subprocess


def make_rehearsal_files():
    """Called by the Snakefile's onstart (a workflow has one onstart handler); not on a dry run."""
    if "rehearsal" not in config:
        return
    # Hub files (Long-DCI, Urban-1K) resolve from the rehearsal's own offline cache, never the network;
    # local jobs inherit this environment from the Snakemake process (set here, not asked of the user:
    # no envvars directive)
    os.environ.update(
        HF_HUB_CACHE=str(Path(config["rehearsal"]["folder"]).resolve() / "hf-cache"),
        HF_HUB_OFFLINE="1",
    )
    python_path = os.pathsep.join(
        filter(None, [str(SRC), os.environ.get("PYTHONPATH")])
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "hnclip",
            "rehearsal-files",
            "--config",
            json.dumps(config),
        ],
        check=True,
        env={**os.environ, "PYTHONPATH": python_path},
    )
