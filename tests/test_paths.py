"""hnclip.paths, the results layout, against paths written out by hand."""

import ast
import re
from pathlib import Path

from hnclip import paths


def test_a_run_is_named_by_its_fields_with_plain_numbers():
    run = {"train_set": "docci", "method": "hnclip", "gamma": 0.5, "fraction": 1.0, "seed": 0}
    assert paths.run_name(run) == "docci/hnclip/g0.5/f1/s0"
    assert paths.run_dir(paths.run_name(run)) == "results/runs/docci/hnclip/g0.5/f1/s0"
    assert paths.eval_path("docci/hnclip/g0.5/f1/s0", "dci") == "results/evals/docci/hnclip/g0.5/f1/s0/dci.json"


def test_a_run_folder_gives_back_its_run_and_train_set():
    assert paths.run_of_dir("results/runs/dci/longclip/g0/f0.2/s1") == "dci/longclip/g0/f0.2/s1"
    assert paths.run_of_dir("elsewhere/model") == "elsewhere/model"
    assert paths.train_set_of_dir("results/runs/dci/longclip/g0/f0.2/s1") == "dci"
    assert paths.train_set_of_dir("/tmp/x/results/runs/vg/lora/g0/f1/s0/model") == "vg"
    assert paths.train_set_of_dir("results/runs") is None
    assert paths.train_set_of_dir("results/evals/dci/x.json") is None


def test_the_backbone_and_a_benchmarks_data_lie_where_written_by_hand():
    assert paths.BACKBONE_MODEL == "results/backbone/model"
    assert paths.source_record_path("dci") == "results/data/dci/source.json"
    assert paths.manifest_path("dci", "test") == "results/data/dci/test.csv"
    assert paths.images_dir("dci", "test") == "results/data/dci/test_images"
    assert paths.product_dir("docci", "segments") == "results/data/docci/train_segments"
    assert paths.subset_path("docci", "0.5", 1) == "results/data/docci/subsets/f0.5_s1.txt"
    assert paths.spec_path("main") == "results/specs/main.json"
    assert paths.table_path("cost") == "results/tables/cost.csv"
    assert paths.regime_path("<benchmark>") == "results/regime/<benchmark>.json"

    assert paths.WEIGHTS_DIR == "resources/checkpoints"


def test_a_results_path_moves_into_another_results_folder():
    assert paths.in_results("/tmp/old/results", paths.RUNS_DIR) == Path("/tmp/old/results/runs")
    assert paths.in_results("elsewhere", paths.regime_path("docci")) == Path("elsewhere/regime/docci.json")


# the rules keep their own output literals (the DAG's declaration); each is the path function's wildcard form
RULE_OUTPUTS = {
    "data.smk": [paths.source_record_path(), paths.manifest_path(), paths.images_dir(), paths.subset_path()],
    "backbone.smk": [paths.BACKBONE_MODEL],
}


def test_the_rules_declare_the_paths_the_python_code_builds():
    rules = Path(__file__).resolve().parents[1] / "workflow" / "rules"
    for name, declared in RULE_OUTPUTS.items():
        text = (rules / name).read_text()
        missing = [p for p in declared if f'"{p}"' not in text]
        assert not missing, f"{name} declares none of {missing}: the rule and hnclip.paths disagree"


# ------------------------------------------------------------------------------ the one home of results/
SRC = Path(__file__).resolve().parents[1] / "src" / "hnclip"
# a path below results/ (or the results folder itself) or resources/, spelled in a string or an f-string's text
RESULTS_PATH = re.compile(rf"(?<![\w.-])({re.escape(paths.RESULTS)}(/|$)|{re.escape(paths.RESOURCES)}/)")
# Modules allowed to spell a results path themselves: none (hnclip.paths is the one home)
ALLOWED: set[str] = set()


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions (prose, not code)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def results_literals(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant of ``source``, docstrings aside, that spells a results/ path."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
                  and RESULTS_PATH.search(node.value))


def test_the_scan_finds_a_results_path_in_code_and_not_in_a_docstring():
    source = ('"""Writes results/runs/x."""\n'
              'def f(run):\n    """results/evals/<run>."""\n    return f"results/evals/{run}/docci.json"\n'
              'HELP = "a finished results/ folder"\nNAME = "results"\nOTHER = "my_results/x", "--results"\n'
              'WEIGHTS = "resources/checkpoints"\nKEY = config.get("resources"), "default-resources"\n')
    assert [line for line, _ in results_literals(source)] == [4, 5, 6, 8]


def test_src_spells_results_and_resources_paths_only_in_paths_py():
    offenders = [f"{file.relative_to(SRC)}:{line}: {text!r}"
                 for file in sorted(SRC.rglob("*.py")) if file.name != "paths.py"
                 and str(file.relative_to(SRC)) not in ALLOWED
                 for line, text in results_literals(file.read_text(encoding="utf-8"))]
    assert not offenders, ("results/ and resources/ paths spelled outside hnclip.paths (build them with its functions):\n"
                           + "\n".join(offenders))


def test_a_run_folder_or_its_benchmark_file_parses_back_to_its_fields():
    assert paths.parse_run_path("results/runs/docci/hnclip/g0.5/f1/s0") == ("docci", "hnclip", "0.5", "1", "0")
    assert paths.parse_run_path("/abs/results/runs/dci/longclip/g0/f0.25/s2/") == ("dci", "longclip", "0", "0.25", "2")
    assert paths.parse_run_path("results/benchmarks/train/vg/lora/g0/f1/s1.tsv") == ("vg", "lora", "0", "1", "1")
    assert paths.parse_run_path("results/runs/docci/hnclip/g0.5/f1") is None  # no seed
    assert paths.parse_run_path("results/runs/docci/hnclip/x0.5/f1/s0") is None
    assert paths.parse_run_path("results/evals/docci/hnclip/g0.5/f1/s0/dci.json") is None
