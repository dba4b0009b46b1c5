# The rehearsal (config/rehearsal.yaml layered over config/paper.yaml): before the first job, make the
# stand-ins for what the paper grid downloads (checkpoint, SAM, benchmark files, Hub cache), once.
# The paper's rules then run unchanged on them; nothing here is active without a `rehearsal` section.
import os
import subprocess

if "rehearsal" in config:
    # Hub files (Long-DCI, Urban-1K) resolve from the rehearsal's own offline cache, never the network;
    # jobs inherit this environment from the Snakemake process
    os.environ["HF_HUB_CACHE"] = str(
        Path(config["rehearsal"]["folder"]).resolve() / "hf-cache"
    )
    os.environ["HF_HUB_OFFLINE"] = "1"

    onstart:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "hnclip.cli",
                "rehearsal-files",
                "--config",
                json.dumps(config),
            ],
            check=True,
        )
