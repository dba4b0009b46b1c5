"""A released model folder as a backbone: the embedded default starts from one, as the paper starts from a
released Long-CLIP-L.

A released folder is what :func:`hnclip.models.save_model` writes (``model.safetensors`` + ``model.json``)
plus its card (``README.md``) and the figures it was released with (``release.json``), e.g. the toy's in
``resources/backbones/``. Installing it checks the weights against the sha256 the config pins (a file that
differs stops the run, naming it and both hashes, as a Hub checkpoint's lock does) and that its
architecture fits the config's ``backbone.image_size`` / ``backbone.context_length``, then copies the two
model files byte for byte, so the installed weights keep the released sha256 that cards and provenance cite.
Both files are also checked against the sha256 their ``release.json`` records (:data:`RECORDED_FILES`): the
config pins only the weights, and an edited ``model.json`` (``quick_gelu`` flipped, say) builds another model
around the same weights while every provenance line still credits the release. So a pinned folder must have its
``release.json``, recording both files: through it the pin covers the architecture too, and a folder whose
record was deleted (or never written) is refused rather than installed around an unchecked ``model.json``. An
unpinned folder (``backbone.sha256`` null, the DAG's own pretrained one) is taken as it is.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from hnclip import paths
from hnclip.data.checksum_lock import ChecksumMismatchError
from hnclip.hashing import sha256_file
from hnclip.model_files import MODEL_JSON, MODEL_WEIGHTS, RELEASE_FILE

__all__ = ["CARD_FILE", "RECORDED_FILES", "check_release_record", "install_released",
           "read_release", "released_spec"]

CARD_FILE = "README.md"
# the model files a release.json records, and the key of each one's sha256 (hnclip.backbone.release writes them)
RECORDED_FILES = {MODEL_WEIGHTS: "weights_sha256", MODEL_JSON: "spec_sha256"}


def read_release(folder) -> dict | None:
    """``folder``'s release.json, or None where there is none (a model folder released before the format)."""
    path = Path(folder) / RELEASE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error


def check_release_record(folder) -> None:
    """Refuse a released folder whose model files differ from the sha256 its ``release.json`` records.

    A folder without ``release.json`` has nothing to check against here (a pinned one is refused by
    :func:`install_released`). The error names the file, both hashes and the record, and says what the
    difference means.
    """
    folder = Path(folder)
    release = read_release(folder)
    if release is None:
        return
    for name, key in RECORDED_FILES.items():
        recorded, path = release.get(key), folder / name
        if recorded is None or not path.is_file():
            continue
        digest = sha256_file(path)
        if digest != str(recorded).lower():
            raise ChecksumMismatchError(
                f"{path}: sha256 {digest} does not match {key} {recorded} recorded in {folder / RELEASE_FILE}; "
                f"the file changed after the release, so the model built from it is not the released one: "
                f"restore the released file or release the edited model anew (snakemake backbone_release)")


def _require_record(folder: Path, release: dict | None) -> None:
    """A pinned folder's ``release.json`` must exist and record the sha256 of both model files."""
    record = folder / RELEASE_FILE
    missing = [key for key in RECORDED_FILES.values() if release is not None and not release.get(key)]
    if release is not None and not missing:
        return
    what = f"no {RELEASE_FILE}" if release is None else f"{record} records no {' or '.join(missing)}"
    raise FileNotFoundError(
        f"released backbone {folder}: {what}, but backbone.sha256 pins its weights; the pin covers the "
        f"architecture ({folder / MODEL_JSON}: activation, widths, positions) only through the spec_sha256 "
        f"{RELEASE_FILE} records, so this folder could build another model around the pinned weights: restore "
        f"{record} as released (snakemake backbone_release writes it), or set backbone.sha256: null to install "
        f"the folder unchecked")


def released_spec(folder) -> dict:
    """The architecture spec of the released model in ``folder`` (its ``model.json``), naming the file on error."""
    path = Path(folder) / MODEL_JSON
    if not path.is_file():
        raise FileNotFoundError(f"released backbone {folder}: no {MODEL_JSON} (a model folder written by "
                                f"hnclip's save_model, e.g. {paths.BACKBONES_DIR}/<name>/)")
    try:
        return json.loads(path.read_text(encoding="utf-8"))["spec"]
    except (json.JSONDecodeError, KeyError, TypeError) as error:
        raise ValueError(f"{path}: not a model spec ({error})") from error


def install_released(folder, out, *, sha256: str | None, image_size: int, context_length: int) -> str:
    """Check the released model in ``folder`` and copy its weights and spec to ``out``; return the weights' sha256.

    ``sha256`` is ``backbone.sha256`` (None: not pinned, the weights are taken as they are; pinned: the folder's
    ``release.json`` must record both files, so the pin covers ``model.json`` too). The spec must
    have the config's ``backbone.image_size`` and ``backbone.context_length``: the image stores are prepared
    at the configured size, so a mismatch would only surface as a shape error inside the first training job.
    """
    folder, out = Path(folder), Path(out)
    weights = folder / MODEL_WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"released backbone {folder}: no {MODEL_WEIGHTS}")
    check_release_record(folder)  # first: an edited model.json can also change the sizes checked below
    digest = sha256_file(weights)
    if sha256 is not None and sha256.lower() != digest:
        raise ChecksumMismatchError(f"{weights}: sha256 {digest} does not match the pinned {sha256.lower()} "
                                    "(backbone.sha256); refusing to continue")
    if sha256 is not None:  # the pin covers model.json only through the record (module docstring)
        _require_record(folder, read_release(folder))
    spec = released_spec(folder)
    found = {"backbone.image_size": spec["config"]["vision_cfg"]["image_size"],
             "backbone.context_length": spec["context_length"]}
    wanted = {"backbone.image_size": image_size, "backbone.context_length": context_length}
    for key, value in wanted.items():
        if found[key] != value:
            raise ValueError(f"{key} is {value}, but the released backbone {folder} has {found[key]} "
                             f"({folder / MODEL_JSON}); set {key}: {found[key]}")
    out.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_WEIGHTS, MODEL_JSON, RELEASE_FILE):  # release.json: which release, built on which CPU
        if name != RELEASE_FILE or (folder / name).is_file():
            shutil.copyfile(folder / name, out / name)
    return digest
