"""The paper's regime in numbers: is fine-tuning in the situation the paper studies?

The paper's premise (abstract, Sections 1, 2.4, appendices B.2 and C) is a strong initialisation on
near-duplicate captions: standard InfoNCE "falls below 1e-3 on 80 % of batches within the first
epoch, while its gradient reaches exact zero in fp32 in 47 % of measurements"; with the HN term,
26 % of batches stay active in every epoch, the boosted gradient exceeds the standard one by
1e2-1e6 in per-epoch median where the standard one is non-zero, the two gradients' cosine has median
0.58 and is positive in 98 % of measurements, and retrieval error keeps falling after standard
InfoNCE flattens. :func:`premise_figures` measures each of these on the runs' own logs
(``dynamics.csv``, ``epochs.csv``, written by :mod:`hnclip.train` with the columns of
:mod:`hnclip.training.dynamics`); :func:`premise_sources` says which runs each number came from.

Runs play one of three roles, read from their ``summary.json`` (:func:`run_role`), all full-data
(no subset) Long-CLIP-framework fine-tuning with recomputed margins:

- ``plain``: standard InfoNCE (gamma 0, no token term): the paper's saturating baseline;
- ``hn``: the HN objective alone (the config's gamma, the paper's 0.5; no token term), whose trained
  loss *is* the boosted objective of the gradient analysis;
- ``hnclip``: HN-CLIP (the config's gamma plus the token branch), whose retrieval error per epoch is
  compared with the paper's DOCCI curve.

The plain and HN-only runs' gradient-probe columns are read (:data:`KEY_PROBE_COLUMN`); under
``train.probe_runs: read`` the workflow probes exactly the runs of these roles (and the gradient-dynamics
figure's, :func:`hnclip.plan.probe_readers`), every other run logging only the columns every step has.

Every value is a float, or None when the logs hold nothing to measure it on (e.g. no HN run).

Beside the figures, :func:`premise_report` writes what the premise claims decide by
(:mod:`hnclip.analysis.claims.premise`), because a figure alone cannot fail well:

- ``counts``: the k of n behind each share (micro-batches, probed micro-batches, probed steps), for its
  Wilson interval (:mod:`hnclip.analysis.binomial`);
- ``active_per_epoch``: per epoch, the HN-only and the plain runs' active micro-batches and, for runs of
  one seed (the same micro-batches: :func:`hnclip.training.batches.epoch_order` is a function of the
  seed), how many micro-batches only the HN run (only the plain run) kept active;
- ``infonce_flat``: per train set, where the plain runs' InfoNCE flattens (:func:`infonce_flattening`),
  each epoch's fall with its bootstrap interval over the epoch's steps;
- ``ratio_medians``: each per-epoch median gradient ratio with its distribution-free interval.
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hnclip import paths
from hnclip.analysis.binomial import median_interval
from hnclip.analysis.records import epoch_rows
from hnclip.dynamics_log import (
    EXACT_ZERO_DTYPE_NAMES,
    EXACT_ZERO_QUANTITIES,
    MICRO_BATCH_INFONCE,
    ROLES,
    SATURATION_LOSS,
    parse_micro_batch_losses,
    summary_role,
)

__all__ = ["COUNTED_KEYS", "DEFINITIONS", "EXACT_ZERO_KEYS", "FLAT_FACTOR", "KEY_PROBE_COLUMN", "PAPER",
           "PAPER_GEOMETRY", "PREMISE_KEYS", "ROLES", "active_per_epoch", "classify_runs", "hn_active_share_min_epoch",
           "infonce_flattening", "load_run_logs", "objective_active_min_epoch", "premise_counts",
           "premise_figures", "premise_sources", "premise_report", "ratio_median_intervals", "run_role", "run_train_set"]

EXACT_ZERO_KEYS = tuple(f"exact_zero.{q}.{d}" for q in EXACT_ZERO_QUANTITIES for d in EXACT_ZERO_DTYPE_NAMES)
PREMISE_KEYS = ("saturated_share_epoch1", *EXACT_ZERO_KEYS, "hn_active_share_min_epoch",
                "ratio_median_per_epoch_min", "ratio_median_per_epoch_max", "grad_cosine_median",
                "grad_cosine_positive_share", "error_i2t_first", "error_i2t_last", "error_t2i_first",
                "error_t2i_last", "infonce_flat_epoch")
# The paper's figure for each key where it states one (DOCCI for the retrieval errors); None: no number.
PAPER: dict[str, float | None] = {
    "saturated_share_epoch1": 0.80, **dict.fromkeys(EXACT_ZERO_KEYS), "exact_zero.param_grad.fp32": 0.47,
    "hn_active_share_min_epoch": 0.26, "ratio_median_per_epoch_min": 1e2, "ratio_median_per_epoch_max": 1e6,
    "grad_cosine_median": 0.58, "grad_cosine_positive_share": 0.98, "error_i2t_first": 22.9,
    "error_i2t_last": 17.1, "error_t2i_first": 20.5, "error_t2i_last": 15.1, "infonce_flat_epoch": 1.0,
}
# Appendix A.2's caption geometry of one batch across the paper's four benchmarks (Long-CLIP-L's text tower):
# (low, high) of the mean off-diagonal cosine, the mean hardest companion, the share of negatives >= 0.8.
PAPER_GEOMETRY = {"mean_offdiag": (0.84, 0.88), "mean_hardest": (0.92, 0.94), "frac_ge_0.8": (0.86, 0.99)}
# What each figure measures, in words the report and `hnclip premise` print beside it.
DEFINITIONS: dict[str, str] = {
    "saturated_share_epoch1": "plain InfoNCE runs: share of epoch-1 micro-batches with standard InfoNCE < 1e-3",
    **{f"exact_zero.{q}.{d}": f"plain InfoNCE runs: share of probed micro-batches where {what} ({d})"
       for q, what in (("loss", "the standard InfoNCE is exactly 0.0"),
                       ("positive_logit_grad", "d loss / d positive logit (p - 1, both directions) is all 0.0"),
                       ("feature_grad", "d loss / d features (both towers) is all 0.0"),
                       ("param_grad", "the parameter gradient's torch norm is 0.0 (every element below ~2.6e-23)"))
       for d in EXACT_ZERO_DTYPE_NAMES},
    "hn_active_share_min_epoch": "HN-only runs: min over epochs of the share of micro-batches whose standard "
                                 "InfoNCE is still >= 1e-3",
    "ratio_median_per_epoch_min": "HN-only runs: min over (run, epoch) of the median |g_HN| / |g_InfoNCE| over "
                                  "probed steps where the fp32 |g_InfoNCE| > 0",
    "ratio_median_per_epoch_max": "HN-only runs: max over (run, epoch) of the same medians",
    "grad_cosine_median": "HN-only runs: median cosine between the HN and the InfoNCE parameter gradients",
    "grad_cosine_positive_share": "HN-only runs: share of probed steps with a positive gradient cosine",
    "error_i2t_first": "HN-CLIP runs: 100 - image->text R@1 after epoch 1 (paper: DOCCI)",
    "error_i2t_last": "HN-CLIP runs: 100 - image->text R@1 after the last epoch",
    "error_t2i_first": "HN-CLIP runs: 100 - text->image R@1 after epoch 1",
    "error_t2i_last": "HN-CLIP runs: 100 - text->image R@1 after the last epoch",
    "infonce_flat_epoch": "plain InfoNCE runs: first epoch after which the per-epoch mean InfoNCE no longer halves, "
                          "decided by the bootstrap interval over each epoch's steps (none: not established before "
                          "the last epoch)",
}
# Which role's runs feed each key.
KEY_ROLE = {"saturated_share_epoch1": "plain", **dict.fromkeys(EXACT_ZERO_KEYS, "plain"),
            "hn_active_share_min_epoch": "hn", "ratio_median_per_epoch_min": "hn",
            "ratio_median_per_epoch_max": "hn", "grad_cosine_median": "hn", "grad_cosine_positive_share": "hn",
            "error_i2t_first": "hnclip", "error_i2t_last": "hnclip", "error_t2i_first": "hnclip",
            "error_t2i_last": "hnclip", "infonce_flat_epoch": "plain"}
# The probe column (hnclip.dynamics_log.PROBE_COLUMNS) each key is read from; the other keys read columns
# every step logs, or epochs.csv. The runs of their roles probe (hnclip.plan.probe_readers).
KEY_PROBE_COLUMN = {**{f"exact_zero.{q}.{d}": f"zero_{q}_{d}" for q in EXACT_ZERO_QUANTITIES
                       for d in EXACT_ZERO_DTYPE_NAMES},
                    "ratio_median_per_epoch_min": "grad_ratio", "ratio_median_per_epoch_max": "grad_ratio",
                    "grad_cosine_median": "grad_cosine", "grad_cosine_positive_share": "grad_cosine"}
# infonce_flat_epoch: InfoNCE counts as flat from the first epoch after which it never falls below its
# value divided by this factor (per-epoch means, averaged over the plain runs), decided by an interval
# (infonce_flattening).
FLAT_FACTOR = 2.0
# The shares the premise claims decide by a Wilson interval: the counts behind each (premise_counts).
COUNTED_KEYS = ("saturated_share_epoch1", *EXACT_ZERO_KEYS, "grad_cosine_positive_share")


def run_role(summary: Mapping, gamma: float) -> str | None:
    """``plain``, ``hn``, ``hnclip`` or None for a run's ``summary.json`` (see the module docstring).

    ``gamma``: the HN runs' gamma, the config's (``hnclip premise --gamma``), not a default of this module.
    A run on a subset (the fractions experiment below 100 %), with frozen margins, another framework,
    or the HN term at another gamma than ``gamma`` (the gamma sweep) plays no role. The rule itself is
    :func:`hnclip.dynamics_log.settings_role`, which the plan also applies to decide which runs probe.
    """
    return summary_role(summary, gamma)


def load_run_logs(run_dir) -> dict:
    """``{"run": dir, "summary": dict, "dynamics": DataFrame, "epochs": DataFrame | None}`` of one run."""
    run_dir = Path(run_dir)
    summary_path = run_dir / "summary.json"
    if not summary_path.is_file():
        raise FileNotFoundError(f"run summary {summary_path} does not exist")
    summary = json.loads(summary_path.read_text())
    dynamics_path = run_dir / "dynamics.csv"
    if not dynamics_path.is_file():
        raise FileNotFoundError(f"dynamics log {dynamics_path} does not exist")
    dynamics = pd.read_csv(dynamics_path)
    epochs_path = run_dir / "epochs.csv"
    epochs = pd.read_csv(epochs_path) if epochs_path.is_file() else None
    return {"run": str(run_dir), "summary": summary, "dynamics": dynamics, "epochs": epochs}


def classify_runs(run_dirs: Iterable, gamma: float) -> dict[str, list[dict]]:
    """Each role's loaded runs (:func:`load_run_logs`), in the order given; runs without a role are left out."""
    roles: dict[str, list[dict]] = {role: [] for role in ROLES}
    for run_dir in run_dirs:
        logs = load_run_logs(run_dir)
        role = run_role(logs["summary"], gamma)
        if role is not None:
            roles[role].append(logs)
    return roles


