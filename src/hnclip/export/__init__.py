"""Export a model folder to other libraries' formats, with a model card; push a folder to the Hub.

- ``longclip``: Long-CLIP's own checkpoint (:mod:`.longclip_format`), read by its ``longclip.load``;
- ``open_clip``: a model config JSON and safetensors weights (:mod:`.open_clip_format`);
- ``transformers``: a ``CLIPModel.save_pretrained`` folder with its ``CLIPProcessor`` (:mod:`.transformers_format`).

Every export folder also holds ``README.md``, a ``huggingface_hub.ModelCard`` (:mod:`.card`); :mod:`.push`
uploads a folder. A format that cannot represent the model exactly is refused naming the config key.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from hnclip.model_files import EXPORT_FORMATS

from .common import ExportError, refuse_if

__all__ = ["FORMATS", "ExportError", "default_name", "export_model"]

log = logging.getLogger(__name__)

FORMATS = EXPORT_FORMATS  # the registry lives in a module without torch (the CLI parser reads it)


def default_name(run: dict | None) -> str:
    """``hnclip-<train_set>-<method>-g<gamma>-f<fraction>-s<seed>`` for a run, else ``hnclip-model``."""
    from hnclip.analysis.records import RUN_FIELDS, run_name

    if run and all(f in run for f in RUN_FIELDS):
        return "hnclip-" + run_name(run).replace("/", "-")
    return "hnclip-model"


def _framework_note(model_dir: Path, model, encoder_only: bool) -> str | None:
    """A framework whose own score ranked the evaluation (FineLIP) is not in any exported format."""
    from hnclip.framework_loading import load_framework

    framework = load_framework(model_dir, model)
    if framework is None or not framework.has_score:
        return None
    message = (f"{model_dir / 'framework.json'}: framework {framework.name!r} scores image-text pairs with its "
               "own modules (framework.safetensors), which no export format carries; the exported encoder's "
               "cosine is not what the evaluation ranked by")
    if not encoder_only:
        raise ExportError(message + " (pass --encoder-only to export the encoder anyway)")
    return (message + ". The results below are the framework's scores, not this encoder's alone.")


def export_model(model_dir, fmt: str, out_dir, run_dir=None, eval_paths=None, settings=None, name: str | None = None,
                 encoder_only: bool = False, scale: str | None = None) -> Path:
    """Write ``model_dir`` (a :func:`hnclip.models.save_model` folder) as ``fmt`` into ``out_dir``.

    ``run_dir`` (default: the model folder's parent when it holds ``summary.json``) gives the card its recipe
    and provenance; ``eval_paths`` (default: the run's ``results/evals/<run>/*.json``) its results rows, with
    intervals from ``settings`` (:class:`hnclip.analysis.bootstrap.BootstrapSettings`); ``scale`` (the workflow
    config's: toy, paper, ...) heads the card, which says so when it is not given. ``out_dir`` must not
    exist or be empty; it is written in a temporary sibling and renamed, so a failed export leaves nothing.
    """
    from hnclip.analysis.bootstrap import BootstrapSettings
    from hnclip.models import load_model

    from . import card
    from .longclip_format import longclip_problems, write_longclip
    from .open_clip_format import write_open_clip
    from .transformers_format import transformers_problems, write_transformers

    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise FileExistsError(f"export folder {out_dir} exists and is not empty; remove it first")
    if run_dir is None and (model_dir.parent / "summary.json").is_file():
        run_dir = model_dir.parent
    run = card.read_run(Path(run_dir) if run_dir is not None else None)
    if eval_paths is None:
        eval_paths = card.discover_evals(Path(run_dir) if run_dir is not None else None)
    settings = settings or BootstrapSettings()

    model = load_model(model_dir).eval()
    where = str(model_dir / "model.json")
    problems = {"longclip": longclip_problems, "transformers": transformers_problems}.get(fmt, lambda m: [])(model)
    refuse_if(problems, fmt, where)
    notes = [n for n in [_framework_note(model_dir, model, encoder_only)] if n]
    rows = card.results_rows([Path(p) for p in eval_paths], settings, run=run.fields)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = out_dir.parent / f".{out_dir.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)  # left by an earlier process of the same id that was killed
    staging.mkdir()
    try:
        if fmt == "longclip":
            files = write_longclip(model, staging, where)
        elif fmt == "open_clip":
            files = write_open_clip(model, staging, name or default_name(run.fields), where)
        else:
            files = write_transformers(model, staging, where)
        model_card = card.build_model_card(fmt, files, model, run, rows, settings, model_dir, notes, scale=scale)
        model_card.save(staging / card.CARD_FILE)
        if out_dir.exists():
            out_dir.rmdir()
        staging.rename(out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    log.info("exported %s as %s to %s (%d files, %d results rows)", model_dir, fmt, out_dir, len(files) + 1,
             len(rows))
    return out_dir
