"""No two folders of src/hnclip import each other: the packages form layers, so a reader follows a value (the
learning rate from config.yaml to AdamW, say) downwards only. Every ``import`` / ``from`` statement counts,
at module level and inside functions (an import hidden in a function is still a dependency, only a later one),
relative imports resolved. A node is a top-level subpackage of hnclip (``hnclip.training``, with everything
below it) or a top-level module (``hnclip.paths``). A failure names both folders and the import lines each way."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "hnclip"


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    """(dotted module name, is a package's __init__) of ``path`` under the folder holding package ``root``."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    return ".".join(parts[:-1] if is_package else parts), is_package


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, top: str) -> list[str]:
    """The dotted names an import statement in ``module`` reaches; ``from top import x`` reaches ``top.x``."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:  # relative: from the module's package, one level up per dot beyond the first
        package = module.split(".") if is_package else module.split(".")[:-1]
        base = ".".join(package[:len(package) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base == top:
        return [f"{top}.{alias.name}" for alias in node.names]
    return [base]


def folder_edges(root: Path) -> dict[tuple[str, str], list[str]]:
    """(importing node, imported node) -> ``file:line`` of each import statement, for the package at ``root``."""
    top = root.name
    edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        module, is_package = _module_name(path, root)
        source = module.split(".")[1] if "." in module else None
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for name in _imported(node, module, is_package, top):
                parts = name.split(".")
                if parts[0] != top or len(parts) < 2 or source is None or parts[1] == source:
                    continue
                edges[(source, parts[1])].append(f"{path.relative_to(root).as_posix()}:{node.lineno}")
    return edges


def mutual_pairs(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    """One line per pair of nodes importing each other, with the import lines of both directions."""
    pairs = sorted({tuple(sorted(pair)) for pair in edges if (pair[1], pair[0]) in edges})
    return [f"{a} <-> {b}: {a} -> {b} at {_lines(edges[(a, b)])}; {b} -> {a} at {_lines(edges[(b, a)])}"
            for a, b in pairs]


def _lines(places: list[str]) -> str:
    """``file:line`` places, each once, by file and then by line number."""
    return ", ".join(sorted(set(places), key=lambda place: (place.rsplit(":", 1)[0], int(place.rsplit(":", 1)[1]))))


def test_no_two_folders_of_hnclip_import_each_other():
    edges = folder_edges(SRC)
    assert len(edges) > 50, f"found only {len(edges)} folder edges under {SRC}: the scan is broken"
    pairs = mutual_pairs(edges)
    assert not pairs, ("folders importing each other (move the shared piece into the lower one or a module "
                       "below both, or pass it in):\n" + "\n".join(pairs))


def test_the_scan_counts_imports_in_functions_and_resolves_relative_ones(tmp_path):
    """An independent reference: a hand-written package whose imports are listed here by hand. ``a`` imports
    ``b`` inside a function through a relative import (``from ..b import x``), ``b`` imports ``a`` at module
    level; ``c`` imports the top-level module ``util`` as ``from pkg import util``, and ``util`` imports
    nothing back; a package's own imports (``a.inner`` -> ``a``) are no edge."""
    files = {
        "pkg/__init__.py": "",
        "pkg/util.py": "import json\n",
        "pkg/a/__init__.py": "from . import inner\n",
        "pkg/a/inner.py": "def f():\n    from ..b import x\n    from pkg.a import inner\n    return x\n",
        "pkg/b/__init__.py": "from pkg.a.inner import f\nx = 1\n",
        "pkg/c/__init__.py": "from pkg import util\nimport pkg.b\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    edges = folder_edges(tmp_path / "pkg")
    assert dict(edges) == {("a", "b"): ["a/inner.py:2"], ("b", "a"): ["b/__init__.py:1"],
                           ("c", "util"): ["c/__init__.py:1"], ("c", "b"): ["c/__init__.py:2"]}
    assert mutual_pairs(edges) == ["a <-> b: a -> b at a/inner.py:2; b -> a at b/__init__.py:1"]
