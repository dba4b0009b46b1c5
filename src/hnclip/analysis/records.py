"""Read what the pipeline wrote: experiment specs, evaluation records, run summaries and logs.

Everything downstream (tables, figures, claims, report) works from these loaders, so a malformed or
missing file fails here with its path and the run it belongs to, not later as a blank table cell.
A run is identified by its wildcards (train_set, method, gamma, fraction, seed); gamma and fraction are
compared through their canonical text (``0.5``, ``1``), because specs carry floats while paths and some
records carry strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from hnclip import paths
from hnclip.analysis.table_format import SCALES
from hnclip.experiments import EXPERIMENTS, experiment_names
from hnclip.paths import RUN_FIELDS, format_number
from hnclip.released import RELEASED

__all__ = [
    "DIRECTIONS",
    "EXPERIMENTS",
    "METRICS",
    "MissingRecordError",
    "RUN_FIELDS",
    "cell_summaries",
    "index_records",
    "load_benchmark_tsv",
    "load_dynamics",
    "epoch_rows",
    "load_epoch_outcomes",
    "load_epochs",
    "load_eval",
    "load_protocol_spec",
    "load_records",
    "load_run_summaries",
    "load_spec",
    "load_summary",
    "record_key",
    "run_name",
    "summary_config_hash",
]

METRICS = ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10")
# metric prefix -> direction label shown in tables
DIRECTIONS = {"i2t": "I->T", "t2i": "T->I"}
SUMMARY_KEYS = ("config", "config_hash", "seed", "steps", "wall_time_s", "samples_per_s", "peak_memory_mb",
                "device", "checkpoint_sha256", "git_commit")
DYNAMICS_COLUMNS = ("step", "epoch", "lr", "logit_scale", "loss", "infonce")
BENCHMARK_TSV_COLUMNS = ("s", "h:m:s", "max_rss", "max_vms", "max_uss", "max_pss", "io_in", "io_out",
                         "mean_load", "cpu_time")


class MissingRecordError(LookupError):
    """A table or figure cell whose evaluation record does not exist."""


def run_name(run: Mapping, eval_benchmark: str | None = None) -> str:
    """``train_set/method/g{gamma}/f{fraction}/s{seed}[/eval_benchmark]``: the run's path in results/."""
    missing = [f for f in RUN_FIELDS if f not in run]
    if missing:
        raise KeyError(f"run {dict(run)!r} lacks field(s) {missing}")
    name = paths.run_name(run)
    return name if eval_benchmark is None else f"{name}/{eval_benchmark}"


def record_key(run: Mapping, eval_benchmark: str) -> tuple[str, ...]:
    return (str(run["train_set"]), str(run["method"]), format_number(run["gamma"]),
            format_number(run["fraction"]), format_number(run["seed"]), str(eval_benchmark))


def _read_json(path: Path, what: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} {path} is not valid JSON: {e}") from e
    if not isinstance(data, dict):
        raise ValueError(f"{what} {path}: expected a JSON object, got {type(data).__name__}")
    return data


def _check_eval(record: Mapping, where: str) -> None:
    for key in ("run", "eval_benchmark", "metrics"):
        if key not in record:
            raise ValueError(f"evaluation record {where}: no key {key!r}")
    missing = [f for f in RUN_FIELDS if f not in record["run"]]
    if missing:
        raise ValueError(f"evaluation record {where}: run lacks field(s) {missing}")
    for metric in METRICS:
        value = record["metrics"].get(metric)
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"evaluation record {where} (run {run_name(record['run'], record['eval_benchmark'])}):"
                             f" metric {metric!r} is {value!r}, expected a number in percent")
        if not 0.0 <= value <= 100.0:
            raise ValueError(f"evaluation record {where}: metric {metric!r} = {value} is outside [0, 100] percent")


def load_eval(path) -> dict:
    """One evaluation JSON, checked: run fields present, every Recall@K a number in [0, 100]."""
    record = _read_json(Path(path), "evaluation record")
    _check_eval(record, str(path))
    return record


