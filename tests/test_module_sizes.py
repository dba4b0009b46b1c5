"""Every module of src/hnclip is at most 600 lines and every function at most 80 (def line to last line):
a module with one job and functions that read in one sitting, as CONTRIBUTING asks. The workflow's rule files
(the Snakefile and workflow/rules/*.smk) keep the same limits: their functions are Python, measured the same
way. The limits are the project's standard, not derived from the code; a failure names file:function:lines."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "hnclip"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# modules and functions allowed over the limits: none
ALLOWED_OVER: tuple[str, ...] = ()


def _modules() -> list[Path]:
    found = sorted(SRC.rglob("*.py"))
    assert len(found) > 50, f"found only {len(found)} modules under {SRC}"
    return found


def _rule_files() -> list[Path]:
    found = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    assert len(found) > 10, f"found only {len(found)} rule files under {REPO}"
    return found


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _function_lengths(path: Path) -> list[tuple[str, int]]:
    """(qualified name, lines from its def line to its last line) of every function and method in ``path``."""
    return _lengths_of_source(path.read_text(encoding="utf-8"), f"{path.stem}.")


def _lengths_of_source(text: str, prefix: str) -> list[tuple[str, int]]:
    """:func:`_function_lengths` of Python source ``text``, names prefixed by ``prefix``."""
    out = []

    def visit(node, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                out.append((prefix + child.name, child.end_lineno - child.lineno + 1))
                visit(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(text), prefix)
    return out


def _smk_function_lengths(path: Path) -> list[tuple[str, int]]:
    """:func:`_function_lengths` of each top-level ``def`` of a Snakemake file: a def runs to its last indented
    (or blank) line before the next line at column 0, and is parsed alone as Python (rules are not)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for start, line in enumerate(lines):
        if not line.startswith("def "):
            continue
        end = start + 1
        while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t"):
            end += 1
        out += _lengths_of_source("\n".join(lines[start:end]), f"{path.name}.")
    return out


def test_no_rule_file_is_over_600_lines():
    over = [f"{p.relative_to(REPO).as_posix()}: {n} lines" for p in _rule_files() if (n := _lines(p)) > MAX_MODULE_LINES]
    assert not over, f"rule files over {MAX_MODULE_LINES} lines (split them by what they hold):\n" + "\n".join(over)


def test_no_function_of_a_rule_file_is_over_80_lines():
    measured = [(p, name, n) for p in _rule_files() for name, n in _smk_function_lengths(p)]
    assert len(measured) > 30, f"found only {len(measured)} functions in the rule files: the scan is broken"
    over = [f"{p.relative_to(REPO).as_posix()}:{name}:{n} lines" for p, name, n in measured if n > MAX_FUNCTION_LINES]
    assert not over, f"rule-file functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(over)


def test_no_module_is_over_600_lines():
    over = [f"{p.relative_to(SRC).as_posix()}: {n} lines" for p in _modules()
            if (n := _lines(p)) > MAX_MODULE_LINES and p.relative_to(SRC).as_posix() not in ALLOWED_OVER]
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split them by job):\n" + "\n".join(over)


def test_no_function_is_over_80_lines():
    over = [f"{p.relative_to(SRC).as_posix()}:{name}:{n} lines" for p in _modules()
            for name, n in _function_lengths(p) if n > MAX_FUNCTION_LINES and name not in ALLOWED_OVER]
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (def line to last line; break them by their parts):\n" \
        + "\n".join(over)


def test_the_measure_counts_from_the_def_line_to_the_last(tmp_path):
    """An independent reference: a hand-written module whose function runs from its def on line 4 to line 7
    (4 lines; the decorator on line 3 is not counted) and whose method spans 2; 12 lines in all."""
    module = tmp_path / "sample.py"
    module.write_text("import functools\n\n@functools.cache\ndef f(x):\n    y = x\n"
                      "    return (y +\n            1)\n\n\nclass C:\n    def m(self):\n        return 1\n")
    assert _function_lengths(module) == [("sample.f", 4), ("sample.C.m", 2)]
    assert _lines(module) == 12


def test_a_rule_files_def_runs_to_its_last_indented_line(tmp_path):
    """An independent reference: a hand-written rule file whose function runs from its def on line 3 to line 7
    (5 lines, its blank line 5 inside), followed by a rule that is not Python and a one-line function."""
    rules = tmp_path / "sample.smk"
    rules.write_text("# a comment\nX = 1\ndef f(w):\n    y = w\n\n    return (y +\n            1)\n\n\n"
                     "rule r:\n    output:\n        \"x\",\n\n\ndef g():\n    return 2\n")
    assert _smk_function_lengths(rules) == [("sample.smk.f", 5), ("sample.smk.g", 2)]
