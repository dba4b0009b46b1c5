"""``python -m hnclip VERB ...``: how the workflow's rules call the CLI, so no console script is needed
(a rule's conda environment holds the dependencies only; the workflow puts its src/ on PYTHONPATH)."""

import sys

from hnclip import cpu_kernels

# the config's cpu_kernels (exported by the workflow), before any module imports torch
cpu_kernels.apply()
cpu_kernels.configure_torch()  # oneDNN off where the setting asks (torch has no variable for it)

from hnclip.cli import main  # noqa: E402

sys.exit(main())
