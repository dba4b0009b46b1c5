"""The conda environments of the rules pin exactly what pyproject.toml pins and install nothing else (the
project's own code reaches the jobs through PYTHONPATH). tests/test_conda.py runs them through Snakemake's
conda path with a stand-in for conda, whose channels are unreachable here."""

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    pins = {}
    for req in project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]+\])?==([^\s;]+)", req)
        if m:
            pins[m.group(1).lower().replace("-", "_")] = m.group(3)
        else:
            assert req.startswith("hnclip["), f"unpinned requirement in pyproject.toml: {req!r}"
    return pins


def test_every_pyproject_requirement_is_pinned_and_torch_pair_is_the_local_one():
    pins = pyproject_pins()
    assert pins["torch"] == "2.14.1" and pins["torchvision"] == "0.29.1"


def test_env_files_pin_the_same_versions_as_pyproject():
    pins = pyproject_pins()
    env_files = sorted((REPO / "envs").glob("*.yaml"))
    assert {p.stem for p in env_files} >= {"data", "train", "report"}
    for path in env_files:
        env = yaml.safe_load(path.read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
        for line in pip:
            name, _, version = line.partition("==")
            key = name.lower().replace("-", "_")
            assert key in pins, f"{path.name}: {name} is not pinned in pyproject.toml"
            assert version == pins[key], f"{path.name}: {name}=={version}, pyproject pins {pins[key]}"


def test_env_files_install_dependencies_only_each_its_rules_extra():
    """No `-e ..[extra]`: Snakemake copies an env file to .snakemake/conda/<hash>.yaml before conda reads
    it, so a relative path would resolve inside .snakemake/. Each env holds the core dependencies and its
    own extra of pyproject.toml (envs/<kind>.yaml <-> hnclip[<kind>]), nothing more or less."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for kind in ("data", "train", "report"):
        env = yaml.safe_load((REPO / "envs" / f"{kind}.yaml").read_text())
        pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
        assert not [line for line in pip if line.startswith("-") or "/" in line or ".." in line], kind
        wanted = project["dependencies"] + project["optional-dependencies"][kind]
        assert sorted(pip) == sorted(wanted), kind


def test_rules_reference_existing_env_files():
    for smk in (REPO / "workflow" / "rules").glob("*.smk"):
        for rel in re.findall(r'conda:\s*\n\s*"([^"]+)"', smk.read_text()):
            assert (smk.parent / rel).resolve().is_file(), f"{smk.name}: conda env {rel} missing"
