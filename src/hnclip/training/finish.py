"""The end of a run: rank 0 says how many steps fp16's scaler skipped (if any), exports the model with the
framework's modules and writes ``summary.json`` (settings, recipe, counts, timing, device and provenance);
every rank returns that summary."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from hnclip import cpu_kernels
from hnclip.fileio import write_json_atomic
from hnclip.frameworks import save_framework
from hnclip.hashing import sha256_file
from hnclip.provenance import git_commit
from hnclip.training.fp16_skips import report_skipped_steps
from hnclip.training.runtime import peak_memory_mb
from hnclip.training.schedule import describe_recipe
from hnclip.training.session import Session
from hnclip.training.timing import step_timing

__all__ = ["finish_run"]


def finish_run(session: Session, run_info: dict | None) -> dict:
    """Rank 0 exports the model and writes the summary; every rank returns it."""
    from hnclip.models import save_model

    cfg, state, parts, device = session.cfg, session.state, session.parts, session.device
    summary = None
    session.shown.set_phase("saving the model and the summary")
    if session.context.is_main:
        report_skipped_steps(state, parts.scaler, session.shown.name)
        wall_time_s = session.wall_time()
        model_dir = save_model(parts.framework.export_model(parts.model), session.out_dir / "model")
        save_framework(parts.framework, model_dir)
        summary = {
            "config": cfg.to_dict(),
            "config_hash": cfg.config_hash(),
            "framework": cfg.framework,
            "hn_plugin": parts.framework.hn_meaning,
            "recipe": describe_recipe(cfg, parts.optimizer, session.total_steps),
            "seed": cfg.seed,
            "steps": state.step,
            "epochs": state.epoch,
            "steps_per_epoch": session.steps_per_epoch,
            "samples_seen": state.samples_seen,
            "n_train": len(session.data),
            # {count, captions, share, context_length, longest}: the training captions cut at the tower's positions
            "captions_truncated": session.data.truncation,
            "world_size": session.context.world_size,
            "wall_time_s": wall_time_s,
            "timing": step_timing(replace(state, wall_time_s=wall_time_s)),
            "samples_per_s": state.samples_seen / wall_time_s if wall_time_s > 0 else None,
            "peak_memory_mb": peak_memory_mb(device),
            "final_loss": state.last_loss,
            "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "device_type": device.type,
            # the precision it trained in, "auto" resolved (the report's provenance shows it)
            "precision": {torch.float16: "fp16", torch.bfloat16: "bf16"}.get(session.amp_dtype, "fp32"),
            "torch_version": torch.__version__,
            # which CPU kernels computed it (the config's cpu_kernels pin, hnclip.cpu_kernels)
            "cpu_kernels": cpu_kernels.describe(),
            "checkpoint_sha256": sha256_file(Path(model_dir) / "model.safetensors"),
            "git_commit": git_commit(),
            "data_fingerprint": session.fingerprint,
            # fp16: the gradient scaler's scale at the end (a step whose scaled gradients overflowed halved it)
            # and the steps it skipped, those before its first step taken (calibrating) among them
            **({"grad_scale": parts.scaler.get_scale(), "skipped_steps": state.skipped_steps,
                "calibration_skips": state.calibration_skips}
               if parts.scaler is not None else {}),
            **({"run": run_info} if run_info else {}),
        }
        write_json_atomic(session.out_dir / "summary.json", summary, sort_keys=True)
        session.checkpoint.finish()
    # the other ranks wait here until rank 0 has written the model and the summary
    return session.context.broadcast_object(summary)

