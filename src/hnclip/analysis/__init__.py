"""From pipeline outputs to the paper's tables, figures and claims.

- :mod:`.records` read specs, evaluation records, run summaries, dynamics/epoch logs, Snakemake benchmarks
- :mod:`.tables` one DataFrame layout per experiment, per-epoch retrieval and training cost;
  :mod:`.table_format` writes them as CSV (tidy), HTML, Markdown and LaTeX
- :mod:`.figures` gradient dynamics, R@1 curves, caption-geometry histograms (PNG + SVG);
  :mod:`.gallery` the qualitative retrieval gallery
- :mod:`.geometry` caption geometry (appendix A.2); :mod:`.margins` §2.4's gradient ratio on the loss
- :mod:`.claims` verdicts on the paper's claims
- :mod:`.geometry_job`, :mod:`.regime_job`, :mod:`.gallery_job` what the geometry, regime and gallery jobs
  run around the modules above: models loaded, a split encoded, files written (their verbs, with the
  arguments, are :mod:`hnclip.cli.analysis`)

Submodules are imported on use, so ``hnclip table`` never loads matplotlib or torch.
"""