def load_spec(spec) -> dict:
    """An experiment spec from a dict, a JSON string or a JSON file, checked for the fields tables need."""
    if isinstance(spec, str | Path) and not str(spec).lstrip().startswith("{"):
        spec = _read_json(Path(spec), "experiment spec")
    elif isinstance(spec, str):
        spec = json.loads(spec)
    known = (*experiment_names(), RELEASED)  # the experiments' tables and the released checkpoints' (hnclip.released)
    if spec.get("experiment") not in known:
        raise ValueError(f"experiment spec: experiment is {spec.get('experiment')!r}; known: {', '.join(known)}")
    if spec.get("scale") not in SCALES:
        raise ValueError(f"experiment spec {spec['experiment']!r}: scale is {spec.get('scale')!r}; known: {SCALES}")
    cells = spec.get("cells")
    if not cells:
        raise ValueError(f"experiment spec {spec['experiment']!r} has no cells")
    for i, cell in enumerate(cells):
        for key in ("row", "group", "run", "eval_benchmark"):
            if key not in cell:
                raise ValueError(f"experiment spec {spec['experiment']!r}: cells[{i}] has no key {key!r}")
        missing = [f for f in RUN_FIELDS if f not in cell["run"]]
        if missing:
            raise ValueError(f"experiment spec {spec['experiment']!r}: cells[{i}].run lacks {missing}")
    return spec


PROTOCOL_CELL_KEYS = ("row", "benchmark", "eval_benchmark", "split", "run", "eval_path")


def load_protocol_spec(spec) -> dict:
    """The protocol table's spec (:func:`hnclip.protocols.protocol_spec`) from a dict or its JSON file
    (``results/specs/protocols.json``), checked for the fields the table reads."""
    if isinstance(spec, str | Path):
        spec = _read_json(Path(spec), "protocol spec")
    if spec.get("experiment") != "protocols" or not spec.get("cells"):
        raise ValueError("protocols table: expected a spec from hnclip.protocols.protocol_spec with cells")
    if spec.get("scale") not in SCALES:
        raise ValueError(f"protocol spec: scale is {spec.get('scale')!r}; known: {SCALES}")
    for i, cell in enumerate(spec["cells"]):
        missing = [k for k in PROTOCOL_CELL_KEYS if k not in cell]
        if missing:
            raise ValueError(f"protocol spec: cells[{i}] lacks {missing}")
    return spec


def load_records(spec) -> list[dict]:
    """Every evaluation record a spec's cells point to that exists; absent ones surface in build_table."""
    spec = load_spec(spec)
    records, seen = [], set()
    for cell in spec["cells"]:
        path = cell.get("eval_path")
        if path and path not in seen and Path(path).is_file():
            seen.add(path)
            records.append(load_eval(path))
    return records


def index_records(records: Iterable[Mapping] | Mapping[str, Mapping]) -> dict[tuple, Mapping]:
    """Evaluation records keyed by (run fields..., eval_benchmark); two records of one key are an error."""
    if isinstance(records, Mapping):
        records = records.values()
    index: dict[tuple, Mapping] = {}
    for record in records:
        where = run_name(record.get("run", {}), record.get("eval_benchmark"))
        _check_eval(record, where)
        key = record_key(record["run"], record["eval_benchmark"])
        if key in index:
            raise ValueError(f"two evaluation records for run {where}")
        index[key] = record
    return index


def load_summary(run_dir) -> dict:
    """A run's summary.json, with ``run_dir`` added so provenance can name the run."""
    run_dir = Path(run_dir)
    path = run_dir / "summary.json" if run_dir.is_dir() or run_dir.suffix != ".json" else run_dir
    summary = _read_json(path, "run summary")
    missing = [k for k in SUMMARY_KEYS if k not in summary]
    if missing:
        raise ValueError(f"run summary {path}: no key(s) {missing}")
    summary.setdefault("run_dir", str(path.parent))
    return summary


def summary_config_hash(summary: Mapping) -> str:
    """The config hash a run's summary.json records (empty when it records none)."""
    return str(summary.get("config_hash") or "")


