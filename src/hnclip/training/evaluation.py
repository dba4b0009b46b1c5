"""The evaluation after each epoch (rank 0): every evaluated split scored, its recalls appended to
``epochs.csv``, its per-query ranks to ``epoch_ranks.csv``, and its seconds counted apart from training."""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hnclip.training.session import Session

__all__ = ["evaluate_epoch"]

log = logging.getLogger("hnclip.train")  # the trainer's log lines keep the name they always had



def evaluate_epoch(session: Session) -> None:
    """Score the model on each evaluated split after the epoch just ended (rank 0; the other ranks evaluate
    nothing and wait in the checkpoint's save) and log the rows; adds the seconds to ``epoch_eval_s``."""
    from hnclip.evaluate import evaluate_model, tokenize_captions

    state, parts, progress = session.state, session.parts, session.shown
    evaluated = session.eval_data if session.context.is_main else None
    eval_started = time.perf_counter()
    for i, (name, manifest, images) in enumerate(evaluated or []):
        progress.set_phase(f"evaluating after epoch {state.epoch}" + (f" ({name})" if name else ""))
        if i not in session.eval_tokens:  # BPE on dense captions is slow in Python: once per run
            session.eval_tokens[i] = tokenize_captions(parts.model, manifest)
        metrics = evaluate_model(parts.model, manifest, images, device=session.device,
                                 framework=parts.framework, return_ranks=True, tokens=session.eval_tokens[i])
        ranks = metrics.pop("ranks")
        epoch_row = {"epoch": state.epoch, "step": state.step, **metrics, "benchmark": name}
        parts.logs["epochs"].append(epoch_row)
        if session.report is not None:
            session.report.epoch(epoch_row)
        parts.logs["epoch_ranks"].append({"epoch": state.epoch, **{k: " ".join(map(str, v))
                                                                  for k, v in ranks.items()},
                                          "benchmark": name})
        log.info("epoch %d%s: %s", state.epoch, f" ({name})" if name else "", metrics)
    state.epoch_eval_s += time.perf_counter() - eval_started
