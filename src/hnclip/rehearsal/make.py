"""Write everything the rehearsal stands in for, once, and never over real files.

Called by the workflow before any job when the config has a ``rehearsal`` section (``hnclip
rehearsal-files``). A record (``<rehearsal.folder>/files.json``) holds the settings the files were made
from: a second run with the same settings does nothing, a run with other settings stops and says what
to delete (the checksum locks and prepared data of the old files would not match the new ones).

A benchmark root that already holds files without the rehearsal's marker (``REHEARSAL.txt``) is refused:
it may be real data, downloaded for the paper run, which a rehearsal must never overwrite.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from hnclip import paths
from hnclip.data.roots import REHEARSAL_MARKER, check_root, claim_root, root_key
from hnclip.fileio import write_json_atomic

from .benchmarks import write_rehearsal_benchmark

__all__ = ["MARKER", "RECORD", "make_rehearsal_files"]

log = logging.getLogger(__name__)

MARKER = REHEARSAL_MARKER  # the shared rule (hnclip.data.roots) counts it as ours
RECORD = "files.json"
_MARKER_TEXT = ("Rehearsal fixture: generated stand-ins in this benchmark's file format (hnclip.rehearsal), "
                "not the benchmark. Delete this folder before a real run.\n")


def _digest(settings: dict) -> str:
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()


def _check_root(root: Path, benchmark: str) -> None:
    # every root is checked before any is written, so a refused one leaves the others untouched
    check_root(root, "hnclip rehearsal-files", key=root_key(benchmark))


def make_rehearsal_files(benchmarks: dict, checkpoint, sam_model, folder, seed: int = 0,
                         sam_image_size: int = 1024, layers: dict | None = None, models: dict | None = None) -> dict:
    """The Long-CLIP checkpoint, the SAM folder, each benchmark's publisher files and the offline Hub cache.

    Args:
        benchmarks: the config's ``benchmarks`` block (adapter, root and expected_counts of each).
        checkpoint: where the random Long-CLIP-L ``.pt`` goes (the config's ``backbone.checkpoint``).
        sam_model: where the tiny SAM folder goes (``preprocess.sam_model``).
        folder: the rehearsal's own folder: the record and the Hub cache (``hf-cache/``).
        sam_image_size: the SAM's input side; 1024 is SAM ViT-H's, so the mask pipeline post-processes
            masks at the paper's resolution (about a minute per image on one CPU core).
        layers: ``{"vision": N, "text": M}`` blocks for the checkpoint instead of Long-CLIP-L's 24 and 12
            (every width, the patch, the image size and the 248 positions kept); None: Long-CLIP-L's.
        models: the config's ``models`` (released checkpoints evaluated): the stand-ins of those whose files lie
            inside ``folder``, in their publishers' formats (:func:`hnclip.rehearsal.released.write_released_stand_ins`).
    Returns the record written.
    """
    from hnclip.preprocess.segments import save_random_sam

    from .checkpoint import longclip_arch, write_longclip_checkpoint

    folder, checkpoint, sam_model = Path(folder), Path(checkpoint), Path(sam_model)
    arch = longclip_arch(layers)  # the depth is checked before anything is written
    hub_cache = folder / "hf-cache"
    settings = {"benchmarks": {n: {k: b.get(k) for k in ("adapter", "root", "expected_counts")}
                               for n, b in sorted(benchmarks.items())},
                "checkpoint": str(checkpoint), "sam_model": str(sam_model), "seed": seed,
                "sam_image_size": sam_image_size}
    if layers is not None:  # recorded only when set: files made before this setting existed stay valid
        settings["layers"] = {"vision": arch["vision_layers"], "text": arch["transformer_layers"]}
    if models:  # likewise: a rehearsal without released checkpoints keeps its record
        settings["models"] = {n: {k: m.get(k) for k in ("source", "checkpoint", "base")} for n, m in sorted(models.items())}
    record_path = folder / RECORD
    if record_path.is_file():
        record = json.loads(record_path.read_text())
        if record.get("settings_sha256") == _digest(settings) and checkpoint.is_file() and sam_model.is_dir():
            log.info("rehearsal files already made (%s)", record_path)
            return record
        if record.get("settings_sha256") != _digest(settings):
            roots = " ".join(sorted(str(b["root"]) for b in settings["benchmarks"].values()))
            raise RuntimeError(
                f"rehearsal: {record_path} was made from other settings than this config's; delete "
                f"{folder} {roots} {paths.RESULTS}/ (fixtures, their checksum locks and everything prepared from "
                "them) and run again")
    for name, bench in settings["benchmarks"].items():
        _check_root(Path(bench["root"]), name)

    made = {}
    for name, bench in settings["benchmarks"].items():
        claim_root(bench["root"], "hnclip rehearsal-files", key=root_key(name), marker=MARKER,
                   text=_MARKER_TEXT)
        made[name] = write_rehearsal_benchmark(name, bench, hub_cache, seed)
        log.info("rehearsal benchmark %s: %s", name, made[name])
    if not checkpoint.is_file():
        log.info("writing a random Long-CLIP-L checkpoint (%d vision, %d text blocks) to %s", arch["vision_layers"],
                 arch["transformer_layers"], checkpoint)
        write_longclip_checkpoint(checkpoint, seed=seed, arch=arch)
    if not sam_model.is_dir():
        save_random_sam(sam_model, image_size=sam_image_size, seed=seed)
    if models:
        from .released import write_released_stand_ins

        for name, what in write_released_stand_ins(models, folder, seed, layers).items():
            log.info("rehearsal released checkpoint %s: %s", name, what)
    record = {"settings": settings, "settings_sha256": _digest(settings), "benchmarks": made,
              "hub_cache": str(hub_cache)}
    write_json_atomic(record_path, record, sort_keys=True)
    return record
