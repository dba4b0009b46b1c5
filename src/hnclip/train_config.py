"""Old name of :mod:`hnclip.config.train`, kept only for code outside this checkout's own imports (the
plan module and the benchmarks and tests that other branches are editing); import ``hnclip.config.train``.
The same module object, so patching either name patches both."""

import sys

from hnclip.config import train as _module

sys.modules[__name__] = _module
