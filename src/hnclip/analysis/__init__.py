"""From pipeline outputs to the paper's tables, figures and claims.

- :mod:`.records` read specs, evaluation records, run summaries, dynamics/epoch logs, Snakemake benchmarks
- :mod:`.tables` one DataFrame layout per experiment, per-epoch retrieval and training cost;
  :mod:`.table_format` writes them as CSV (tidy), HTML, Markdown and LaTeX
- :mod:`.figures` gradient dynamics, R@1 curves, caption-geometry histograms (PNG + SVG);
  :mod:`.gallery` the qualitative retrieval gallery
- :mod:`.geometry` caption geometry (appendix A.2); :mod:`.margins` §2.4's gradient ratio on the loss
- :mod:`.claims` verdicts on the paper's claims; :mod:`.geometry_cli`, :mod:`.gallery_cli` model glue

Submodules are imported on use, so ``hnclip table`` never loads matplotlib or torch.
"""
