"""What the training loop costs beyond the step itself: ours vs a bare step vs open_clip's ``train_one_epoch``.

Every variant trains the same model (the embedded default's backbone architecture, random weights, fresh
from the same seed each time) on the same rows (scenes with long captions, in an image store), in
rounds: each round runs every variant once, in a rotated order, so that load from other processes falls
on all of them alike. Per variant the median over rounds of samples/s, on wall time and on CPU time (the
process's, all threads), and the ratio to the bare step of the same objective:

- ``bare``: forward + loss + backward per micro-batch, clip, AdamW step (``torch.optim.AdamW``), on
  tensors already in memory (pixels normalised, captions tokenised): the limit a loop can reach;
- ``ours``: :func:`hnclip.train.train_model` with the pipeline's settings for a run that feeds no
  figure (``hnclip.plan.train_overrides`` of the embedded default, which sets ``dynamics_probe=false``
  there), timed over its step loop (``_run_epochs``: image-store reads, batches, the step, the logit
  clamp, scheduler, the dynamics row, the epoch-end checkpoint), setup and export excluded, per-epoch
  evaluation off; ``ours probed``: the same run probing on every ``dynamics_every``-th step, as the runs
  the report reads do (premise roles, the gradient-dynamics figure);
- ``open_clip``: ``open_clip_train.train.train_one_epoch`` (open_clip's ``ClipLoss``, gamma 0) on the
  same model and rows from an in-memory DataLoader (handed over in a stand-in for
  ``open_clip_train.data.DataInfo``, whose module needs webdataset's packages), with ``accum_freq`` 2 (open_clip's accumulation:
  a gradient-free forward per micro-batch, then a forward and backward of each with the other's cached
  features as negatives) and 1 (one micro-batch per step). If ``open_clip_train`` cannot be imported,
  those rows say so.

``--report-to tensorboard,wandb`` adds ``ours ... report_to=...``: the unprobed run with its rows also sent
to TensorBoard event files and/or a W&B run (W&B in offline mode: nothing leaves the machine), what
``train.report_to`` costs when on; every ``ours`` row prints progress lines at the default interval (30 s;
a round's run is shorter, so its thread only sleeps), which is what the default costs.

Two objectives: gamma 0 (InfoNCE; ``bare`` and ``open_clip`` compare with ``ours`` at gamma 0) and
the config's gamma (the HN margin, no token term; 0.5 in config/config.yaml). Float32 on the CPU by default; ``--device cuda`` runs it on a
GPU (times synchronised).

    python benchmarks/loop_overhead.py --threads 1             # 5 rounds of 16 steps, micro-batch 16 x 2
    python benchmarks/loop_overhead.py --quick                 # smoke run: the micro model, seconds
    python benchmarks/loop_overhead.py --device cuda --rounds 5 --steps 32
    python benchmarks/loop_overhead.py --report-to tensorboard,wandb  # + the reporters' cost
    git archive bb6f0c9 src | tar -x -C /tmp/before && python benchmarks/loop_overhead.py --src /tmp/before/src

``--src`` measures another hnclip source tree with this script (before/after on one machine); a tree from
before ``train.probe_runs`` probes every run, so its unprobed rows run with ``dynamics_every`` 0.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
# --src DIR: the hnclip source tree to measure (an older export, for a before/after on one machine)
_SRC = Path(sys.argv[sys.argv.index("--src") + 1]).resolve() if "--src" in sys.argv[:-1] else REPO / "src"
sys.path.insert(0, str(_SRC))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402


# ------------------------------------------------------------------------------------------- settings
def pipeline_settings(configfile: Path) -> tuple[dict, dict, str]:
    """(config, TrainConfig overrides of a run that feeds no figure, its path): the embedded default's
    first plain Long-CLIP (gamma 0, no token term) run outside ``hnclip.plan.probed_runs``."""
    from hnclip import plan

    try:
        from hnclip.workflow_config import load_config
    except ImportError:  # a source tree from before hnclip.workflow_config (--src)
        try:
            from hnclip.config.loading import load_config
        except ImportError:  # ... or from before the hnclip.config package
            try:
                from hnclip.config_loading import load_config
            except ImportError:  # ... or from before hnclip.config_loading
                from hnclip.plan_cli import load_config

    config = load_config(configfile)
    if not hasattr(plan, "probed_runs"):  # a source tree from before train.probe_runs: every run probes
        for run in plan.all_runs(config):
            items = dict(item.split("=", 1) for item in plan.train_overrides(config, run))
            items.pop("probe_runs", None)  # this checkout's config key, unknown to that tree
            if items["framework"] == "longclip" and float(items["gamma"]) == 0 and float(items["token_weight"]) == 0:
                return config, items, f"{run.path} (that source probes every run)"
    probed = plan.probed_runs(config)
    for run in plan.all_runs(config):
        settings = plan.run_settings(config, run)
        if (run not in probed and settings["framework"] == "longclip" and settings["gamma"] == 0
                and settings["token_weight"] == 0):
            items = dict(item.split("=", 1) for item in plan.train_overrides(config, run, probed=probed))
            return config, items, f"{run.path} (feeds no figure: dynamics_probe={items.get('dynamics_probe', 'true')})"
    raise SystemExit(f"{configfile}: no plain Long-CLIP run outside the probed runs")


def train_config(overrides: dict, gamma: float, probe: bool, steps: int, device: str, report_to: str = ""):
    try:
        from hnclip.config.train import TrainConfig
    except ImportError:  # a source tree from before the hnclip.config package (--src)
        from hnclip.train_config import TrainConfig

    settings = {**overrides, "gamma": str(gamma), "device": device, "epochs": "1", "max_steps": str(steps),
                "eval_every_epoch": "false", "keep_checkpoint": "none",
                **({"report_to": report_to} if report_to else {})}
    if probe:
        settings.pop("dynamics_probe", None)
    elif "dynamics_probe" not in TrainConfig.help():  # a source tree from before it: no probe = no dynamics_every
        settings["dynamics_every"] = "0"
    else:
        settings["dynamics_probe"] = "false"
    return TrainConfig.from_overrides(settings)


# ----------------------------------------------------------------------------------------------- data
def make_rows(root: Path, n: int, image_size: int) -> tuple:
    """``n`` scenes with long captions in an image store under ``root``: (manifest, store)."""
    from hnclip.data.image_store import ImageStore, build_store
    from hnclip.rehearsal.benchmarks import SCENE_SIZES, scene

    (root / "images").mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        image, caption, _ = scene(i, SCENE_SIZES[i % len(SCENE_SIZES)], (6, 16, 24)[i % 3])
        path = root / "images" / f"{i}.jpg"
        image.save(path, format="JPEG", quality=90)
        rows.append((f"s{i}", str(path), caption))
    manifest = pd.DataFrame(rows, columns=["image_id", "image_path", "caption"])
    build_store(manifest, root / "store", image_size=image_size)
    return manifest, ImageStore(root / "store")


# ------------------------------------------------------------------------------------------- variants
@contextlib.contextmanager
def timed_loop(record: dict):
    """Time :func:`hnclip.training.loop.run_epochs` (the step loop) of the train_model call inside this block."""
    import hnclip.training.loop as loop_module

    real = loop_module.run_epochs

    def timed(session):
        wall, cpu = time.perf_counter(), time.process_time()
        real(session)
        sync(session.device)
        record.update(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu,
                      samples=session.state.samples_seen)

    loop_module.run_epochs = timed
    try:
        yield
    finally:
        loop_module.run_epochs = real


def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def run_ours(make_model, manifest, store, cfg, root: Path) -> dict:
    from hnclip.train import train_model
    from hnclip.training.inputs import load_training_set

    data = load_training_set(manifest, store, cfg.caption_column, "loop_overhead rows")
    record: dict = {}
    with tempfile.TemporaryDirectory(dir=root) as tmp, timed_loop(record):
        train_model(cfg, make_model(), data, store, Path(tmp) / "out", Path(tmp) / "ckpt")
    return record


def bare_step_runner(make_model, pixels, tokens, cfg, steps: int):
    """The bare loop: the objective the run trains (hnclip.losses.HNClipLoss at the run's gamma, negatives
    from the micro-batch), backward at 1/accum, clip, AdamW; nothing else."""
    from hnclip.losses import HNClipLoss

    def run() -> dict:
        model = make_model().to(cfg.device).train()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.AdamW(params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps,
                                      weight_decay=cfg.weight_decay)
        loss_fn = HNClipLoss(gamma=cfg.gamma)
        sync(cfg.device)
        wall, cpu = time.perf_counter(), time.process_time()
        for step in range(steps):
            for micro in range(cfg.accum_steps):
                start = (step * cfg.accum_steps + micro) * cfg.micro_batch
                rows = slice(start, start + cfg.micro_batch)
                out = model(pixels[rows], tokens[rows])
                loss = loss_fn(out["image_features"], out["text_features"], out["logit_scale"])
                (loss / cfg.accum_steps).backward()
            if cfg.grad_clip > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        sync(cfg.device)
        return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                "samples": steps * cfg.effective_batch}

    return run


class _DataInfo:
    """What train_one_epoch reads of open_clip_train.data.DataInfo (a loader and set_epoch); that module
    imports webdataset's dependencies (braceexpand), which an in-memory loader does not need."""

    def __init__(self, dataloader):
        self.dataloader = dataloader

    def set_epoch(self, epoch: int) -> None:
        pass