def _column(runs: list[dict], column: str, where: str) -> list[pd.DataFrame]:
    frames = []
    for logs in runs:
        frame = logs["dynamics"]
        if column not in frame.columns:
            raise ValueError(f"dynamics log of run {logs['run']} has no column {column!r} ({where}); it was "
                             f"written before that column existed: rerun it")
        frames.append(frame)
    return frames


def _share(values: pd.Series) -> float | None:
    values = values.dropna()
    return float(values.mean()) if len(values) else None


def saturated_share_epoch1(plain: list[dict]) -> float | None:
    """Share of the plain runs' epoch-1 micro-batches whose standard InfoNCE is < 1e-3.

    Every step logs ``saturated_share`` over its micro-batches, all steps of a run have the same number
    of micro-batches, so the share of micro-batches is the mean over steps (pooled over runs).
    """
    frames = _column(plain, "saturated_share", "saturated_share_epoch1")
    return _share(pd.concat([f.loc[f["epoch"] == 1, "saturated_share"] for f in frames])) if frames else None


def exact_zero_shares(plain: list[dict]) -> dict[str, float | None]:
    """``exact_zero.<quantity>.<dtype>``: share of the plain runs' measured micro-batches (every micro-batch
    of every probed step, all epochs) where that quantity is exactly 0.0 (definitions:
    :mod:`hnclip.training.dynamics`)."""
    out = {}
    for quantity in EXACT_ZERO_QUANTITIES:
        for dtype in EXACT_ZERO_DTYPE_NAMES:
            column = f"zero_{quantity}_{dtype}"
            frames = _column(plain, column, "exact_zero")
            out[f"exact_zero.{quantity}.{dtype}"] = _share(pd.concat([f[column] for f in frames])) if frames else None
    return out


