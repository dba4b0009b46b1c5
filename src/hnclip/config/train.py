"""One training run's settings: the loop's own fields plus its framework's settings dataclass.

Every field carries a default and help text (peft's config style); ``__post_init__`` rejects bad values
naming the field, so a typo in the workflow config fails before any model is loaded. What a framework
adds (FineLIP's margin, LoRA's rank, ...) lives in that framework's settings
(:mod:`hnclip.frameworks.settings`), held in ``framework_settings``; a run carries its own framework's
settings only. The hash of :meth:`to_dict` names the run's settings in checkpoints: resuming under
different settings is refused.

Each default is declared once, here or in the framework settings; the workflow schema's defaults are
tested against them (``tests/test_train_config.py``), its framework sections written from the settings
(``workflow/scripts/config_docs.py``). Framework names and sections come from the registration rows
(:mod:`hnclip.frameworks.registry`), read at each call, so a framework registered later is known too.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass

from hnclip.frameworks.registry import framework_entry, framework_names, settings_sections
from hnclip.frameworks.settings import FrameworkSettings
from hnclip.settings_fields import coerce_numbers, field_types, help_field, parse_value

__all__ = ["NOT_HASHED", "REPORTERS", "RUN_SELECTIONS", "SHOWN_ONLY", "TrainConfig", "WORKFLOW_KEYS",
           "override_items"]

MARGINS = ("recompute", "frozen")
PRECISIONS = ("auto", "fp32", "bf16", "fp16")
REPORTERS = ("tensorboard", "wandb")
DEVICES = ("auto", "cpu", "cuda")
SCHEDULES = ("cosine", "constant")
KEEP_CHECKPOINT = ("full", "weights", "none")
# Settings that do not change what a run trains: left out of the config hash, so changing them on a
# finished run does not retrain it, and a run stopped by an out-of-memory error resumes with
# grad_checkpointing turned on. dynamics_probe changes what dynamics.csv holds, not the weights (the
# probe never touches .grad, the loss or an RNG stream: tests/test_train_probe_runs.py); a checkpoint
# written without it cannot give a probing run its probe columns, which RunCheckpoint.read handles.
# report_to and progress_every change what a run shows while it trains, nothing it computes.
NOT_HASHED = ("keep_checkpoint", "grad_checkpointing", "dynamics_probe", "report_to", "progress_every")
# Settings that only change what a run shows while it trains: override_items passes them on only where
# they differ from their defaults, so the training jobs of a config that leaves them alone keep the
# command lines they had (Snakemake reruns a job whose command line changes).
SHOWN_ONLY = ("report_to", "progress_every")
# Keys of the workflow's train sections that are not TrainConfig fields: override_items turns them into
# fields. Each selects runs, with one of RUN_SELECTIONS. probe_runs: which runs probe (read: the runs whose
# probe columns the report reads, decided per run by hnclip.plan.probed_runs; all: every run).
# epoch_eval_runs: which runs evaluate after every epoch (read: the runs whose epochs.csv the report
# reads, hnclip.plan.epoch_evaluated_runs; all: every run).
RUN_SELECTIONS = ("read", "all")
WORKFLOW_KEYS = ("probe_runs", "epoch_eval_runs")


@dataclass
class TrainConfig:
    """Settings of one fine-tuning run.

    Args:
        framework: a name in :mod:`hnclip.frameworks.registry` (what each trains: the README's framework
            table and each module's docstring).
        gamma: HN margin strength; 0 is the framework's own objective.
        token_weight: weight of the FILIP token-level loss; 0 leaves the branch off (and skips computing
            token features); full HN-CLIP uses 0.5, which the workflow config sets.
        margin: ``recompute`` builds G from the current batch's text features; ``frozen`` from the initial
            model's, computed once for the whole training set.
        micro_batch, accum_steps: the effective batch is their product (paper: 16 x 8 = 128); the
            contrastive loss sees only the micro-batch's negatives.
        lr, module_lr: peak learning rates of the model's trainable parameters (every weight; for LoRA and
            DoRA the adapters) and of a framework's new modules (FineLIP's aggregators), which start
            from random weights and so get their own rate.
        weight_decay: AdamW's decoupled decay on matrices (never on biases, norms, embeddings, the logit scale).
        warmup_steps, schedule, min_lr_ratio: linear warmup over optimizer steps, then ``cosine`` decay to
            ``min_lr_ratio * lr`` or a ``constant`` rate.
        label_smoothing: label smoothing of the global image-text term's cross-entropies (Long-CLIP: 0.1).
            It belongs to the framework's global term, so the "+HN" variant keeps it: HN adds gamma * G
            to the same smoothed InfoNCE. 0 is the exact CLIP loss.
        grad_clip: max global gradient norm; 0 disables clipping.
        precision: ``auto`` is bf16 autocast on CUDA and fp32 on CPU; ``fp16`` is float16 autocast with a
            gradient scaler (``torch.amp.GradScaler``, open_clip's ``--precision amp``) for GPUs without
            bf16; torch runs it on the CPU too (slowly: it is there for tests).
        dynamics_every: optimizer steps 1, 1 + k, 1 + 2k, ... log standard vs trained gradient norms
            (costs one extra backward pass per micro-batch of those steps: hnclip.training.dynamics); 0 disables.
        dynamics_probe: whether those steps run the gradient probe (:mod:`hnclip.training.dynamics`);
            false logs only what every step logs (losses, saturation shares, learning rate, logit
            scale), the probe columns of dynamics.csv staying empty. The workflow sets it per run
            (``train.probe_runs``: only the runs whose probe columns the report reads probe). Not part of
            the config hash: the probe does not change the weights.
        checkpoint_every: optimizer steps between resumable checkpoints (also written at each epoch end).
        keep_checkpoint: what stays of the resumable checkpoint once the run has finished: ``full``
            (resumable, ~3x the weights: AdamW keeps two moments per weight), ``weights`` (weights, logs
            and state without the optimizer: enough to rebuild the run's outputs without a training
            step), ``none`` (deleted; a rerun trains again). Not part of the config hash.
        grad_checkpointing: recompute each transformer block's activations in backward instead of keeping
            them (open_clip's ``set_grad_checkpointing``): one extra block forward per block for most of
            the activation memory; Long-CLIP issue 78 runs out of memory at batch 32 on a 40 GB GPU
            without it. Gradients are unchanged, so it is not part of the config hash: a run that ran out
            of memory resumes with it turned on.
        report_to: comma-separated ``tensorboard`` and/or ``wandb`` (open_clip's ``--report-to``): the
            per-step and per-epoch scalars of the CSV logs also go to TensorBoard event files in
            ``<out>/tensorboard/`` and/or a Weights & Biases run (:mod:`hnclip.training.report_to`).
            Empty: neither. Not part of the config hash.
        progress_every: seconds between progress lines on stdout (step, epoch, loss, ETA), which
            Snakemake's console shows while the job runs (:mod:`hnclip.progress`); 0: none.
            Not part of the config hash.
        max_steps: stop after this many optimizer steps (0: run all epochs); the LR schedule spans the
            shorter of the two.
        framework_settings: the framework's settings dataclass (or a dict of its fields); default: its
            defaults.
    """

    framework: str = help_field("longclip", " | ".join(framework_names()))
    gamma: float = help_field(0.0, "HN margin strength (>= 0; 0 = the framework's own objective)")
    token_weight: float = help_field(0.0, "weight of the FILIP token loss (>= 0); full HN-CLIP uses 0.5, set by "
                                          "the workflow config")
    margin: str = help_field("recompute", "recompute | frozen: source of G's text features")
    epochs: int = help_field(10, "passes over the training set (>= 1)")
    micro_batch: int = help_field(16, "samples per contrastive loss; under torchrun the global micro-batch, "
                                      "split evenly over processes (token and framework terms see each "
                                      "process's share)")
    accum_steps: int = help_field(8, "micro-batches per optimizer step")
    lr: float = help_field(1e-5, "peak learning rate of the model's trainable parameters (LoRA/DoRA: adapters)")
    module_lr: float = help_field(1e-4, "peak learning rate of a framework's new modules (FineLIP's aggregators)")
    weight_decay: float = help_field(0.1, "AdamW decoupled weight decay on matrices")
    warmup_steps: int = help_field(200, "linear warmup length in optimizer steps (>= 0)")
    schedule: str = help_field("cosine", "cosine | constant: the learning rate after warmup")
    min_lr_ratio: float = help_field(0.0, "cosine floor as a fraction of the peak lr")
    label_smoothing: float = help_field(0.0, "label smoothing of the global term's cross-entropies, in [0, 1)")
    grad_clip: float = help_field(1.0, "max global grad norm; 0 disables")
    beta1: float = help_field(0.9, "AdamW beta1")
    beta2: float = help_field(0.98, "AdamW beta2 (CLIP's 0.98)")
    eps: float = help_field(1e-6, "AdamW epsilon (CLIP's 1e-6)")
    seed: int = help_field(0, "seeds weights of new modules, data order and dropout")
    precision: str = help_field("auto", "auto | fp32 | bf16 | fp16 (auto: bf16 on CUDA; fp16: float16 autocast "
                                        "with a gradient scaler, for GPUs without bf16)")
    device: str = help_field("auto", "auto | cpu | cuda")
    dynamics_every: int = help_field(10, "log gradient dynamics on steps 1, 1+k, 1+2k, ... (extra backward "
                                         "passes); 0 disables")
    dynamics_probe: bool = help_field(True, "run the gradient probe on the dynamics_every steps; false leaves "
                                            "dynamics.csv's probe columns empty (not hashed)")
    checkpoint_every: int = help_field(500, "optimizer steps between checkpoints (>= 1)")
    keep_checkpoint: str = help_field("weights", "full | weights | none: what stays of the resumable checkpoint "
                                                 "after the run (not hashed)")
    eval_every_epoch: bool = help_field(True, "evaluate on the eval split after each epoch")
    caption_column: str = help_field("caption", "manifest column holding the captions")
    max_steps: int = help_field(0, "cap on optimizer steps; 0 = no cap")
    num_workers: int = help_field(0, "DataLoader worker processes for image reading")
    grad_checkpointing: bool = help_field(False, "recompute each transformer block in backward: less activation "
                                                 "memory for one extra forward (not hashed)")
    report_to: str = help_field("", "comma-separated tensorboard, wandb: where the logged scalars also go "
                                    "(<out>/tensorboard/, a W&B run); empty: neither (not hashed)")
    progress_every: float = help_field(30.0, "seconds between progress lines on stdout (step, epoch, loss, "
                                             "ETA); 0: none (not hashed)")
    framework_settings: FrameworkSettings | None = help_field(
        None, "the framework's settings (hnclip.frameworks.settings); --set <section>.<key>=value")

    def __post_init__(self):
        coerce_numbers(self)
        self._check_choice("framework", framework_names())
        settings_class = self.settings_class(self.framework)
        if self.framework_settings is None or isinstance(self.framework_settings, Mapping):
            self.framework_settings = settings_class.from_dict(self.framework_settings)
        elif type(self.framework_settings) is not settings_class:
            raise ValueError(f"TrainConfig.framework_settings: framework {self.framework!r} takes "
                             f"{settings_class.__name__}, got {type(self.framework_settings).__name__}")
        self._check_choice("margin", MARGINS)
        self._check_choice("precision", PRECISIONS)
        self._check_choice("device", DEVICES)
        self._check_choice("schedule", SCHEDULES)
        self._check_choice("keep_checkpoint", KEEP_CHECKPOINT)
        for name in ("gamma", "token_weight", "lr", "module_lr", "weight_decay", "grad_clip", "eps"):
            self._check(name, getattr(self, name) >= 0, "must be >= 0")
        for name in ("epochs", "micro_batch", "accum_steps", "checkpoint_every"):
            self._check(name, getattr(self, name) >= 1, "must be >= 1")
        for name in ("warmup_steps", "dynamics_every", "max_steps", "num_workers", "progress_every"):
            self._check(name, getattr(self, name) >= 0, "must be >= 0")
        self._check("micro_batch", self.micro_batch >= 2, "must be >= 2 (a contrastive batch needs negatives)")
        self._check("min_lr_ratio", 0 <= self.min_lr_ratio <= 1, "must be in [0, 1]")
        for name in ("beta1", "beta2", "label_smoothing"):
            self._check(name, 0 <= getattr(self, name) < 1, "must be in [0, 1)")
        self._check("caption_column", bool(self.caption_column), "must be a column name")
        unknown = [name for name in self.reporters if name not in REPORTERS]
        self._check("report_to", not unknown, f"names {', '.join(map(repr, unknown))}, not one of "
                                              f"{', '.join(REPORTERS)} (comma-separated; empty: none)")
        if self.precision == "bf16" and self.device == "cpu":
            raise ValueError("precision='bf16' needs device 'cuda' or 'auto': bf16 autocast is only used on CUDA")

    def _check(self, name: str, ok: bool, why: str) -> None:
        if not ok:
            raise ValueError(f"TrainConfig.{name}={getattr(self, name)!r} {why}")

    def _check_choice(self, name: str, choices: tuple[str, ...]) -> None:
        self._check(name, getattr(self, name) in choices, f"is not one of {', '.join(choices)}")

    @staticmethod
    def settings_class(framework: str) -> type[FrameworkSettings]:
        return framework_entry(framework).settings_cls

    @property
    def section(self) -> str:
        """The key of this framework's settings: ``--set <section>.<field>``, ``train.<section>`` in YAML."""
        return framework_entry(self.framework).section

    @property
    def reporters(self) -> tuple[str, ...]:
        """``report_to`` as names, in the order given, each once."""
        names = [name.strip() for name in self.report_to.split(",") if name.strip()]
        return tuple(dict.fromkeys(names))

    @property
    def effective_batch(self) -> int:
        return self.micro_batch * self.accum_steps

    @classmethod
    def from_overrides(cls, overrides: Mapping[str, object] | None = None) -> TrainConfig:
        """Build from ``{"gamma": "0.5", "finelip.margin": "0.3", ...}`` (the CLI's ``key=value`` pairs).

        Values are converted to the field types; values that already have them pass as they are, so a
        parsed YAML dict, or :meth:`to_dict`'s output (its section as a nested dict), works too. A
        setting of another framework than ``framework`` is refused (it would silently do nothing).
        """
        overrides = dict(overrides or {})
        types_ = {name: kind for name, kind in field_types(cls).items() if name != "framework_settings"}
        framework = str(overrides.pop("framework", cls.framework))
        if framework not in framework_names():
            raise ValueError(f"TrainConfig.framework={framework!r} is not one of {', '.join(framework_names())}")
        sections = settings_sections()
        section = framework_entry(framework).section
        settings: dict[str, object] = {}
        kwargs: dict[str, object] = {}
        unknown = []
        for key, value in overrides.items():
            head, dot, tail = key.partition(".")
            if key in types_:
                kwargs[key] = parse_value(f"TrainConfig.{key}", types_[key], value)
            elif head in sections and head != section:
                raise ValueError(f"TrainConfig: {key!r} is a setting of the {head!r} section, but framework "
                                 f"{framework!r} reads section {section!r}")
            elif head == section and dot:
                settings[tail] = value
            elif key == section and isinstance(value, Mapping):
                settings.update(value)
            else:
                unknown.append(key)
        if unknown:
            raise ValueError(f"unknown TrainConfig key(s) {sorted(unknown)}; known keys: {', '.join(types_)}, "
                             f"and {section}.<key> for framework {framework!r}: "
                             f"{', '.join(sections[section].help())}")
        return cls(framework=framework, framework_settings=sections[section].from_dict(settings), **kwargs)

    @classmethod
    def help(cls) -> dict[str, str]:
        """Field name -> help text (for ``hnclip train --help``), framework sections as ``section.key``."""
        texts = {f.name: f.metadata.get("help", "") for f in dataclasses.fields(cls) if f.name != "framework_settings"}
        for settings_class in settings_sections().values():
            texts.update(settings_class.help())
        return texts

    def to_dict(self) -> dict:
        """Every setting; the framework's settings as a nested dict under their section name."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "framework_settings"}
        values[self.section] = self.framework_settings.to_dict()
        return values

    def config_hash(self) -> str:
        """sha256 of the sorted dict as JSON without :data:`NOT_HASHED`; floats print with repr, so 1e-05
        and 0.00001 hash alike."""
        values = {k: v for k, v in self.to_dict().items() if k not in NOT_HASHED}
        text = json.dumps(values, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


def override_items(settings: Mapping[str, object], read: bool = False, epochs_read: bool = True) -> list[str]:
    """``key=value`` items for ``hnclip train --set`` from a workflow ``train`` dict of nested sections.

    Only the section of ``settings["framework"]`` (default: TrainConfig's) is passed on: another
    framework's settings cannot change this run, and leaving them out keeps them out of its config hash.

    ``probe_runs`` (:data:`WORKFLOW_KEYS`; a validated workflow section always has it, default ``read``)
    becomes ``dynamics_probe=false`` when it is ``read``, the run's
    probe columns are not ``read`` by anything (:func:`hnclip.plan.probed_runs`; a pretraining stage's
    never are) and its ``dynamics_every`` would probe; otherwise nothing, so that a run whose probing
    does not change keeps the command line it had.

    ``epoch_eval_runs`` (the same kind of key, default ``read``) becomes ``eval_every_epoch=false`` when it
    is ``read``, nothing reads the run's epochs.csv (``epochs_read`` false: :func:`hnclip.plan.epoch_evaluated_runs`)
    and ``eval_every_epoch`` is on; otherwise nothing.

    :data:`SHOWN_ONLY` keys (``report_to``, ``progress_every``) are passed only where they differ from the
    TrainConfig default: a config that leaves them alone keeps its jobs' command lines.
    """
    framework = str(settings.get("framework", TrainConfig.framework))
    section = framework_entry(framework).section if framework in framework_names() else None
    items = []
    for key in WORKFLOW_KEYS:
        if settings.get(key) is not None and settings[key] not in RUN_SELECTIONS:
            raise ValueError(f"train.{key}={settings[key]!r} is not one of {', '.join(RUN_SELECTIONS)}")
    probe_runs, epoch_eval_runs = settings.get("probe_runs"), settings.get("epoch_eval_runs")
    for key, value in settings.items():
        if key in WORKFLOW_KEYS or (key in SHOWN_ONLY and value == getattr(TrainConfig, key)):
            continue
        if isinstance(value, Mapping):
            if key == section:
                items += [f"{key}.{k}={_text(v)}" for k, v in value.items()]
        elif value is not None:
            items.append(f"{key}={_text(value)}")
    dynamics_every = settings.get("dynamics_every", TrainConfig.dynamics_every)
    if probe_runs == "read" and not read and int(dynamics_every or 0) > 0:
        items.append("dynamics_probe=false")
    evaluates = parse_value("train.eval_every_epoch", bool,
                            settings.get("eval_every_epoch", TrainConfig.eval_every_epoch))
    if epoch_eval_runs == "read" and not epochs_read and evaluates:
        items = [i for i in items if not i.startswith("eval_every_epoch=")] + ["eval_every_epoch=false"]
    return items


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
