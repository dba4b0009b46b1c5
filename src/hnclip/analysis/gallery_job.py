"""The job of ``hnclip gallery`` (Figure A10's stand-in): HN-CLIP vs the strongest competitor (chosen on val:
:func:`hnclip.plan.competitor_key`, never on test) on the main experiment's first benchmark.

Glue only: it picks the two runs from the main spec, encodes the benchmark's test split with each model,
ranks every caption's ground-truth image under each (Text→Image, the figure's direction) and shows the
queries where the two disagree, with the count of each kind (HN-CLIP alone right, the competitor alone
right, both wrong) and the rule that chose them (:func:`hnclip.analysis.gallery.choose_disagreements`) in the
figure's heading: the paper's examples are wins; a reader here sees both sides and how many of each.
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
    """(benchmark group, HN cell, competitor cell): the HN cell is ``hn_method``'s run (default: the spec's
    ``roles.reference``, HN-CLIP's key; found by its config key, so a renamed label changes only what is
    shown), the competitor the run of :func:`competitor_key` (the spec's ``roles.competitor``, chosen on val;
    else plain fine-tuning) on the spec's first group: never the row best on test. Raises
    :class:`NoGalleryData` saying what is missing; :func:`run_gallery` draws that reason instead of failing
    after the runs are spent."""
    from hnclip.analysis.records import load_spec

    spec = load_spec(spec)
    roles = spec.get("roles", plan.spec_roles())
    hn_method = hn_method or roles["reference"]
    group = spec["cells"][0]["group"]
    # the zero-shot backbone is a reference row, not a fine-tuned baseline (and has no run folder)
    runs = [c for c in spec["cells"] if c["group"] == group and not c.get("zeroshot")]
    hn = [c for c in runs if c["run"]["method"] == hn_method]
    if not hn:
        raise NoGalleryData(f"the main experiment trains no {hn_method!r} run on {group!r} "
                            f"(methods: {sorted({c['run']['method'] for c in runs})})")
    rival = plan.competitor_key(roles)
    base = [c for c in runs if c["run"]["method"] == rival and float(c["run"]["gamma"]) == 0]
    if not base:
        raise NoGalleryData(f"the main experiment has no {rival!r} run on {group!r}, the strongest competitor "
                            "(config competitor, chosen on val; else plain fine-tuning)")
    return group, hn[0], base[0]


def _changed_queries(hn_cell: dict, base_cell: dict, n_captions: int) -> list[int]:
    """The caption rows whose own image's rank differs most between the two cells' evaluation records
    (:func:`hnclip.analysis.own_results.changed_captions`), in caption order; none changed: the first rows."""
    import json

    from hnclip.analysis.own_results import changed_captions

    hn, base = (json.loads(Path(c["eval_path"]).read_text(encoding="utf-8")) for c in (hn_cell, base_cell))
    rows = sorted(c["caption_row"] for c in changed_captions(hn, base, None, n_captions))
    return rows or list(range(min(n_captions, len(hn["ranks"]["t2i"]))))


def run_gallery(spec: dict, n_captions: int, out_prefix, k: int = 5, data_root: Path = Path(paths.DATA_DIR),
                hn_method: str | None = None, pick: str = "disagreements") -> list[Path]:
    """The gallery of ``spec``'s main runs; ``pick``: ``disagreements`` (the toy: the captions where HN-CLIP and
    the strongest competitor do not both rank the ground truth first, with the counts of each kind) or
    ``changed`` (your own data: those whose rank changed most between HN-CLIP and plain fine-tuning)."""
    from hnclip.analysis.gallery import (
        DISAGREEMENT_KINDS,
        choose_disagreements,
        disagreements,
        plot_retrieval_gallery,
        true_ranks,
    )
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
    captions = list(manifest["caption"])
    true_rows = [int(t) for t in text_image_ids]
    if pick == "changed":
        queries = _changed_queries(hn_cell, base_cell, min(n_captions, len(manifest)))
        log.info("gallery on %s: %s vs %s, captions %s", group, hn_cell["row"], base_cell["row"], queries)
        return plot_retrieval_gallery(
            captions=captions, queries=queries, true_rows=[true_rows[q] for q in queries], models=models,
            read=lambda idx: store.read(store_rows[list(idx)]), out_prefix=out_prefix, k=min(k, len(image_ids)),
            title=f"{group}: the captions whose image's rank changed most between {hn_cell['row']} and "
                  f"{base_cell['row']}")
    everything = list(range(len(manifest)))
    ranks = {row: true_ranks(t, i, everything, true_rows) for row, (t, i) in models.items()}
    kinds = disagreements(ranks[hn_cell["row"]], ranks[base_cell["row"]])
    queries = choose_disagreements(kinds, n_captions)
    names = dict(zip(DISAGREEMENT_KINDS, (f"{hn_cell['row']} alone right", f"{base_cell['row']} alone right",
                                          "both wrong"), strict=True))
    kind_of = {q: names[kind] for kind, qs in kinds.items() for q in qs}
    counts = ", ".join(f"{names[kind]} {len(kinds[kind])}" for kind in DISAGREEMENT_KINDS)
    title = (f"{group}, Text→Image: of {len(manifest):,} captions, those where {hn_cell['row']} and {base_cell['row']} "
             f"(the strongest competitor, chosen on val) do not both retrieve the ground truth first: {counts}. Shown: "
             f"{len(queries)}, the kinds sharing them evenly, each kind's evenly spaced in caption order (never by "
             "score); each row says where the model ranks the ground truth")
    log.info("gallery on %s: %s vs %s, %s; captions %s", group, hn_cell["row"], base_cell["row"], counts, queries)
    if not queries:
        return plot_no_data(out_prefix, "Retrieval gallery", f"{hn_cell['row']} and {base_cell['row']} both "
                            f"retrieve every caption's image first on {group}: no disagreement to show")
    return plot_retrieval_gallery(
        captions=captions, queries=queries, true_rows=[true_rows[q] for q in queries], models=models,
        read=lambda idx: store.read(store_rows[list(idx)]), out_prefix=out_prefix, k=min(k, len(image_ids)),
        title=title, labels=[kind_of[q] for q in queries])
