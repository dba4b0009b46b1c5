"""``python -m hnclip VERB ...``: how the workflow's rules call the CLI, so no console script is needed
(a rule's conda environment holds the dependencies only; the workflow puts its src/ on PYTHONPATH)."""

import sys

from hnclip.cli import main

sys.exit(main())
