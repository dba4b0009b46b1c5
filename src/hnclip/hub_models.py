"""Whether a Hub model a config names (``models.<name>.checkpoint: OWNER/NAME``, a ``base``) can be had from
here, asked at config time (``snakemake -n``, ``hnclip plan``) instead of by a conversion job after the main
runs trained.

A relative folder such as ``weights/my-clip`` is spelled like a Hub id; when neither it nor its parent exists
it is taken for one (:func:`hnclip.model_files.missing_local_source`), and offline its fetch failed with Hugging
Face's generic message, naming neither the config key nor the path. Here a Hub id counts as reachable when a
fetched copy is in the download folder (``resources/checkpoints/<name>/``), when the Hub cache holds its
``config.json`` (``HF_HUB_CACHE``), or when the Hub answers for it; with ``HF_HUB_OFFLINE`` set the Hub is not
asked. The question to the Hub (one request per id and process, 10 s at most) is asked by the planning process
only (``probe``): a job's own parse of the workflow never waits on the network.
"""

from __future__ import annotations

import os
from pathlib import Path

from hnclip import paths

__all__ = ["hub_model_problem"]

_TIMEOUT_S = 10.0
_ASKED: dict[str, str | None] = {}  # repo id -> the Hub's answer in this process (None: it has the model)


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _fetched_folder(repo_id: str, download_dir) -> Path:
    from hnclip.data.weights import source_folder_name

    return Path(download_dir) / source_folder_name(repo_id)


def _cached(repo_id: str, download_dir) -> bool:
    """A copy here: fetched into the download folder, or in the Hub cache."""
    from huggingface_hub import try_to_load_from_cache

    if (_fetched_folder(repo_id, download_dir) / "config.json").is_file():
        return True
    found = try_to_load_from_cache(repo_id, "config.json", cache_dir=os.environ.get("HF_HUB_CACHE") or None)
    return isinstance(found, str)


def _ask_hub(repo_id: str) -> str | None:
    """None when the Hub has the model (or cannot say: a server error), else why it cannot be fetched."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, HfHubHTTPError, RepositoryNotFoundError

    try:
        HfApi().model_info(repo_id, timeout=_TIMEOUT_S, token=os.environ.get("HF_TOKEN") or False)
    except GatedRepoError:
        return None  # it exists; the fetch says what access it needs
    except RepositoryNotFoundError:
        return f"the Hub has no model {repo_id} (a private one needs HF_TOKEN)"
    except HfHubHTTPError:
        return None
    except Exception as error:  # no network: DNS, connection refused, a timeout
        first = (str(error).strip().splitlines() or [""])[0][:120]
        return f"the Hub cannot be reached from here ({type(error).__name__}: {first})"
    return None


def hub_model_problem(repo_id: str, download_dir=paths.WEIGHTS_DIR, probe: bool = True) -> str | None:
    """Why the Hub model ``repo_id`` (``OWNER/NAME``) cannot be had from here, or None when it can (or when
    only the Hub could say and ``probe`` is off)."""
    if _cached(repo_id, download_dir):
        return None
    where = f"neither {_fetched_folder(repo_id, download_dir)}/ nor the Hub cache holds a copy"
    if _offline():
        return f"HF_HUB_OFFLINE is set and {where}"
    if not probe:
        return None
    if repo_id not in _ASKED:
        _ASKED[repo_id] = _ask_hub(repo_id)
    problem = _ASKED[repo_id]
    return None if problem is None else f"{problem}, and {where}"