def hn_active_share_min_epoch(hn: list[dict]) -> float | None:
    """The smallest, over epochs, of the share of the HN runs' micro-batches still active in that epoch.

    Active: the micro-batch's *standard* InfoNCE is >= 1e-3, the complement of the paper's saturation
    ("the loss falls below 1e-3"), measured on the model the HN objective trains. Per epoch the share is
    pooled over the HN runs (mean of 1 - the per-step ``saturated_share``); the paper's "26 % of batches
    remain active in every epoch" is this minimum. The paper does not define "active"; we read it with
    its saturation threshold and its next clause ("the boosted gradient exceeds the standard gradient
    ... where the latter is nonzero"), which is about the standard objective. The other reading, the
    HN objective itself still >= 1e-3, is the logged ``objective_active_share`` (:func:`objective_active_min_epoch`).
    """
    frames = _column(hn, "saturated_share", "hn_active_share_min_epoch")
    if not frames:
        return None
    pooled = pd.concat([f[["epoch", "saturated_share"]] for f in frames]).dropna()
    return float(1.0 - pooled.groupby("epoch")["saturated_share"].mean().max()) if len(pooled) else None


def objective_active_min_epoch(hn: list[dict]) -> float | None:
    """Like :func:`hn_active_share_min_epoch` with the HN objective's own loss >= 1e-3 as "active"."""
    frames = _column(hn, "objective_active_share", "objective_active_min_epoch")
    if not frames:
        return None
    pooled = pd.concat([f[["epoch", "objective_active_share"]] for f in frames]).dropna()
    return float(pooled.groupby("epoch")["objective_active_share"].mean().min()) if len(pooled) else None


