"""The job of ``hnclip geometry``: encode a split's captions with a model's text tower and measure
their geometry.

Glue only (model loading, encoding, files); the statistics live in :mod:`hnclip.analysis.geometry` and
the figure in :mod:`hnclip.analysis.figures`, both testable without a model.
"""

from __future__ import annotations

import logging
from pathlib import Path

from tqdm import tqdm

from hnclip.fileio import write_json_atomic

log = logging.getLogger(__name__)

__all__ = ["encode_captions", "run_geometry"]


def encode_captions(model, captions: list[str], batch_size: int = 128, device=None):
    """L2-normalised float32 caption features [N, D] on the CPU (fp32: geometry is about 0.01 differences)."""
    import torch

    from hnclip.evaluate import resolve_device

    device = resolve_device(device or "auto")
    model = model.to(device).eval()
    chunks = []
    with torch.no_grad():
        for start in tqdm(range(0, len(captions), batch_size), desc="encode captions", leave=False):
            tokens = model.tokenize(captions[start:start + batch_size]).to(device)
            chunks.append(torch.nn.functional.normalize(model.encode_text(tokens).float(), dim=-1).cpu())
    return torch.cat(chunks)


def run_geometry(model_dir: Path, manifest: Path, benchmark: str, batch_size: int, n_batches: int, seed: int,
                 out_json: Path, out_figure: Path, caption_column: str = "caption",
                 loss_batch_size: int | None = None) -> dict:
    """Write the geometry JSON and its histogram (``out_figure`` as PNG, plus an SVG beside it).

    Measured at ``loss_batch_size`` (the micro-batch the loss and G span: what the HN margin sees) and at
    ``batch_size`` where it differs (the paper's appendix A.2 shows "one batch" without saying which): the
    JSON's top level is the loss's batch, ``batches`` lists every size measured, smallest first."""
    from hnclip.analysis.figures import plot_caption_geometry
    from hnclip.analysis.geometry import caption_geometry
    from hnclip.data.manifest import read_manifest
    from hnclip.models import load_model

    table = read_manifest(manifest)
    if caption_column not in table.columns:
        raise ValueError(f"manifest {manifest} has no column {caption_column!r}")
    captions = [str(c) for c in table[caption_column]]
    sizes = []
    for size in (loss_batch_size or batch_size, batch_size):
        if size > len(captions):
            # a split smaller than one training batch is trained as a single batch: measure that batch
            log.warning("%s: %d captions < batch size %d; measuring batches of %d", manifest, len(captions),
                        size, len(captions))
            size = len(captions)
        if size not in sizes:
            sizes.append(size)
    features = encode_captions(load_model(model_dir), captions).numpy()
    measured = [caption_geometry(features, size, n_batches, seed) for size in sizes]
    result = {**measured[0], "loss_batch": True,
              "batches": [{**{k: v for k, v in m.items() if k != "histogram"}, "loss_batch": i == 0}
                          for i, m in sorted(enumerate(measured), key=lambda im: im[1]["batch_size"])]}
    result.update(benchmark=benchmark, model=str(model_dir), manifest=str(manifest))
    out_json = Path(out_json)
    out_json.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out_json, result)
    plot_caption_geometry({benchmark: result}, out_figure)
    for m in measured:
        log.info("%s, batches of %d: mean off-diagonal %.3f, hardest %.3f, >=0.8 %.1f %%", benchmark,
                 m["batch_size"], m["mean_offdiag"], m["mean_hardest"], 100 * m["frac_ge_0.8"])
    return result