def load_run_summaries(spec) -> dict[str, dict]:
    """summary.json of every run a spec's cells name, keyed by the cells' ``run_dir``.

    A table's lines carry these runs' config hashes, so a missing summary fails here naming the file.
    """
    return cell_summaries(load_spec(spec)["cells"])


def cell_summaries(cells) -> dict[str, dict]:
    """summary.json of every run the cells name (once each, keyed by ``run_dir``); cells without a run
    (the zero-shot backbone) have none."""
    summaries = {}
    for cell in cells:
        run_dir = cell.get("run_dir")
        if run_dir and str(run_dir) not in summaries:
            summaries[str(run_dir)] = load_summary(run_dir)
    return summaries


def _read_csv(path: Path, what: str, columns: Iterable[str], **kwargs) -> pd.DataFrame:
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    df = pd.read_csv(path, **kwargs)
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"{what} {path}: no column(s) {missing} (has {list(df.columns)})")
    return df


def load_dynamics(run_dir) -> pd.DataFrame:
    """dynamics.csv: one row per optimizer step; gradient columns are NaN except on every k-th step."""
    return _read_csv(Path(run_dir) / "dynamics.csv", "dynamics log", DYNAMICS_COLUMNS)


def epoch_rows(frame: pd.DataFrame, benchmark: str | None, where: str = "per-epoch log") -> pd.DataFrame:
    """The rows of a per-epoch log (epochs.csv, epoch_ranks.csv) that score ``benchmark``.

    A log that names no benchmark (written before the ``benchmark`` column, or by a run evaluated on one
    split) scores one split: all its rows. One that names several gives the rows of ``benchmark`` (none
    when it did not score it); ``benchmark`` None then is the first it names (the run's own test split)."""
    if "benchmark" not in frame.columns:
        return frame
    names = frame["benchmark"].fillna("").astype(str).str.strip()
    if not (names != "").any():
        return frame
    if benchmark is None:
        benchmark = next(n for n in names if n)
    return frame[names == str(benchmark)]


def load_epochs(run_dir, benchmark: str | None = None) -> pd.DataFrame:
    """epochs.csv: retrieval on the test split(s) evaluated after each epoch (absent if not configured),
    the rows of ``benchmark`` (:func:`epoch_rows`)."""
    frame = _read_csv(Path(run_dir) / "epochs.csv", "per-epoch retrieval log", ("epoch", "step") + METRICS)
    return epoch_rows(frame, benchmark)


def load_epoch_outcomes(run_dir, split: str, benchmark: str | None = None) -> dict:
    """epoch_ranks.csv: each epoch's per-query outcomes (:class:`hnclip.analysis.bootstrap.Outcomes`) on
    ``benchmark`` (:func:`epoch_rows`), by epoch; empty for a run that logged none (made before they were
    logged, or no per-epoch evaluation)."""
    from hnclip.analysis.bootstrap import Outcomes

    path = Path(run_dir) / "epoch_ranks.csv"
    if not path.is_file():
        return {}
    df = epoch_rows(_read_csv(path, "per-epoch outcome log", ("epoch", "i2t", "t2i", "text_image"), dtype=str),
                    benchmark)
    out = {}
    for _, line in df.iterrows():
        try:
            arrays = [[int(v) for v in str(line[c]).split()] for c in ("i2t", "t2i", "text_image")]
        except ValueError as e:
            raise ValueError(f"per-epoch outcome log {path}, epoch {line['epoch']}: {e}") from e
        out[int(line["epoch"])] = Outcomes(*arrays, split=split)
    return out


def load_benchmark_tsv(path) -> dict[str, float]:
    """A Snakemake benchmark file, averaged over its repeats (one row unless ``repeat()`` was used).

    Snakemake writes ``NA`` for quantities psutil could not measure; those come back as NaN.
    """
    df = _read_csv(Path(path), "Snakemake benchmark file", ("s", "max_rss", "cpu_time"), sep="\t")
    if df.empty:
        raise ValueError(f"Snakemake benchmark file {path} has no rows")
    numeric = df.drop(columns=["h:m:s"], errors="ignore").apply(pd.to_numeric, errors="coerce")
    return {k: float(v) for k, v in numeric.mean().items()}
