"""The dry-run job blocks of the four configs the docs talk about, normalised so that two commits compare.

A refactor that should not change what the workflow runs (a registry row instead of a name in a rule, a
module moved) is checked by dumping ``snakemake -n -p`` of the default, paper, rehearsal and CI-rehearsal
configs at the commit before and after, and diffing the dumps. Each job block is kept with its rule, output,
input, log, wildcards, resources, reason and shell command; its timestamp and job id (which vary run to run)
are dropped, the checkout's path is written ``<repo>``, and the blocks are sorted.

    .venv/bin/python tests/dag_blocks.py dump /tmp/before            # in a checkout of the base commit
    .venv/bin/python tests/dag_blocks.py dump /tmp/after             # in the checkout under test
    .venv/bin/python tests/dag_blocks.py compare /tmp/before /tmp/after   # exit 1 naming what differs

Run it in a checkout without results/ (e.g. a ``git worktree add``), so every job is planned. Not collected
by pytest (no ``test_`` prefix): a dry run of the paper configs takes about 10 s each.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# the configs, as --configfile lists (the embedded default: none)
CONFIGS = {"default": [], "paper": ["config/paper.yaml"],
           "rehearsal": ["config/paper.yaml", "config/rehearsal.yaml"],
           "rehearsal-ci": ["config/paper.yaml", "config/rehearsal.yaml", "config/rehearsal-ci.yaml"]}
_VARYING = re.compile(r"^(\[\w{3} \w{3} +\d+ [\d:]+ \d{4}\]|\s+jobid: \d+)$")


def _reason(line: str) -> str:
    """A ``reason:`` line with the files of each of its parts sorted (Snakemake prints them from a set, in an
    order that changes between runs)."""
    head, _, parts = line.partition("reason: ")
    out = []
    for part in parts.split("; "):
        label, sep, items = part.partition(": ")
        out.append(f"{label}{sep}{', '.join(sorted(items.split(', ')))}" if sep else part)
    return f"{head}reason: {'; '.join(out)}"


def blocks(output: str, repo: Path) -> list[str]:
    """The job blocks of a ``snakemake -n -p`` output, without timestamps and job ids, their reasons' files
    sorted, the blocks sorted."""
    body = output.split("Building DAG of jobs...", 1)[-1].replace(str(repo), "<repo>")
    out = []
    for block in re.split(r"\n\s*\n", body):
        lines = [_reason(line) if line.lstrip().startswith("reason: ") else line
                 for line in block.splitlines() if not _VARYING.match(line)]
        if any(re.match(r"^(local)?rule \w+:$", line) for line in lines):
            out.append("\n".join(lines))
    return sorted(out)


def dump(out_dir: Path, repo: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    if (repo / "results").exists():
        sys.exit(f"{repo / 'results'} exists: dump from a checkout without results/ so every job is planned")
    for name, files in CONFIGS.items():
        args = [sys.executable, "-m", "snakemake", "-n", "-p", "--cores", "1"]
        args += ["--configfile", *files] if files else []
        proc = subprocess.run(args, cwd=repo, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"{name}: snakemake -n failed:\n{proc.stderr[-3000:]}")
        found = blocks(proc.stdout + proc.stderr, repo)
        (out_dir / f"{name}.txt").write_text("\n\n".join(found) + "\n")
        print(f"{name}: {len(found)} job blocks -> {out_dir / f'{name}.txt'}")


def compare(before: Path, after: Path) -> int:
    differ = []
    for name in CONFIGS:
        a, b = ("\n\n".join(blocks((d / f"{name}.txt").read_text(), d)) for d in (before, after))
        if a != b:
            differ.append(name)
            sys.stdout.writelines(difflib.unified_diff(a.splitlines(True), b.splitlines(True),
                                                       f"{before.name}/{name}", f"{after.name}/{name}", n=1))
        print(f"{name}: {'differs' if a != b else 'same'} ({a.count(chr(10) + chr(10)) + 1} blocks before)")
    return 1 if differ else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    d = sub.add_parser("dump", help="write <config>.txt for each config into OUT")
    d.add_argument("out", type=Path)
    d.add_argument("--repo", type=Path, default=REPO, help="the checkout to dry-run (default: this one)")
    c = sub.add_parser("compare", help="diff two dumps; exit 1 if any config differs")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    args = parser.parse_args(argv)
    if args.verb == "dump":
        dump(args.out, args.repo.resolve())
        return 0
    return compare(args.before, args.after)


if __name__ == "__main__":
    sys.exit(main())
