"""Upload an export folder to a Hugging Face Hub model repository.

The token is read from ``HF_TOKEN`` and nowhere else: not from ``hf auth login``'s stored token, and never
passed on a command line. It goes only into huggingface_hub's Authorization header; nothing here logs it,
and an error raised by the upload has it masked before it is re-raised.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["TOKEN_VARIABLE", "push_folder"]

log = logging.getLogger(__name__)

TOKEN_VARIABLE = "HF_TOKEN"


class PushError(RuntimeError):
    pass


def _mask(text: str, token: str) -> str:
    return text.replace(token, "***") if token else text


def push_folder(folder, repo_id: str, endpoint: str | None = None, private: bool | None = None,
                revision: str | None = None, message: str | None = None) -> str:
    """Create ``repo_id`` if needed and commit every file of ``folder`` to it; returns the commit's URL.

    ``endpoint``: the Hub's base URL (default: huggingface_hub's, i.e. ``HF_ENDPOINT`` or huggingface.co).
    """
    from huggingface_hub import HfApi

    folder = Path(folder)
    if not folder.is_dir() or not any(p.is_file() for p in folder.rglob("*")):
        raise FileNotFoundError(f"hnclip push: {folder} is not a folder with files in it")
    token = os.environ.get(TOKEN_VARIABLE, "").strip()
    if not token:
        raise PushError(f"hnclip push: set {TOKEN_VARIABLE} to a Hub token with write access "
                        "(it is read from the environment only)")
    if "/" not in repo_id:
        raise PushError(f"hnclip push: --repo {repo_id!r}: expected OWNER/NAME")
    api = HfApi(endpoint=endpoint, token=token)
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="model", revision=revision,
                                 commit_message=message or f"hnclip export ({folder.name})")
    except Exception as err:  # huggingface_hub's messages do not carry the token; mask it anyway
        raise PushError(f"hnclip push of {folder} to {repo_id} at {api.endpoint} failed: "
                        f"{_mask(str(err), token)}") from None
    url = getattr(info, "commit_url", None) or str(info)
    n_files = sum(1 for p in folder.rglob("*") if p.is_file())
    log.info("pushed %d files of %s to %s: %s", n_files, folder, repo_id, url)
    return url
