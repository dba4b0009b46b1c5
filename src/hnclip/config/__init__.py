"""Config handling: the workflow config and a training run's settings.

- :mod:`.fields`: dataclass fields with help text and bounds (``help_field``), and the value parsing and
  checks they share;
- :mod:`.validation`: the workflow config checked against ``workflow/schemas/config.schema.yaml``, one
  line per error, defaults filled in;
- :mod:`.loading`: a workflow config file (or the default) read and validated as Snakemake would (cross-checked
  above this package, by :func:`hnclip.workflow_config.load_config`), and the job resources it sets;
- :mod:`.train`: :class:`~hnclip.config.train.TrainConfig`, one training run's settings (``hnclip train``).

This package imports none of them, so each stays as light as its own imports.
"""