def open_clip_runner(make_model, pixels, tokens, cfg, steps: int, accum_freq: int):
    """open_clip's own epoch loop on the same model and rows (ClipLoss, its accumulation or none)."""
    from open_clip.loss import ClipLoss
    from open_clip_train.train import train_one_epoch

    n = steps * cfg.effective_batch
    batch = cfg.micro_batch
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(pixels[:n].cpu(), tokens[:n].cpu()),
                                         batch_size=batch, shuffle=False)
    loader.num_batches, loader.num_samples = len(loader), n
    args = SimpleNamespace(device=str(cfg.device), precision="fp32", accum_freq=accum_freq, distill=False,
                           skip_scheduler=True, grad_clip_norm=cfg.grad_clip or None, horovod=False,
                           log_every_n_steps=10 ** 9, batch_size=batch, world_size=1, wandb=False, rank=0,
                           local_rank=0)

    def run() -> dict:
        model = make_model().to(cfg.device)
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=cfg.lr,
                                      betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, weight_decay=cfg.weight_decay)
        sync(cfg.device)
        wall, cpu = time.perf_counter(), time.process_time()
        train_one_epoch(model, {"train": _DataInfo(loader)}, ClipLoss(), 0, optimizer, None, None, None, args)
        sync(cfg.device)
        return {"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "samples": n}

    return run


# ---------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "config/config.yaml",
                        help="the pipeline's settings and backbone architecture (default: the embedded default)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=16, help="optimizer steps per variant and round")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1 on a shared machine)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--quick", action="store_true", help="micro model, 2 rounds of 3 steps")
    parser.add_argument("--report-to", default="", help="also time the unprobed run reporting to these "
                        "(train.report_to: tensorboard, wandb; W&B offline)")
    parser.add_argument("--src", type=Path, default=REPO / "src",
                        help="hnclip source tree to measure (e.g. an older commit's, exported with git archive)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.quick:
        args.rounds, args.steps = 2, 3

    from hnclip.data.image_store import to_model_input
    from hnclip.models import create_model

    config, overrides, run_path = pipeline_settings(args.config)
    backbone = config["backbone"]
    name = "micro" if args.quick else backbone["name"]

    def make_model():
        return create_model(name, context_length=backbone["context_length"],
                            frozen_positions=backbone["frozen_positions"], seed=0)

    probe_cfg = train_config(overrides, 0.0, True, args.steps, args.device)
    load_before = os.getloadavg()[0]
    print(f"source: {_SRC}" + ("" if _SRC == REPO / "src" else " (not this checkout's)"))
    print(f"machine: {platform.machine()} {platform.processor()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
          f"{args.threads} thread(s), device {args.device}, load average (1 min) {load_before:.2f}")
    print(f"settings: {args.config.relative_to(REPO) if args.config.is_relative_to(REPO) else args.config}, "
          f"run {run_path}; "
          f"micro-batch {probe_cfg.micro_batch} x {probe_cfg.accum_steps}, dynamics_every {probe_cfg.dynamics_every}, "
          f"grad_clip {probe_cfg.grad_clip}, precision {probe_cfg.precision}; model {name} (image "
          f"{backbone['image_size']}, {backbone['context_length']} text positions); {args.rounds} rounds of "
          f"{args.steps} steps ({args.steps * probe_cfg.effective_batch} rows) per variant")

    with tempfile.TemporaryDirectory(prefix="loop_overhead-") as tmp:
        root = Path(tmp)
        n = args.steps * probe_cfg.effective_batch
        image_size = int(np.atleast_1d(make_model().image_size)[0])
        manifest, store = make_rows(root, n, image_size)
        model = make_model()
        pixels = to_model_input(store.read(np.arange(n)), model.image_mean, model.image_std).to(args.device)
        tokens = model.tokenize([str(c) for c in manifest["caption"]]).to(args.device)

        variants = {}
        for gamma in (0.0, float(config["gamma"])):  # InfoNCE and the config's HN margin
            plain = train_config(overrides, gamma, False, args.steps, args.device)
            probed = train_config(overrides, gamma, True, args.steps, args.device)
            variants[f"bare g{gamma:g}"] = bare_step_runner(make_model, pixels, tokens, plain, args.steps)
            variants[f"ours g{gamma:g}"] = (lambda c=plain: run_ours(make_model, manifest, store, c, root))
            variants[f"ours probed g{gamma:g}"] = (lambda c=probed: run_ours(make_model, manifest, store, c, root))
            if args.report_to:
                os.environ["WANDB_MODE"] = "offline"  # a benchmark never talks to W&B's servers
                shown = train_config(overrides, gamma, False, args.steps, args.device, args.report_to)
                variants[f"ours g{gamma:g} report_to={args.report_to}"] = (
                    lambda c=shown: run_ours(make_model, manifest, store, c, root))
        open_clip_note = None
        try:
            import open_clip_train.train  # noqa: F401

            for accum_freq in (probe_cfg.accum_steps, 1):
                cfg0 = train_config(overrides, 0.0, False, args.steps, args.device)
                variants[f"open_clip accum_freq={accum_freq}"] = open_clip_runner(
                    make_model, pixels, tokens, cfg0, args.steps, accum_freq)
        except ImportError as err:
            open_clip_note = f"open_clip's train_one_epoch: skipped, open_clip_train not importable ({err})"

        results: dict[str, list[dict]] = {label: [] for label in variants}
        labels = list(variants)
        for round_index in range(args.rounds + 1):  # round 0 warms up every variant, not counted
            order = labels[round_index % len(labels):] + labels[:round_index % len(labels)]
            for label in order:
                with open(os.devnull, "w") as quiet, contextlib.redirect_stderr(quiet):  # tqdm bars
                    record = variants[label]()
                if round_index:
                    results[label].append(record)
            print(f"  round {round_index}{' (warm-up)' if not round_index else ''} done", file=sys.stderr)

    print_results(results, open_clip_note)
    print(f"after the run: load average (1 min) {os.getloadavg()[0]:.2f}")


def rates(records: list[dict], clock: str) -> list[float]:
    return [r["samples"] / r[clock] for r in records]


def print_results(results: dict[str, list[dict]], note: str | None) -> None:
    width = max(26, *(len(label) + 2 for label in results))
    print(f"  {'variant':<{width}}{'samples/s wall':>15}{'vs bare':>9}{'range':>14}{'samples/s CPU':>15}{'vs bare':>9}"
          f"{'range':>14}")
    for label, records in results.items():
        words = label.split()
        gamma = next(w[1:] for w in words if w[:1] == "g" and w[1:2].isdigit()) if words[0] in ("bare", "ours") else "0"
        bare = results[f"bare g{gamma}"]
        cells = []
        for clock in ("wall", "cpu"):
            ours = rates(records, clock)
            per_round = [a / b for a, b in zip(ours, rates(bare, clock), strict=True)]
            cells.append(f"{statistics.median(ours):>15.1f}{statistics.median(per_round):>8.2f}x"
                         f"{min(per_round):>8.2f}-{max(per_round):.2f}")
        print(f"  {label:<{width}}" + "".join(cells))
    print("  (vs bare: median over rounds of the round's samples/s ratio to the bare step of the same gamma; "
          "open_clip: vs bare g0; range: min-max over rounds)")
    if note:
        print(f"  {note}")


if __name__ == "__main__":
    main()
