"""A run on your own data in words: each benchmark by its label with its training pairs, test images and
captions and the test captions its text tower cut. Table captions (:mod:`hnclip.cli.common`) and the report's
banner (:mod:`hnclip.report`) both say it; standard library and :mod:`hnclip.paths` only, so either may import it."""

from __future__ import annotations

from hnclip import paths

__all__ = ["data_sizes"]


def data_sizes(cells, records=(), summaries=None) -> str:
    """Each benchmark of ``cells`` by its label with its sizes: training pairs (from the run summaries'
    ``n_train``, keyed by the runs' train set) and test images and captions (from the evaluation records), e.g.
    ``My captions: 60 training pairs, 30 test images (45 captions)``, and the test captions the text tower cut
    when a record counts any (``captions_truncated``). What a run on your own data is, in words."""
    labels = {c["eval_benchmark"]: c.get("group") or c["eval_benchmark"] for c in cells}
    tests = {r["eval_benchmark"]: (r.get("n_images"), r.get("n_texts")) for r in records if "eval_benchmark" in r}
    # test captions the text tower cut (the evaluation records' captions_truncated): the most any model cut
    cut: dict[str, dict] = {}
    for r in records:
        found, bench = r.get("captions_truncated") or {}, r.get("eval_benchmark")
        if bench is not None and found.get("count", 0) > cut.get(bench, {}).get("count", 0):
            cut[bench] = found
    trained = {}
    for run_dir, summary in (summaries or {}).items():
        # the run's record, else its folder
        train_set = ((summary.get("run") or {}).get("train_set")
                     or paths.train_set_of_dir(summary.get("run_dir") or run_dir))
        if train_set and summary.get("n_train") is not None:
            trained[train_set] = summary["n_train"]
    parts = []
    for bench, label in labels.items():
        sizes = []
        if bench in trained:
            sizes.append(f"{trained[bench]:,} training pairs")
        if tests.get(bench, (None, None))[0] is not None:
            images, texts = tests[bench]
            sizes.append(f"{images:,} test images" + (f" ({texts:,} captions)" if texts != images else ""))
        if bench in cut:
            sizes.append(f"{cut[bench]['count']:,} test captions cut at {cut[bench].get('context_length', '?')} "
                         "text positions")
        parts.append(f"{label}: {', '.join(sizes)}" if sizes else label)
    return "; ".join(parts)