def _objective_active(hn: list[dict]) -> float | None:
    """:func:`objective_active_min_epoch`, None where an HN run's log predates its column."""
    if not hn or any("objective_active_share" not in logs["dynamics"].columns for logs in hn):
        return None
    return objective_active_min_epoch(hn)


def ratio_medians_per_epoch(hn: list[dict]) -> list[float]:
    """Median boosted/standard gradient-norm ratio per (HN run, epoch), over the probed steps where the
    standard gradient is non-zero as torch's fp32 norm sees it (``grad_norm_standard_fp32`` > 0)."""
    medians = []
    for frame in _column(hn, "grad_norm_standard_fp32", "ratio_median_per_epoch"):
        probed = frame[(frame["grad_norm_standard_fp32"] > 0) & np.isfinite(frame["grad_ratio"])]
        medians += [float(m) for m in probed.groupby("epoch")["grad_ratio"].median()]
    return medians


def infonce_flattening(runs: list[dict], confidence: float = 0.95, resamples: int = 2000, seed: int = 0,
                       factor: float = FLAT_FACTOR, label: str = "") -> dict | None:
    """Where the plain runs' standard InfoNCE flattens, decided by intervals (None without a logged epoch).

    Per epoch e the runs' mean InfoNCE m_e (each run's mean over the epoch's steps, averaged over runs) and
    its fall to the rest of the run, r_e = m_e / min over later epochs of m_e'. Epoch e is ``flat`` when
    the ``confidence`` bootstrap interval of r_e lies below ``factor`` (no later epoch falls below m_e /
    factor: a saturating loss is read on a log scale, where a fall by less than a factor 2 is which batches
    happen to hold near-duplicates, not learning), ``falling`` when it lies above, ``undecided`` otherwise.
    The interval resamples each (run, epoch)'s steps with replacement (``resamples`` times, seeded by
    ``seed`` and ``label``). ``flat_epoch``: the first flat epoch before the last, None when there is none
    (the last epoch has no later one, so flatness there is no measurement).

    Returns ``{"epochs", "mean", "fall", "fall_low", "fall_high", "status", "flat_epoch", "factor",
    "confidence", "resamples"}`` (the fall lists run over epochs 1..E-1).
    """
    per_run = []
    for logs in runs:
        frame = logs["dynamics"][["epoch", "infonce"]].dropna()
        per_run.append({int(e): g["infonce"].to_numpy(float) for e, g in frame.groupby("epoch")})
    epochs = sorted(set().union(*(set(r) for r in per_run))) if per_run else []
    epochs = [e for e in epochs if all(e in r for r in per_run)]  # epochs every run logged
    if not epochs:
        return None
    rng = np.random.default_rng([int(seed), zlib.crc32(f"infonce flattening|{label}".encode())])
    means = np.array([np.mean([r[e].mean() for r in per_run]) for e in epochs])
    replicated = np.empty((len(epochs), resamples))
    for i, e in enumerate(epochs):
        draws = []
        for r in per_run:
            steps = r[e]
            draws.append(steps[rng.integers(0, steps.size, size=(resamples, steps.size))].mean(axis=1))
        replicated[i] = np.mean(draws, axis=0)
    alpha = (1.0 - confidence) / 2.0
    fall, low, high, status = [], [], [], []
    for i in range(len(epochs) - 1):
        later = means[i + 1:].min()
        ratio = replicated[i] / replicated[i + 1:].min(axis=0)
        lo, hi = np.quantile(ratio, [alpha, 1.0 - alpha])
        fall.append(float(means[i] / later) if later > 0 else math.inf)
        low.append(float(lo))
        high.append(float(hi))
        status.append("flat" if hi < factor else ("falling" if lo > factor else "undecided"))
    flat = next((epochs[i] for i, st in enumerate(status) if st == "flat"), None)
    return {"epochs": epochs, "mean": [float(m) for m in means], "fall": fall, "fall_low": low, "fall_high": high,
            "status": status, "flat_epoch": flat, "factor": factor, "confidence": confidence,
            "resamples": int(resamples)}


