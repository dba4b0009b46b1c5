"""The paper configuration rehearsed on a CPU: stand-in files for everything the paper grid downloads.

``config/paper.yaml`` + ``config/rehearsal.yaml`` run the paper's DAG for real (Long-CLIP-L's
architecture at 224 px and 248 text positions, SAM through transformers, the five real adapters, the
report) on a few images per benchmark with capped steps. What the paper downloads is made here instead,
in the same formats, and read by the same code:

- :mod:`.checkpoint`: a Long-CLIP-L checkpoint with random weights, as Long-CLIP's ``train.py`` saves it;
- a tiny randomly initialised SAM saved with ``save_pretrained`` (:func:`hnclip.preprocess.segments.save_random_sam`);
- :mod:`.benchmarks`: each benchmark's files and archives as its publisher distributes them
  (:mod:`.publisher_files`, shared with the adapters' tests), Hub files in an offline Hub cache
  (:mod:`.hub_cache`).

:func:`.make.make_rehearsal_files` writes them all, once; the workflow calls it (``hnclip
rehearsal-files``) before any job when the config has a ``rehearsal`` section.
"""
