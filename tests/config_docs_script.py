"""workflow/scripts/config_docs.py loaded as a module (it is a script, not part of the package), and the
schema it writes: shared by the tests of the generated docs and of the registries that feed them."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "workflow/schemas/config.schema.yaml"


def load_config_docs():
    spec = importlib.util.spec_from_file_location("config_docs", REPO / "workflow/scripts/config_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