def run_train_set(logs: dict) -> str:
    """The train set of a run: from its folder (``.../<train_set>/<method>/g*/f*/s*``), else its training
    manifest's folder (``results/data/<train_set>/train.csv``), else ``""``."""
    fields = paths.parse_run_path(logs["run"])
    if fields:
        return fields[0]
    manifest = (logs["summary"].get("run") or {}).get("train_manifest")
    return Path(manifest).parent.name if manifest else ""


def _micro_batches_per_step(logs: dict) -> int:
    """Micro-batches each optimizer step of a run trains: the length of a logged ``infonce_micro`` cell,
    else its settings' ``accum_steps``."""
    frame = logs["dynamics"]
    if MICRO_BATCH_INFONCE in frame.columns:
        for cell in frame[MICRO_BATCH_INFONCE]:
            losses = parse_micro_batch_losses(cell)
            if losses:
                return len(losses)
    return int(logs["summary"].get("config", {}).get("accum_steps", 1))


def _count(runs: list[dict], column: str, rows=None) -> tuple[int, int] | None:
    """(k, n) behind the shares of ``column`` over the runs' steps (``rows(frame)`` selects them): each
    step's share times its micro-batches, rounded (the share of m micro-batches is a multiple of 1/m)."""
    k = n = 0
    for logs in runs:
        frame = logs["dynamics"]
        if column not in frame.columns:
            continue
        shares = pd.to_numeric((frame if rows is None else frame[rows(frame)])[column], errors="coerce").dropna()
        m = _micro_batches_per_step(logs)
        k += int(np.rint(shares.to_numpy(float) * m).sum())
        n += m * int(shares.size)
    return (k, n) if n else None


