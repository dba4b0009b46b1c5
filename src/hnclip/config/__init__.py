"""Config handling: the workflow config and a training run's settings.

- :mod:`.validation`: the workflow config checked against ``workflow/schemas/config.schema.yaml``, one
  line per error, defaults filled in;
- :mod:`.loading`: a workflow config file (or the default) read and validated as Snakemake would (cross-checked
  above this package, by :func:`hnclip.workflow_config.load_config`), and the job resources it sets;
- :mod:`.train`: :class:`~hnclip.config.train.TrainConfig`, one training run's settings (``hnclip train``).

The fields with help text and bounds that TrainConfig shares with the frameworks' settings are
:mod:`hnclip.settings_fields`, below both packages. This package imports none of its modules, so each stays as light as its own imports.
"""
