"""A Hugging Face Hub cache written by hand (HF_HUB_CACHE's layout: ``models--OWNER--NAME/refs/main`` names the
snapshot that holds ``config.json``), so a config naming a Hub model checks without a network
(hnclip.hub_models: a cached copy counts as reachable)."""

from __future__ import annotations

from pathlib import Path


def write_hub_cache(cache: Path, *repo_ids: str) -> Path:
    """``cache`` holding a ``config.json`` snapshot of each Hub model ``repo_ids``; returns ``cache``."""
    commit = "0" * 40
    for repo_id in repo_ids:
        repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / "main").write_text(commit)
        (repo / "snapshots" / commit).mkdir(parents=True, exist_ok=True)
        (repo / "snapshots" / commit / "config.json").write_text("{}")
    return Path(cache)