def premise_counts(roles: Mapping[str, list[dict]]) -> dict[str, list[int] | None]:
    """For each share of :data:`COUNTED_KEYS`, [k, n]: the counted micro-batches (probed steps for the
    gradient cosine) behind it, or None where nothing was measured."""
    plain, hn = list(roles.get("plain", [])), list(roles.get("hn", []))
    counts = {"saturated_share_epoch1": _count(plain, "saturated_share", lambda f: f["epoch"] == 1)}
    for key in EXACT_ZERO_KEYS:
        counts[key] = _count(plain, KEY_PROBE_COLUMN[key])
    cosines = np.concatenate([pd.to_numeric(logs["dynamics"]["grad_cosine"], errors="coerce").to_numpy(float)
                              for logs in hn if "grad_cosine" in logs["dynamics"].columns] or [np.array([])])
    cosines = cosines[np.isfinite(cosines)]
    counts["grad_cosine_positive_share"] = (int((cosines > 0).sum()), int(cosines.size)) if cosines.size else None
    return {k: None if v is None else [int(v[0]), int(v[1])] for k, v in counts.items()}


def _micro_losses(logs: dict) -> dict[tuple[int, int], tuple[int, float]]:
    """(step, position) -> (epoch, standard InfoNCE) of every logged micro-batch of a run."""
    frame = logs["dynamics"]
    out = {}
    if MICRO_BATCH_INFONCE not in frame.columns:
        return out
    for step, epoch, cell in zip(frame["step"], frame["epoch"], frame[MICRO_BATCH_INFONCE], strict=True):
        for position, loss in enumerate(parse_micro_batch_losses(cell) or []):
            out[(int(step), position)] = (int(epoch), float(loss))
    return out


def _same_micro_batches(a: Mapping, b: Mapping) -> bool:
    """Whether two runs' settings draw the same micro-batches (seed, micro-batch, accumulation)."""
    keys = ("seed", "micro_batch", "accum_steps")
    return all(a.get(k) == b.get(k) for k in keys) and all(a.get(k) is not None for k in keys)


