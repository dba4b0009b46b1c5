"""The job of ``hnclip gallery``: HN-CLIP vs the strongest non-HN baseline on the main experiment's
first benchmark.

Glue only: it picks the two runs from the main spec and its evaluation records, encodes the benchmark's
test split with each model and hands features plus an image-store reader to
:func:`hnclip.analysis.gallery.plot_retrieval_gallery`. Query captions are evenly spaced over the split
(not chosen by outcome), so the gallery shows typical cases rather than wins.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from hnclip import paths, plan
from hnclip.analysis.figures import plot_no_data

log = logging.getLogger(__name__)

__all__ = ["NoGalleryData", "choose_runs", "run_gallery"]


class NoGalleryData(ValueError):
    """The main spec lacks a run the gallery compares (HN-CLIP's, or any baseline)."""


def choose_runs(spec: dict, hn_method: str | None = None) -> tuple[str, dict, dict]:
    """(benchmark group, HN cell, baseline cell): the HN cell is ``hn_method``'s run (default: the spec's
    ``roles.reference``, HN-CLIP's key; found by its config key, so a renamed label changes only what is
    shown), the baseline the non-HN row (gamma 0) with the
    best R@1 (mean of directions) on the spec's first group. Raises :class:`NoGalleryData` saying what is
    missing; :func:`run_gallery` draws that reason instead of failing after the runs are spent."""
    from hnclip.analysis.records import load_records, load_spec
    from hnclip.analysis.tables import build_table

    spec = load_spec(spec)
    hn_method = hn_method or spec.get("roles", plan.spec_roles())["reference"]
    group = spec["cells"][0]["group"]
    # the zero-shot backbone is a reference row, not a fine-tuned baseline (and has no run folder)
    runs = [c for c in spec["cells"] if c["group"] == group and not c.get("zeroshot")]
    hn = [c for c in runs if c["run"]["method"] == hn_method]
    if not hn:
        raise NoGalleryData(f"the main experiment trains no {hn_method!r} run on {group!r} "
                            f"(methods: {sorted({c['run']['method'] for c in runs})})")
    hn_rows = {c["row"] for c in spec["cells"] if float(c["run"]["gamma"]) > 0}
    cells = {c["row"]: c for c in runs}
    baselines = [r for r in cells if r not in hn_rows and r != hn[0]["row"]]
    if not baselines:
        raise NoGalleryData(f"the main experiment has no baseline (gamma 0) row on {group!r} "
                            "(experiments.main.methods)")
    table = build_table(spec, load_records(spec))

    def r1(row):
        return float(np.mean([table.loc[row, (group, d, "R@1", "mean")] for d in ("I->T", "T->I")]))

    best = max(baselines, key=r1)
    return group, hn[0], cells[best]


def _changed_queries(hn_cell: dict, base_cell: dict, n_captions: int) -> list[int]:
    """The caption rows whose own image's rank differs most between the two cells' evaluation records
    (:func:`hnclip.analysis.own_results.changed_captions`), in caption order; none changed: the first rows."""
    import json

    from hnclip.analysis.own_results import changed_captions

    hn, base = (json.loads(Path(c["eval_path"]).read_text(encoding="utf-8")) for c in (hn_cell, base_cell))
    rows = sorted(c["caption_row"] for c in changed_captions(hn, base, None, n_captions))
    return rows or list(range(min(n_captions, len(hn["ranks"]["t2i"]))))


def run_gallery(spec: dict, n_captions: int, out_prefix, k: int = 5, data_root: Path = Path(paths.DATA_DIR),
                hn_method: str | None = None, pick: str = "spaced") -> list[Path]:
    """The gallery of ``spec``'s main runs; ``pick``: ``spaced`` (captions evenly spaced over the split, typical
    cases) or ``changed`` (those whose rank changed most between HN-CLIP and the baseline: what changed)."""
    from hnclip.analysis.gallery import plot_retrieval_gallery
    from hnclip.data.image_store import ImageStore
    from hnclip.data.manifest import read_manifest
    from hnclip.evaluate import _unique_images, encode_split
    from hnclip.models import load_model

    try:
        group, hn_cell, base_cell = choose_runs(spec, hn_method)
    except NoGalleryData as why:
        log.warning("gallery: %s; drawing a placeholder", why)
        return plot_no_data(out_prefix, "Retrieval gallery", str(why))
    bench = hn_cell["eval_benchmark"]
    manifest = read_manifest(Path(data_root) / bench / "test.csv")
    store = ImageStore(Path(data_root) / bench / "test_images")
    image_ids, text_image_ids = _unique_images(manifest)
    store_rows = np.asarray([store.row(i) for i in image_ids])
    models = {}
    for cell in (hn_cell, base_cell):
        model = load_model(Path(cell["run_dir"]) / "model")
        image_features, text_features = encode_split(model, manifest, store)
        models[cell["row"]] = (text_features.numpy(), image_features.numpy())
    n_captions = min(n_captions, len(manifest))
    queries = (_changed_queries(hn_cell, base_cell, n_captions) if pick == "changed"
               else np.linspace(0, len(manifest) - 1, n_captions).round().astype(int).tolist())
    log.info("gallery on %s: %s vs %s, captions %s", group, hn_cell["row"], base_cell["row"], queries)
    return plot_retrieval_gallery(
        captions=list(manifest["caption"]), queries=queries,
        true_rows=[int(text_image_ids[q]) for q in queries], models=models,
        read=lambda idx: store.read(store_rows[list(idx)]), out_prefix=out_prefix, k=min(k, len(image_ids)))
