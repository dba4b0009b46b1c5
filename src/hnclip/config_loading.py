"""Old name of :mod:`hnclip.config.loading`, kept only for code outside this checkout's own imports (the
plan module and the benchmarks and tests that other branches are editing); import ``hnclip.config.loading``.
The same module object, so patching either name patches both."""

import sys

from hnclip.config import loading as _module

sys.modules[__name__] = _module
