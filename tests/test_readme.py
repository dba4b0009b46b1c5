"""The README as user documentation: its results table has the shape `hnclip summary` renders, it stays
short, it carries no dated measurement outside that table, and every relative link in it and in docs/ works."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
import yaml

from hnclip.analysis.regime import CONDITION_KEYS, LABELS, TARGETS
from hnclip.analysis.summary import VERDICTS, render_summary_markdown

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BEGIN, END = "<!-- summary:begin -->", "<!-- summary:end -->"
MAX_LINES = 350
DATE = re.compile(r"20\d\d-\d\d-\d\d")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _split_readme() -> tuple[str, str, str]:
    text = README.read_text(encoding="utf-8")
    assert text.count(BEGIN) == 1 and text.count(END) == 1, "README needs one summary block"
    before, rest = text.split(BEGIN)
    block, after = rest.split(END)
    return before, block.strip("\n"), after


def _regime_benchmarks() -> list[str]:
    """The default's benchmarks with a regime: those that are their own training set."""
    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text(encoding="utf-8"))
    return [name for name, b in config["benchmarks"].items() if b.get("train_set") == name]


def _fabricated(variant: int) -> dict:
    """A small made-up summary; the two variants differ in every value, never in the structure."""
    met = (True, False)[variant]
    return {
        "scale": ("toy", "other")[variant],
        "machine": {"cpu": ("CPU A", "Processor B x")[variant], "cpu_kernels": ("avx2", "native")[variant],
                    "torch": ("2.5.1", "9.9")[variant], "git_commit": ("0123456789abcdef", "fedcba9876543210")[variant],
                    "date": ("2026-01-02", "2030-11-12")[variant]},
        "backbone": {"weights_sha256": ("a" * 64, "b" * 64)[variant], "release": ("one-release", "two")[variant]},
        "regime": {bench: {"met": (3, 7)[variant], "of": len(CONDITION_KEYS), "undecided": (0, 2)[variant], "conditions": {
            key: {"label": LABELS[key], "met": met, "ours": ("12.5", "x y z")[variant], "target": TARGETS[key],
                  "value": (1.0, 2.0)[variant]} for key in CONDITION_KEYS}} for bench in _regime_benchmarks()},
        # the default's shape: HN-CLIP minus the strongest competitor, then minus Long-CLIP FT
        "main": {bench: {"difference": (1.25, 3.5)[variant], "interval": ([0.5, 2.0], [2.0, 5.0])[variant],
                         "seeds": (3, 5)[variant], "half_width": (0.75, 1.5)[variant], "against": "finelip",
                         "against_label": ("FineLIP", "Other")[variant]} for bench in _regime_benchmarks()},
        "baseline": {bench: {"difference": (2.5, 0.5)[variant], "interval": ([1.5, 3.5], [-1.0, 2.0])[variant],
                             "seeds": (3, 5)[variant], "half_width": (1.0, 1.5)[variant], "against": "longclip",
                             "against_label": ("Long-CLIP FT", "Plain")[variant]} for bench in _regime_benchmarks()},
        "claims": {"tally": {v: (1 + i, 20 + i)[variant] for i, v in enumerate(VERDICTS)}, "verdicts": {}},
        # the default ships a tuning record: the summary's tuning line (hnclip.tuning.record.record_check)
        "tuning": {"problems": [], "record": ("resources/tuning/record.json", "elsewhere/r.json")[variant],
                   "split": ("val", "holdout")[variant]},
    }


def _constant_words(a: str, b: str) -> list[str]:
    """The words two renderings of one line share, in order: the line's structure without its values."""
    wa, wb = a.split(), b.split()
    matcher = difflib.SequenceMatcher(a=wa, b=wb, autojunk=False)
    return [w for block in matcher.get_matching_blocks() for w in wa[block.a:block.a + block.size]]


def _is_subsequence(words: list[str], line: str) -> bool:
    it = iter(line.split())
    return all(any(w == x for x in it) for w in words)


def test_readme_summary_block_has_the_generated_shape():
    _, block, _ = _split_readme()
    first = render_summary_markdown(_fabricated(0)).strip("\n").splitlines()
    second = render_summary_markdown(_fabricated(1)).strip("\n").splitlines()
    assert len(first) == len(second)
    lines = block.splitlines()
    assert len(lines) == len(first), f"the README's summary block has {len(lines)} lines, `hnclip summary` renders {len(first)}"
    for ours, a, b in zip(lines, first, second, strict=True):
        assert ours.startswith("|") == a.startswith("|"), (ours, a)
        if a.startswith("|"):
            assert ours.count("|") == a.count("|"), (ours, a)
        constant = _constant_words(a, b)
        assert _is_subsequence(constant, ours), f"README line {ours!r} lacks the rendered structure {constant}"


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines (at most {MAX_LINES})"


def test_readme_has_no_dated_measurement_outside_the_summary():
    before, _, after = _split_readme()
    dates = DATE.findall(before + after)
    assert not dates, f"dates outside the summary block: {dates} (history goes to CHANGELOG.md)"


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # code blocks hold no links
    return [m.group(1) for m in LINK.finditer(text)]


DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_existing_files(doc):
    broken = []
    for target in _links(doc):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL, mailto: or an anchor in the same page
        path = target.split("#", 1)[0]
        if not (doc.parent / path).exists():
            broken.append(target)
    assert not broken, f"{doc.relative_to(ROOT)}: links to missing files {broken}"


def test_the_readme_names_a_command_that_locates_a_configfile_syntax_error(tmp_path):
    """Snakemake parses ``--configfile`` before the Snakefile runs and says only "not valid JSON or YAML"; the
    README points to ``hnclip plan --configfile``, which names the file, the line and the column."""
    import os
    import subprocess
    import sys

    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "`.venv/bin/hnclip plan --configfile FILE ...` reads the same files and says which one, at which line " \
           "and column" in text
    good = ROOT / "config" / "finetune.yaml"
    broken = tmp_path / "my-data.yaml"
    broken.write_text("benchmarks:\n  my_captions:\n    root: /data\n     label: x\n")  # line 4: one space too many
    done = subprocess.run([sys.executable, "-m", "hnclip", "plan", "--configfile", str(good), str(broken)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert done.returncode != 0
    assert f"config file {broken}, line 4, column " in done.stderr + done.stdout
