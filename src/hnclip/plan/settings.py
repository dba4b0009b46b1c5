"""Each run's training settings: the ``key=value`` items its training job gets, and which runs probe the
gradients or evaluate after every epoch (only those whose logs the report reads, unless configured ``all``).

Reads a validated config (the schema has filled every default), so no default is repeated here."""

from __future__ import annotations

from hnclip.plan.cells import dynamics_figure_cells
from hnclip.plan.grid import Run, _cell_run, all_runs, experiment_spec, is_zeroshot

__all__ = ["epoch_evaluated_runs", "epoch_readers", "probe_readers", "probed_runs", "run_settings", "train_overrides"]


def _train_settings(config: dict, run: Run) -> dict:
    """The workflow's ``train`` settings of one run: the shared section, the method's recipe over it
    (``methods.<m>.train``, null = shared), then the method's and the run's keys."""
    method = config["methods"][run.method]
    settings = dict(config["train"])
    settings.update({k: v for k, v in (method.get("train") or {}).items() if v is not None})
    token_weight = method.get("token_weight")
    settings.update(
        framework=method["framework"],
        gamma=float(run.gamma),
        token_weight=config["token_weight"] if token_weight is None else token_weight,
        margin=method["margin"],
        seed=run.seed,
    )
    return settings


def run_settings(config: dict, run: Run) -> dict:
    """The run's TrainConfig as its ``summary.json`` will hold it (``TrainConfig.to_dict()``), probing
    left at its default (the probe does not change what the run trains)."""
    from hnclip.config.train import TrainConfig, override_items

    items = override_items(_train_settings(config, run), read=True)
    return TrainConfig.from_overrides(dict(item.split("=", 1) for item in items)).to_dict()


def probe_readers(config: dict) -> dict[Run, list[str]]:
    """Every run whose gradient-probe columns (``hnclip.dynamics_log.PROBE_COLUMNS``) the report reads,
    with what reads them, derived from the experiments:

    - the premise (``results/premise.json``) reads them from the plain and HN-only runs
      (:func:`hnclip.dynamics_log.settings_role` on the run's settings, at the config's gamma, the one
      the premise rule passes);
    - the gradient-dynamics figure draws them from the fractions spec's :func:`dynamics_figure_cells`.

    Nothing else reads them: the convergence table and figure read ``infonce``, which every step logs;
    the report's "peak gradient ratio per run" (a measure beside the premise claim) reads the HN-CLIP
    runs that did probe and leaves the others out.
    """
    from hnclip.dynamics_log import PROBE_ROLES, settings_role

    readers: dict[Run, list[str]] = {}
    for run in all_runs(config):
        role = settings_role(run_settings(config, run), subset=float(run.fraction) < 1, gamma=config["gamma"])
        if role in PROBE_ROLES:
            readers.setdefault(run, []).append(f"premise ({role} run)")
    if "fractions" in config.get("experiments", {}):
        for run in sorted({_cell_run(c) for c in dynamics_figure_cells(experiment_spec(config, "fractions")).values()}):
            readers.setdefault(run, []).append("gradient-dynamics figure")
    return readers


def probed_runs(config: dict) -> set[Run]:
    """The runs that run the gradient probe: every run under ``train.probe_runs: all``, else (``read``)
    the runs of :func:`probe_readers`. A run probes on every ``train.dynamics_every``-th step (0: never)."""
    if config["train"]["probe_runs"] == "all":
        return set(all_runs(config))
    return set(probe_readers(config))


def epoch_readers(config: dict) -> dict[Run, list[str]]:
    """Every run whose per-epoch retrieval (``epochs.csv``, ``epoch_ranks.csv``) the report reads, with what
    reads it: the main experiment's runs (the epochs table, the convergence table and figure, the per-epoch
    claims). Nothing else reads them: every other table scores a run's final model (``hnclip evaluate``)."""
    readers: dict[Run, list[str]] = {}
    if "main" in config.get("experiments", {}):
        for cell in experiment_spec(config, "main")["cells"]:
            if not is_zeroshot(cell):
                readers.setdefault(_cell_run(cell), ["epochs table", "convergence table and figure",
                                                     "per-epoch claims"])
    return readers


def epoch_evaluated_runs(config: dict) -> set[Run]:
    """The runs evaluated after every epoch (``train.eval_every_epoch`` on): every run under
    ``train.epoch_eval_runs: all``, else (``read``) the runs of :func:`epoch_readers`. Each evaluation scores
    the in-domain test split (a few seconds of a toy run's half minute); the weights do not depend on it."""
    if not config["train"]["eval_every_epoch"]:
        return set()
    if config["train"]["epoch_eval_runs"] == "all":
        return set(all_runs(config))
    return set(epoch_readers(config))


def train_overrides(config: dict, run: Run, probed: set[Run] | None = None,
                    epoch_evaluated: set[Run] | None = None) -> list[str]:
    """``key=value`` items of TrainConfig for one run: the shared ``train`` section, the method's own recipe
    over it (``methods.<m>.train``, null = shared), then the method's and the run's keys. Only the run's
    framework section (e.g. ``finelip.margin=0.2``) is passed: see :func:`hnclip.config.train.override_items`.

    ``probed``: :func:`probed_runs` (computed here when not given); a run outside it gets
    ``dynamics_probe=false`` when it would otherwise probe. That setting is not in the config hash (the
    probe never changes the weights), so turning probing off for a run resumes or rebuilds it from its
    checkpoint; a run turned on whose checkpoint did not probe trains again (see
    :meth:`hnclip.training.checkpoint.RunCheckpoint.read`).
    """
    from hnclip.config.train import override_items

    probed = probed_runs(config) if probed is None else probed
    epoch_evaluated = epoch_evaluated_runs(config) if epoch_evaluated is None else epoch_evaluated
    return override_items(_train_settings(config, run), read=run in probed, epochs_read=run in epoch_evaluated)