def active_per_epoch(hn: list[dict], plain: list[dict]) -> list[dict]:
    """Per epoch: the HN-only runs' and the plain runs' active micro-batches (standard InfoNCE >=
    :data:`SATURATION_LOSS`) as [k, n] (``hn``, ``plain``), and, over pairs of one HN-only and one plain run
    on the same train set and the same micro-batches (:func:`_same_micro_batches`), the micro-batches
    only the HN run kept active (``hn_only``), only the plain run did (``plain_only``) and both were
    logged for (``paired``); without such a pair, those three are None. ``objective``: the HN-only runs'
    micro-batches whose *trained* (boosted) loss is >= :data:`SATURATION_LOSS` (the logged
    ``objective_active_share``), [k, n], None for logs without that column."""
    def active(runs, epoch, column="saturated_share", complement=True):
        k = n = 0
        for logs in runs:
            frame = logs["dynamics"]
            if column not in frame.columns:
                continue
            shares = pd.to_numeric(frame.loc[frame["epoch"] == epoch, column], errors="coerce").dropna()
            m = _micro_batches_per_step(logs)
            counted = int(np.rint(shares.to_numpy(float) * m).sum())
            n += m * int(shares.size)
            k += m * int(shares.size) - counted if complement else counted
        return [k, n] if n else None

    pairs = [(h, p) for h in hn for p in plain if run_train_set(h) == run_train_set(p)
             and _same_micro_batches(h["summary"].get("config", {}), p["summary"].get("config", {}))]
    paired: dict[int, list[int]] = {}
    for h, p in pairs:
        plain_losses = _micro_losses(p)
        for key, (epoch, loss) in _micro_losses(h).items():
            if key not in plain_losses:
                continue
            counts = paired.setdefault(epoch, [0, 0, 0])
            hn_active, plain_active = loss >= SATURATION_LOSS, plain_losses[key][1] >= SATURATION_LOSS
            counts[0] += hn_active and not plain_active
            counts[1] += plain_active and not hn_active
            counts[2] += 1
    epochs = sorted({int(e) for logs in hn + plain for e in logs["dynamics"]["epoch"].dropna()})
    out = []
    for epoch in epochs:
        discordant = paired.get(epoch)
        out.append({"epoch": epoch, "hn": active(hn, epoch), "plain": active(plain, epoch),
                    "objective": active(hn, epoch, "objective_active_share", complement=False),
                    "hn_only": None if discordant is None else discordant[0],
                    "plain_only": None if discordant is None else discordant[1],
                    "paired": None if discordant is None else discordant[2]})
    return out


def ratio_median_intervals(hn: list[dict], confidence: float = 0.95) -> list[dict]:
    """Each (HN run, epoch)'s median gradient ratio (as :func:`ratio_medians_per_epoch` takes it) with its
    distribution-free interval (:func:`hnclip.analysis.binomial.median_interval`) and how many probed
    steps it is the median of."""
    out = []
    for logs in hn:
        frame = logs["dynamics"]
        if "grad_norm_standard_fp32" not in frame.columns:
            continue
        probed = frame[(frame["grad_norm_standard_fp32"] > 0) & np.isfinite(frame["grad_ratio"])]
        for epoch, group in probed.groupby("epoch"):
            values = group["grad_ratio"].to_numpy(float)
            low, high = median_interval(values, confidence)
            out.append({"run": logs["run"], "epoch": int(epoch), "median": float(np.median(values)),
                        "low": low, "high": high, "n": int(values.size)})
    return out


def retrieval_errors(hnclip: list[dict]) -> dict[str, float | None]:
    """100 - R@1 of the HN-CLIP runs (mean over them) after their first and their last epoch, both directions."""
    out = dict.fromkeys(("error_i2t_first", "error_i2t_last", "error_t2i_first", "error_t2i_last"))
    # each run's own test split (the first its epochs.csv names: a DOCCI run also logs Long-DCI)
    epochs = [epoch_rows(logs["epochs"], None) for logs in hnclip if logs["epochs"] is not None and len(logs["epochs"])]
    if not epochs:
        return out
    for direction in ("i2t", "t2i"):
        first = [100.0 - float(e.sort_values("epoch")[f"{direction}_r1"].iloc[0]) for e in epochs]
        last = [100.0 - float(e.sort_values("epoch")[f"{direction}_r1"].iloc[-1]) for e in epochs]
        out[f"error_{direction}_first"], out[f"error_{direction}_last"] = float(np.mean(first)), float(np.mean(last))
    return out


