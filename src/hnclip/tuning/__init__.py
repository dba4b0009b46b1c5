"""One tuning protocol for every main-table method (issue 52).

A comparison of fine-tuning methods says something only when every method got the same search for its
learning rate (Musgrave, Belongie and Lim, "A Metric Learning Reality Check", ECCV 2020; the paper's own
"common effective batch and training budget"). So every method of ``experiments.main``, HN-CLIP included,
gets the same protocol, on the **val** split only:

- :mod:`.grid`: the rates tried: half-decade steps around the method's *paper-ratio rate* (its rate's
  ratio to Long-CLIP's in ``config/paper.yaml``, times ``tuning.base_lr``), ``tuning.steps`` on each side,
  extended one step at a time while the best sits on an edge (at most ``tuning.max_extensions`` times);
  the best and the choice rule;
- :mod:`.score`: the score (mean of both directions' val R@1 after the last epoch) and whether a run was
  still rising between its last two epochs by more than its interval (under-trained at the shared budget);
- :mod:`.record`: the record the search writes (every method x rate, val R@1 per epoch, the choice, the
  strongest competitor, commit, CPU, minutes) and what the config must agree with;
- :mod:`.search`: the search itself, training each point as the workflow trains a run (``hnclip tune``,
  ``snakemake tune``).
- :mod:`.long_budget`: after every grid, HN-CLIP, the competitor and ``tuning.long_budget.methods`` trained
  again at their chosen rates for the paper's 10 epochs, and HN-CLIP minus each at both budgets.

The plug-in "+HN" variants are not tuned: they train at their framework's tuned plain rate (HN added to a
recipe), and HN-CLIP's variants (frozen G) at HN-CLIP's (:func:`.record.rate_source`).
"""
