"""A stand-in for ``conda`` that lets Snakemake's ``--use-conda`` path run where conda's channels cannot be
reached (this project's machines). tests/test_conda.py puts it on PATH as ``conda``.

It answers the calls Snakemake 9 makes (snakemake/deployment/conda.py): ``conda info --json``,
``conda --version``, ``conda config --get channel_priority --json``, ``conda env create --quiet --no-default-packages --file
<.snakemake/conda/HASH.yaml> --prefix <.snakemake/conda/HASH>`` and ``conda clean -y --tarballs``; jobs then
activate an environment with ``source <conda_prefix>/bin/activate <env>``, which this stand-in provides.

``env create`` checks the file Snakemake hands over the way conda and pip would read it, from where it
lies: every pip requirement must be ``name==version`` available at exactly that version (from the
virtualenv running this script, which ``workflow/scripts/setup.sh`` installed from the same pins), and a
path requirement resolves relative to the file's folder, as conda's pip step resolves it. It then
builds the environment from that virtualenv's installed distributions: the pinned ones and their
dependencies, linked into a fresh ``venv``, nothing else (so not hnclip). Every call is appended, as JSON,
to ``$HNCLIP_CONDA_RECORD``.

What it cannot show: that conda-forge's solver accepts ``python=3.11`` with these pins, and pip inside
conda downloading them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import sysconfig
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

BASE = Path(os.environ["HNCLIP_CONDA_BASE"])  # the stand-in's "conda installation" (bin/activate)
RECORD = Path(os.environ["HNCLIP_CONDA_RECORD"])
VERSION = "24.7.1"  # Snakemake requires conda >= 24.7.1
PIN = re.compile(r"([A-Za-z0-9_.\-]+)==([^\s;]+)")
ACTIVATE = """# stand-in for conda's activate script: put the environment's bin/ first on PATH, and say so
export CONDA_PREFIX="$1"
export PATH="$1/bin:$PATH"
printf '{"call": "activate", "prefix": "%s"}\\n' "$1" >> "$HNCLIP_CONDA_RECORD"
"""


class EnvError(Exception):
    pass


def record(entry: dict) -> None:
    with RECORD.open("a") as handle:
        handle.write(json.dumps(entry) + "\n")


def resolve_pip(line: str, env_dir: Path) -> metadata.Distribution:
    """One pip requirement as conda's pip step would see it, run from ``env_dir``."""
    if line.startswith("-") or "/" in line or line.startswith("."):
        target = line.split()[-1].split("[")[0]
        where = (env_dir / target).resolve()
        if not any((where / f).is_file() for f in ("pyproject.toml", "setup.py")):
            raise EnvError(f"requirement {line!r} resolves to {where}, which holds no Python project")
        raise EnvError(f"requirement {line!r}: the environment files must install pinned distributions only")
    match = PIN.fullmatch(line)
    if not match:
        raise EnvError(f"requirement {line!r} is not pinned as name==version")
    name, version = match.groups()
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        raise EnvError(f"requirement {line!r}: {name} is not available") from None
    if dist.version != version:
        raise EnvError(f"requirement {line!r}: only {name}=={dist.version} is available")
    return dist


def closure(dists: list[metadata.Distribution]) -> dict[str, metadata.Distribution]:
    """The distributions and everything they require (markers evaluated, no extras), by canonical name."""
    found, todo = {}, list(dists)
    while todo:
        dist = todo.pop()
        key = canonicalize_name(dist.metadata["Name"])
        if key in found:
            continue
        found[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            try:
                todo.append(metadata.distribution(req.name))
            except metadata.PackageNotFoundError:
                raise EnvError(f"{dist.metadata['Name']} requires {req.name}, which is not available") from None
    return found


def build_env(prefix: Path, dists: dict[str, metadata.Distribution]) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    site = Path(subprocess.run([str(prefix / "bin/python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               check=True, capture_output=True, text=True).stdout.strip())
    source_site = Path(sysconfig.get_path("purelib"))
    for dist in dists.values():
        for file in dist.files or []:
            top = file.parts[0]
            if top == ".." or top == "__pycache__" or top.endswith(".pth"):
                continue  # scripts outside site-packages; .pth hooks (an editable hnclip) stay out
            link = site / top
            if not link.exists():
                link.symlink_to(source_site / top)
        for ep in dist.entry_points:
            if ep.group == "console_scripts":
                script = prefix / "bin" / ep.name
                module, _, attr = ep.value.partition(":")
                script.write_text(f"#!{prefix / 'bin/python'}\nimport sys\nfrom {module} import {attr.split('.')[0]}\n"
                                  f"sys.exit({attr}())\n")
                script.chmod(0o755)


def env_create(args: list[str]) -> int:
    file = Path(args[args.index("--file") + 1].strip('"\''))
    prefix = Path(args[args.index("--prefix") + 1].strip('"\''))
    import yaml

    spec = yaml.safe_load(file.read_text())
    entry = {"call": "env create", "file": str(file), "prefix": str(prefix), "content": file.read_text()}
    try:
        pins, python = [], None
        for dep in spec["dependencies"]:
            if isinstance(dep, dict):
                pins += [resolve_pip(line, file.parent) for line in dep["pip"]]
            elif dep.startswith("python="):
                python = dep.split("=", 1)[1]
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if python != here:
            raise EnvError(f"python={python} requested; the stand-in can only provide {here}")
        dists = closure(pins)
        build_env(prefix, dists)
    except EnvError as e:
        entry["error"] = str(e)
        record(entry)
        print(f"conda stand-in: {file}: {e}", file=sys.stderr)
        return 1
    entry["pins"] = [f"{d.metadata['Name']}=={d.version}" for d in pins]
    entry["installed"] = sorted(dists)
    record(entry)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--version"]:
        print(f"conda {VERSION}")
        return 0
    if argv[:2] == ["info", "--json"]:
        (BASE / "bin").mkdir(parents=True, exist_ok=True)
        (BASE / "bin/activate").write_text(ACTIVATE)
        print(json.dumps({"conda_prefix": str(BASE), "platform": "linux-64", "conda_version": VERSION}))
        return 0
    if argv[:2] == ["config", "--get"]:
        print(json.dumps({"get": {"channel_priority": "strict"}, "rc_path": None, "success": True}))
        return 0
    if argv[:2] == ["env", "create"]:
        return env_create(argv[2:])
    if argv[:1] == ["clean"]:  # Snakemake's default --conda-cleanup-pkgs tarballs: nothing was downloaded
        record({"call": " ".join(argv)})
        return 0
    record({"call": " ".join(argv), "error": "not supported by the stand-in"})
    print(f"conda stand-in: unsupported call: conda {' '.join(argv)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