def premise_figures(roles: Mapping[str, list[dict]], confidence: float = 0.95, resamples: int = 2000,
                    seed: int = 0) -> dict[str, float | None]:
    """The regime figures (keys :data:`PREMISE_KEYS`, paper values in :data:`PAPER`) from classified runs.

    ``roles``: :func:`classify_runs`'s output (a role may be missing or empty); ``confidence``,
    ``resamples``, ``seed``: the bootstrap of :func:`infonce_flattening` (``infonce_flat_epoch``).
    """
    plain, hn, hnclip = (list(roles.get(role, [])) for role in ROLES)
    figures: dict[str, float | None] = {"saturated_share_epoch1": saturated_share_epoch1(plain)}
    figures.update(exact_zero_shares(plain) if plain else dict.fromkeys(EXACT_ZERO_KEYS))
    figures["hn_active_share_min_epoch"] = hn_active_share_min_epoch(hn)
    medians = ratio_medians_per_epoch(hn)
    figures["ratio_median_per_epoch_min"] = min(medians) if medians else None
    figures["ratio_median_per_epoch_max"] = max(medians) if medians else None
    cosines = np.concatenate([logs["dynamics"]["grad_cosine"].to_numpy(float) for logs in hn]) if hn else np.array([])
    cosines = cosines[np.isfinite(cosines)]
    figures["grad_cosine_median"] = float(np.median(cosines)) if len(cosines) else None
    figures["grad_cosine_positive_share"] = float((cosines > 0).mean()) if len(cosines) else None
    figures.update(retrieval_errors(hnclip))
    flattening = infonce_flattening(plain, confidence, resamples, seed, label="all") if plain else None
    figures["infonce_flat_epoch"] = None if flattening is None or flattening["flat_epoch"] is None \
        else float(flattening["flat_epoch"])
    assert tuple(figures) == PREMISE_KEYS
    return figures


def _logged(logs: dict, column: str) -> bool:
    """Whether a run's dynamics log holds a value in ``column`` (a probe column stays empty in a run that
    did not probe)."""
    frame = logs["dynamics"]
    return column in frame.columns and bool(pd.to_numeric(frame[column], errors="coerce").notna().any())


def premise_sources(roles: Mapping[str, list[dict]]) -> dict[str, list[str]]:
    """For each key of :func:`premise_figures`, the run folders its value was computed from: for a key
    read from probe columns (:data:`KEY_PROBE_COLUMN`), only the runs of its role that logged them."""
    sources = {}
    for key in PREMISE_KEYS:
        runs = roles.get(KEY_ROLE[key], [])
        column = KEY_PROBE_COLUMN.get(key)
        sources[key] = [logs["run"] for logs in runs if column is None or _logged(logs, column)]
    return sources


def premise_report(run_dirs: Iterable, gamma: float, confidence: float = 0.95, resamples: int = 2000,
                   seed: int = 0) -> dict:
    """What ``hnclip premise`` writes and the claims read: every figure of :data:`PREMISE_KEYS` at the top
    level (None where no run measured it), under ``sources`` the runs behind each, and what the premise
    claims are decided by (the module docstring): ``counts``, ``active_per_epoch``, ``infonce_flat`` (per
    train set of the plain runs; the bootstrap at ``confidence``, ``resamples``, ``seed``: the config's
    ``statistics``) and ``ratio_medians``."""
    roles = classify_runs(run_dirs, gamma)
    plain = roles.get("plain", [])
    by_train_set: dict[str, list[dict]] = {}
    for logs in plain:
        by_train_set.setdefault(run_train_set(logs), []).append(logs)
    flat = {name: infonce_flattening(runs, confidence, resamples, seed, label=name)
            for name, runs in sorted(by_train_set.items())}
    figures = premise_figures(roles, confidence, resamples, seed)
    return {**figures, "sources": premise_sources(roles), "gamma": gamma, "confidence": confidence,
            "counts": premise_counts(roles), "active_per_epoch": active_per_epoch(roles.get("hn", []), plain),
            "objective_active_min_epoch": _objective_active(roles.get("hn", [])),
            "infonce_flat": {k: v for k, v in flat.items() if v is not None},
            "ratio_medians": ratio_median_intervals(roles.get("hn", []), confidence)}
