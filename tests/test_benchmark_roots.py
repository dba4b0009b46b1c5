"""No writer of benchmark files writes into a folder that holds a user's files (hnclip.data.roots), and the
config validator refuses roots no benchmark may have (/, the home folder, the repository, their parents)."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hnclip.config.validation import ConfigError, validate_config
from hnclip.data.download import download_benchmark
from hnclip.data.roots import MARKER, RootRefusedError, claim_root
from hnclip.data.synthetic import generate_synthetic

REPO = Path(__file__).resolve().parents[1]
SCHEMA_PATH = REPO / "workflow/schemas/config.schema.yaml"
SETTINGS = {"synthetic": {"n_train": 2, "n_test": 1, "image_size": 32, "seed": 0}}


def _plant(folder: Path) -> dict[str, str]:
    """A user's own dataset, in names a synthetic render would overwrite; returns each file's sha256."""
    (folder / "images").mkdir(parents=True)
    (folder / "README.txt").write_text("my own notes\n")
    (folder / "captions.jsonl").write_text('{"image_id": "mine", "caption": "my caption"}\n')
    (folder / "images" / "x.png").write_bytes(b"\x89PNG my picture")
    return _hashes(folder)


def _hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _fetch(root, out) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(
        [sys.executable, "-m", "hnclip", "fetch", "--benchmark", "synthetic", "--adapter", "synthetic",
         "--root", str(root), "--settings", json.dumps(SETTINGS), "--out", str(out)],
        capture_output=True, text=True, env=env, timeout=300)


def test_fetch_into_a_users_folder_is_refused_and_leaves_every_file_unchanged(tmp_path):
    user = tmp_path / "my-data"
    before = _plant(user)
    done = _fetch(user, tmp_path / "source.json")
    assert done.returncode != 0
    assert str(user) in done.stderr and "README.txt" in done.stderr
    assert _hashes(user) == before
    assert not (tmp_path / "source.json").exists()


def test_fetch_into_an_empty_folder_marks_it_and_a_rerun_there_works(tmp_path):
    root = tmp_path / "bench"
    root.mkdir()
    assert _fetch(root, tmp_path / "a.json").returncode == 0
    assert (root / MARKER).is_file()
    first = _hashes(root)
    again = _fetch(root, tmp_path / "b.json")
    assert again.returncode == 0, again.stderr
    assert {k: v for k, v in _hashes(root).items() if k != MARKER} == {k: v for k, v in first.items() if k != MARKER}
    assert len([k for k in first if k.startswith("images/")]) == 3  # 2 train + 1 test scenes


def test_a_root_linking_to_the_filesystem_root_is_refused(tmp_path):
    link = tmp_path / "bench"
    link.symlink_to("/")
    with pytest.raises(RootRefusedError, match="filesystem root"):
        generate_synthetic(link, "synthetic", 2, 1, image_size=32)
    with pytest.raises(RootRefusedError, match="filesystem root"):
        download_benchmark("docci", link, tmp_path / "lock.json")


def test_a_link_to_a_users_folder_is_judged_by_what_it_points_at(tmp_path):
    user = tmp_path / "mine"
    before = _plant(user)
    link = tmp_path / "bench"
    link.symlink_to(user)
    with pytest.raises(RootRefusedError, match=f"a link to {user}"):
        generate_synthetic(link, "synthetic", 2, 1, image_size=32)
    assert _hashes(user) == before


def test_a_planted_marker_link_does_not_make_a_folder_ours(tmp_path):
    user = tmp_path / "mine"
    before = _plant(user)
    (tmp_path / "elsewhere.txt").write_text("x")
    (user / MARKER).symlink_to(tmp_path / "elsewhere.txt")
    with pytest.raises(RootRefusedError):
        claim_root(user, "test")
    assert {k: v for k, v in _hashes(user).items() if k != MARKER} == before


def test_download_refuses_a_users_folder_before_fetching_anything(tmp_path):
    user = tmp_path / "docci"
    before = _plant(user)  # images/ is DOCCI's too, README.txt and captions.jsonl are not
    with pytest.raises(RootRefusedError, match=r"\(README\.txt, captions\.jsonl\)"):
        download_benchmark("docci", user, tmp_path / "lock.json")
    assert _hashes(user) == before and not (tmp_path / "lock.json").exists()


def test_download_accepts_the_publishers_files_placed_by_hand(tmp_path):
    # SA-1B's tar and GOAL's split are placed by hand before the first download (README: Real benchmarks)
    root = tmp_path / "dci"
    root.mkdir()
    (root / "DCI_test.json").write_text("{}")
    (root / "densely_captioned_images" / "photos").mkdir(parents=True)
    (root / "densely_captioned_images" / "photos" / "sa_1.jpg").write_bytes(b"jpg")
    sources = {"dci": {"licence": "x", "homepage": "x", "root_entries": ["DCI_test.json"], "files": [
        {"path": "sa_000138.tar", "manual": "by hand", "satisfied_by": ["densely_captioned_images/photos"]}]}}
    download_benchmark("dci", root, tmp_path / "lock.json", sources=sources)
    assert (root / MARKER).is_file()


def _config(root: str) -> dict:
    return copy.deepcopy({"benchmarks": {"synthetic": {"adapter": "synthetic", "root": root, "train_set": "synthetic"}},
                          "methods": {"hnclip": {"framework": "longclip", "hn": True}}})


@pytest.mark.parametrize("root, why", [("/", "filesystem root"), (str(Path.home()), "home folder"),
                                       (str(REPO), "repository"), (str(REPO.parent), "repository")])
def test_validation_refuses_roots_no_benchmark_may_have_naming_the_key(root, why):
    with pytest.raises(ConfigError, match=rf"^config key benchmarks\.synthetic\.root: .*{why}"):
        validate_config(_config(root), SCHEMA_PATH)


def test_validation_follows_a_link_to_the_filesystem_root(tmp_path):
    (tmp_path / "link").symlink_to("/")
    with pytest.raises(ConfigError, match=r"benchmarks\.synthetic\.root: .*filesystem root"):
        validate_config(_config(str(tmp_path / "link")), SCHEMA_PATH)


def test_validation_accepts_an_ordinary_root(tmp_path):
    validate_config(_config(str(tmp_path / "bench")), SCHEMA_PATH)
    validate_config(_config("resources/synthetic"), SCHEMA_PATH)


def test_a_root_rendered_before_markers_existed_is_still_ours(tmp_path):
    root = tmp_path / "bench"
    generate_synthetic(root, "synthetic", 2, 1, image_size=32)
    (root / MARKER).unlink()  # as an older hnclip left it: README, captions and images only
    generate_synthetic(root, "synthetic", 2, 1, image_size=32)
    assert (root / MARKER).is_file()


def test_a_foreign_root_refused_in_the_fetch_job_is_named_by_its_key_on_snakemakes_console(tmp_path):
    """The refusal happens inside the fetch job, whose stderr goes to its log; the onerror hook prints the
    job's own error line, so the console (not only results/logs/) names benchmarks.synthetic.root."""
    import yaml
    from checkout import copy_checkout, user_env

    user = tmp_path / "my-data"
    before = _plant(user)
    repo = copy_checkout(tmp_path / "repo")
    config = yaml.safe_load((repo / "tests/e2e/micro.yaml").read_text())
    config["benchmarks"]["synthetic"]["root"] = str(user)
    (repo / "mine.yaml").write_text(yaml.safe_dump(config))
    done = subprocess.run([sys.executable, "-m", "snakemake", "--cores", "1", "results/data/synthetic/source.json",
                           "--configfile", "mine.yaml"], cwd=repo, env=user_env(), capture_output=True, text=True,
                          timeout=600)
    assert done.returncode != 0
    console = done.stdout + done.stderr
    refusal = [line for line in console.splitlines() if "benchmarks.synthetic.root" in line]
    assert refusal and str(user) in refusal[0] and "rule fetch_benchmark" in refusal[0], console[-3000:]
    assert _hashes(user) == before
    assert not (repo / "results/data/synthetic/source.json").exists()
