"""Gradient dynamics: the standard InfoNCE gradient vs the trained (boosted) objective's, per step.

The paper's diagnostic: on dense captions InfoNCE saturates (loss -> 0 and its gradient underflows),
while the HN margin keeps hard negatives' logits up and the gradient alive. Both gradients are taken
on the real step's graph, so they see exactly the step's micro-batches (and dropout masks); the probe
never writes ``.grad``, so a run trains the same weights with and without it.

What a probed step costs (:class:`GradientProbe` in the training loop, ``step_gradient=True``):

- the trained (boosted) objective's gradient is the step's own accumulated ``.grad``, read after the
  last micro-batch's backward and before clipping: no extra pass and no copy;
- the standard InfoNCE's gradient takes one ``torch.autograd.grad`` pass per micro-batch (also when
  it *is* the trained objective, gamma 0: the exact-zero flag of the parameter gradient is a
  per-micro-batch measurement). It is accumulated over the step's micro-batches into one fp32 buffer
  per parameter only when the two objectives differ and the step has several micro-batches (with one,
  the pass's own output is kept); when they coincide, the step's ``.grad`` is both gradients;
- norms and the dot product per parameter in float32, in chunks of :data:`CHUNK` elements whose
  partial sums (and the parameters' sums) are reduced in float64; a parameter whose float32 squares or
  products could underflow or overflow (sum of squares below 2^-80 or not finite) is recomputed in
  float64, so no norm or cosine loses what float32 squares would lose (the paper's regime has
  gradients of 1e-20 and less);
- the token-embedding table (each ``nn.Embedding`` whose weight trains, on a single process) is
  handled sparsely: its gradient is exactly zero outside the rows the step looked up (dense embedding
  backward scatters the output gradient into those rows only, and no other code reads the table), so
  norms, dot product and exact-zero flags are taken over those rows, the standard gradient of a row as
  the sum of d(standard)/d(looked-up vector) over its lookups: the same numbers as over the whole
  table, for the cost of the rows touched. Under torchrun the table is handled like any parameter (its
  rows differ between ranks).

Used directly (``step_gradient=False``, the default), the probe takes both gradients with
``torch.autograd.grad`` (two passes per micro-batch, one when the objectives coincide) and needs no
backward; the numbers are the same definitions.

Two kinds of columns:

- every step, from the micro-batch losses the loop computes anyway (:func:`step_saturation`):
  ``saturated_share``, the share of the step's micro-batches whose standard InfoNCE is below
  :data:`SATURATION_LOSS`, and ``objective_active_share``, the share whose trained loss is not; and
  ``infonce_micro``, each micro-batch's standard InfoNCE (:mod:`hnclip.dynamics_log`), which says which
  of them saturated;
- probed steps (:class:`GradientProbe`): gradient norms, their ratio and cosine, and the exact-zero
  measurements (:func:`exact_zero_flags`, :func:`zero_norm_flags`): for each micro-batch, whether the
  standard InfoNCE's loss, its positive-logit gradient, its feature gradient and its parameter
  gradient's norm are exactly 0.0 when computed in fp32 and in bf16. A column ``zero_<quantity>_<dtype>``
  is the share of the step's micro-batches where that quantity is exactly zero.

Why four quantities: with fp32 logits the loss rounds to 0.0 once every negative trails the positive
by about 17 + ln(B) logits (log(1 + x) == 0 for x below 2^-24), and so does the positive's gradient
p - 1; a negative's gradient exp(l_j - lse) is 0.0 only once it underflows (a gap of ~104 logits, a
cosine gap above 1 at s = 100), so the feature gradient almost never vanishes. Torch's fp32 norm of a
parameter gradient squares the elements without rescaling, so it is 0.0 as soon as every element is
below ~2.6e-23 (its square below the smallest fp32 subnormal, 2^-149): "the gradient reaches exact
zero in fp32" as a logged gradient norm shows it. bf16 has fp32's exponent range but 8 significant
bits, so the loss and the positive's gradient vanish at far smaller gaps there.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from hnclip.dynamics_log import (
    DYNAMICS_COLUMNS,
    EXACT_ZERO_COLUMNS,
    EXACT_ZERO_DTYPE_NAMES,
    EXACT_ZERO_QUANTITIES,
    SATURATION_LOSS,
)

__all__ = ["CHUNK", "DYNAMICS_COLUMNS", "EXACT_ZERO_COLUMNS", "EXACT_ZERO_DTYPES", "EXACT_ZERO_QUANTITIES",
           "SATURATION_LOSS", "GradientProbe", "exact_zero_flags", "pair_sums",
           "sparse_embeddings", "step_saturation", "zero_norm_flags"]

EXACT_ZERO_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
assert tuple(EXACT_ZERO_DTYPES) == EXACT_ZERO_DTYPE_NAMES


def step_saturation(trained_losses: list[float], standard_losses: list[float]) -> dict[str, float]:
    """Every step's saturation columns, from its micro-batches' trained and standard losses.

    ``saturated_share``: share of micro-batches with standard InfoNCE < :data:`SATURATION_LOSS` (the
    paper's "loss below 1e-3 on 80 % of batches"). ``objective_active_share``: share whose *trained* loss is
    still >= :data:`SATURATION_LOSS` (for an HN run, the boosted objective still has signal there).
    """
    if len(trained_losses) != len(standard_losses) or not trained_losses:
        raise ValueError(f"need one trained and one standard loss per micro-batch, got {len(trained_losses)} "
                         f"and {len(standard_losses)}")
    n = len(standard_losses)
    return {"saturated_share": sum(v < SATURATION_LOSS for v in standard_losses) / n,
            "objective_active_share": sum(v >= SATURATION_LOSS for v in trained_losses) / n}


def exact_zero_flags(image_features: torch.Tensor, text_features: torch.Tensor, logit_scale,
                     dtype: torch.dtype) -> dict[str, bool]:
    """Whether the standard InfoNCE of one micro-batch, computed in ``dtype``, has exactly-zero parts.

    The features (L2-normalised [B, D]) and the scale s are rounded to ``dtype``; the logits
    (s * v) @ t^T and (s * t) @ v^T, the symmetric cross-entropy and its gradients are computed in
    ``dtype`` (on CPU, PyTorch's bf16 kernels). Returns ``loss`` (the loss == 0.0),
    ``positive_logit_grad`` (every diagonal entry of d loss / d logits, both directions, == 0.0) and
    ``feature_grad`` (every entry of d loss / d features, both towers, == 0.0). Nothing here
    touches the caller's graph.
    """
    with torch.enable_grad():
        images = image_features.detach().to(dtype).requires_grad_(True)
        texts = text_features.detach().to(dtype).requires_grad_(True)
        scale = torch.as_tensor(logit_scale).detach().to(dtype)
        logits_i2t = (scale * images) @ texts.T
        logits_t2i = (scale * texts) @ images.T
        labels = torch.arange(images.shape[0], device=images.device)
        loss = (F.cross_entropy(logits_i2t, labels) + F.cross_entropy(logits_t2i, labels)) / 2
        grad_i2t, grad_t2i, grad_images, grad_texts = torch.autograd.grad(
            loss, (logits_i2t, logits_t2i, images, texts))
    return {
        "loss": bool(loss == 0),
        "positive_logit_grad": bool((grad_i2t.diagonal() == 0).all() and (grad_t2i.diagonal() == 0).all()),
        "feature_grad": bool((grad_images == 0).all() and (grad_texts == 0).all()),
    }


def zero_norm_flags(amaxes: list[float]) -> dict[str, bool]:
    """Whether the gradients' global L2 norm, as torch computes it in each dtype of :data:`EXACT_ZERO_DTYPES`
    (``torch.linalg.vector_norm`` of each gradient rounded to the dtype, what ``clip_grad_norm_`` logs; no
    rescaling, so it underflows to 0.0 once every element is below ~2.6e-23 though the gradient is not
    zero), is exactly 0.0, from each gradient's largest magnitude (``amaxes``; none: every norm is zero):
    torch squares each element (rounded to the dtype) in fp32 and sums non-negative terms,
    so the norm is 0.0 exactly when the largest rounded element's fp32 square is (rounding is monotone).
    One max-abs pass per gradient instead of a norm per dtype (and a bf16 copy)."""
    if not amaxes:
        return dict.fromkeys(EXACT_ZERO_DTYPES, True)
    largest = torch.tensor(max(amaxes), dtype=torch.float32)
    return {name: bool(largest.to(dtype).float().square() == 0) for name, dtype in EXACT_ZERO_DTYPES.items()}


def _amax(grad: torch.Tensor) -> torch.Tensor:
    """max |grad| as a 0-d fp32 tensor (min and max: the inf-norm kernel is ~10x slower on a CPU)."""
    low, high = torch.aminmax(grad.detach().reshape(-1))
    return torch.maximum(-low, high).float()


CHUNK = 1 << 16  # float32 elements per partial sum on a CPU (its BLAS dot drifts by ~1e-4 over 4e7)
_TINY_SUMSQ = 2.0 ** -80  # below: float32 squares of the elements may have underflowed; recompute in float64


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sum(a * b) of two float32 tensors: float32 dots over chunks, reduced in float64 (0-d tensor)."""
    a, b = a.reshape(-1), b.reshape(-1)
    if a.numel() == 0:
        return torch.zeros((), dtype=torch.float64, device=a.device)
    if a.device.type != "cpu":  # cuBLAS reduces in a tree: one call is as exact as the chunks
        return torch.dot(a, b).double()
    parts = [torch.dot(x, y) for x, y in zip(a.split(CHUNK), b.split(CHUNK), strict=True)]
    return torch.stack(parts).double().sum()


def pair_sums(pairs: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[float, float, float]:
    """(sum |s|^2, sum |b|^2, sum s.b) over (s, b) pairs of float32 tensors (``b is s`` counts once).

    Per pair: float32 products in chunks, partial sums in float64; a pair whose float32 sum of squares
    is below 2^-80 or not finite (elements whose squares underflow, or overflow) is recomputed in
    float64. The pairs' values are summed in float64, with one host sync for all pairs (and one more
    where a pair is recomputed).
    """
    if not pairs:
        return 0.0, 0.0, 0.0
    sums = []
    for s, b in pairs:
        ss = _dot(s, s)
        sums.append(torch.stack([ss, ss, ss]) if b is s else torch.stack([ss, _dot(b, b), _dot(s, b)]))
    values = torch.stack(sums).cpu().tolist()
    total = [0.0, 0.0, 0.0]
    for (s, b), (ss, bb, sb) in zip(pairs, values, strict=True):
        if not (_TINY_SUMSQ <= ss < math.inf and _TINY_SUMSQ <= bb < math.inf):
            s64 = s.detach().double()
            b64 = s64 if b is s else b.detach().double()
            ss = float(s64.pow(2).sum())
            bb = ss if b is s else float(b64.pow(2).sum())
            sb = ss if b is s else float((s64 * b64).sum())
        total[0] += ss
        total[1] += bb
        total[2] += sb
    return total[0], total[1], total[2]


def sparse_embeddings(modules, params: list[torch.Tensor]) -> list[nn.Embedding]:
    """The ``nn.Embedding`` modules among ``modules`` whose weight is one of ``params`` and whose gradient
    is a plain scatter of the output gradient (dense, no max_norm renormalisation, no frequency scaling):
    the tables :class:`GradientProbe` handles by their looked-up rows."""
    ids = {id(p) for p in params}
    found = []
    for module in modules:
        for m in module.modules():
            if (isinstance(m, nn.Embedding) and id(m.weight) in ids and not m.sparse and m.max_norm is None
                    and not m.scale_grad_by_freq and m not in found):
                found.append(m)
    return found


class _Rows:
    """The looked-up rows of one embedding table during a probed step: the ids and output of every
    lookup that reaches autograd since the last micro-batch, and the union of rows over the step."""

    def __init__(self, module: nn.Embedding):
        self.module = module
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []  # (ids, output) of this micro-batch
        self.step_rows: list[torch.Tensor] = []
        self.handle = module.register_forward_hook(self._record)

    def _record(self, module, inputs, output) -> None:
        if output.requires_grad:
            self.calls.append((inputs[0].detach(), output))
            self.step_rows.append(inputs[0].detach().reshape(-1))

    def rows(self) -> torch.Tensor:
        """Sorted distinct rows looked up in the step so far."""
        if not self.step_rows:
            return torch.zeros(0, dtype=torch.long, device=self.module.weight.device)
        return torch.unique(torch.cat(self.step_rows))

    def gradient(self, output_grads) -> tuple[torch.Tensor, torch.Tensor]:
        """(rows, [rows, D] gradient) from the gradients of the recorded outputs (None: not reached)."""
        ids, grads = [], []
        for (call_ids, _), grad in zip(self.calls, output_grads, strict=True):
            if grad is not None:
                ids.append(call_ids.reshape(-1))
                grads.append(grad.reshape(-1, grad.shape[-1]).float())
        dim = self.module.embedding_dim
        if not ids:
            return (torch.zeros(0, dtype=torch.long, device=self.module.weight.device),
                    torch.zeros(0, dim, device=self.module.weight.device))
        ids, grads = torch.cat(ids), torch.cat(grads)
        if self.module.padding_idx is not None:  # the padding row gets no gradient
            keep = ids != self.module.padding_idx
            ids, grads = ids[keep], grads[keep]
        rows, inverse = torch.unique(ids, return_inverse=True)
        return rows, torch.zeros(len(rows), dim, device=grads.device).index_add_(0, inverse, grads)


class GradientProbe:
    """d(standard)/dθ and d(boosted)/dθ of one optimizer step, each micro-batch's scaled by ``scale``.

    ``step_gradient``: the boosted gradient is the step's ``.grad`` (the training loop: call
    :meth:`add` before each micro-batch's backward, :meth:`summary` after the last one and before the
    gradient is clipped); else it is taken here (a second pass where the objectives differ).
    ``embeddings``: tables handled by their looked-up rows (:func:`sparse_embeddings`; the module
    docstring says why that is exact); their lookups are recorded from construction to
    :meth:`summary` (or :meth:`close`), so construct the probe before the step's first forward.
    ``loss_scale``: the losses given to :meth:`add` are the true ones times this (fp16's gradient scaler,
    whose scaled losses keep small gradients alive in float16): their values and gradients are divided by
    it, and ``.grad`` must be unscaled before :meth:`summary`. 1.0 changes nothing.
    """

    def __init__(self, params: list[torch.Tensor], embeddings=(), step_gradient: bool = False,
                 loss_scale: float = 1.0):
        self.params = list(params)
        self.step_gradient = step_gradient
        self.loss_scale = float(loss_scale)
        self.tables = [_Rows(m) for m in embeddings]
        table_weights = {id(t.module.weight) for t in self.tables}
        self.dense = [i for i, p in enumerate(self.params) if id(p) not in table_weights]
        self.standard: list[torch.Tensor | None] | None = None  # accumulated, in self.dense order
        self.boosted: list[torch.Tensor | None] | None = None  # without step_gradient, where it differs
        self.standard_rows: list[list] = [[] for _ in self.tables]  # per table: (rows, values) per add
        self.boosted_rows: list[list] | None = None
        self.same = True  # every micro-batch's boosted loss was its standard loss
        self.standard_losses: list[float] = []
        self.zero_flags: list[dict[str, bool]] = []  # one per micro-batch with features given

    def close(self) -> None:
        """Stop recording embedding lookups (:meth:`summary` does it too)."""
        for table in self.tables:
            table.handle.remove()

    # ------------------------------------------------------------------------------------- accumulation
    def _grads(self, loss: torch.Tensor):
        """(dense gradients in ``self.dense`` order, per table (rows, values)) of one micro-batch's loss."""
        inputs = [self.params[i] for i in self.dense]
        outputs = [out for table in self.tables for _, out in table.calls]
        grads = torch.autograd.grad(loss, inputs + outputs, retain_graph=True, allow_unused=True)
        dense, rest = list(grads[:len(inputs)]), list(grads[len(inputs):])
        tables = []
        for table in self.tables:
            n = len(table.calls)
            tables.append(table.gradient(rest[:n]))
            rest = rest[n:]
        return dense, tables

    @staticmethod
    def _accumulate(buffers, grads, scale: float):
        """``buffers`` + ``scale`` * ``grads`` (None: zero). The first micro-batch's gradients become the
        buffers, scaled in place unless a tensor shares memory with another (autograd may hand one
        tensor to two inputs, e.g. both operands of an addition)."""
        if buffers is None:
            buffers, seen = [], set()
            for grad in grads:
                if grad is None:
                    buffers.append(None)
                    continue
                storage = grad.untyped_storage().data_ptr()
                if grad.dtype == torch.float32 and storage not in seen:
                    buffers.append(grad.mul_(scale))
                else:
                    buffers.append(grad.float() * scale)
                seen.add(storage)
            return buffers
        for i, grad in enumerate(grads):
            if grad is None:  # the parameter does not reach this loss
                continue
            if buffers[i] is None:
                buffers[i] = grad.float() * scale
            else:
                buffers[i].add_(grad.float(), alpha=scale)
        return buffers

    def add(self, standard_loss: torch.Tensor, boosted_loss: torch.Tensor, scale: float,
            features: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None) -> None:
        """Add one micro-batch; the graph is retained for the real backward that follows.

        ``features``: (image features, text features, logit scale) of the micro-batch, for the
        exact-zero measurements. Under torchrun they are this rank's share and are gathered here
        (every rank calls this on a probed step); the parameter-gradient flag then describes this
        rank's share of the gradient (rank 0's is logged).
        """
        same = boosted_loss is standard_loss  # gamma = 0 and no token term: same objective, same gradient
        if self.step_gradient and self.standard_losses and same != self.same:
            raise RuntimeError("GradientProbe(step_gradient=True): the trained objective must be the standard "
                               "one on every micro-batch of a step or on none")
        self.standard_losses.append(float(standard_loss.detach()) / self.loss_scale)
        scale = scale / self.loss_scale  # the gradients of a scaled loss, back to the true loss's
        # the standard gradient is needed for the exact-zero flags, and for the norms where it is not .grad
        needs_standard = features is not None or not (self.step_gradient and same)
        dense, tables = self._grads(standard_loss) if needs_standard else ([], [])
        if features is not None:
            self.zero_flags.append(self._zero_flags(features, dense, tables))
        if not self.step_gradient and not same:
            if self.same and self.standard is not None:  # earlier micro-batches' boosted = their standard
                self.boosted = [None if b is None else b.clone() for b in self.standard]
                self.boosted_rows = [list(held) for held in self.standard_rows]
            boosted, boosted_tables = self._grads(boosted_loss)
            self.boosted = self._accumulate(self.boosted, boosted, scale)
            if self.boosted_rows is None:
                self.boosted_rows = [[] for _ in self.tables]
            for held, (rows, values) in zip(self.boosted_rows, boosted_tables, strict=True):
                held.append((rows, values * scale))
        elif not self.step_gradient and not self.same:  # a coinciding micro-batch in a step whose others differ
            self.boosted = self._accumulate(self.boosted, [None if g is None else g.clone() for g in dense], scale)
            for held, (rows, values) in zip(self.boosted_rows, tables, strict=True):
                held.append((rows, values * scale))
        self.same = self.same and same
        for table in self.tables:
            table.calls = []
        if needs_standard and not (self.step_gradient and same):
            self.standard = self._accumulate(self.standard, dense, scale)
            for held, (rows, values) in zip(self.standard_rows, tables, strict=True):
                held.append((rows, values * scale))

    def _zero_flags(self, features, dense, tables) -> dict[str, bool]:
        from hnclip.losses import gather_features

        images, texts, logit_scale = features
        images = gather_features(images.detach(), with_grad=False)
        texts = gather_features(texts.detach(), with_grad=False)
        peaks = [_amax(g) for g in dense if g is not None] + [_amax(v) for _, v in tables if v.numel()]
        zero = zero_norm_flags([peak / self.loss_scale for peak in torch.stack(peaks).tolist()] if peaks else [])
        flags = {}
        for name, dtype in EXACT_ZERO_DTYPES.items():
            for quantity, value in exact_zero_flags(images, texts, logit_scale, dtype).items():
                flags[f"zero_{quantity}_{name}"] = value
            flags[f"zero_param_grad_{name}"] = zero[name]
        return flags

    # ------------------------------------------------------------------------------------------ results
    def reduce_tensors(self) -> list[torch.Tensor]:
        """The accumulated tensors torchrun averages over ranks (:func:`hnclip.training.distributed.all_reduce_probe`):
        the standard gradient where it is not the step's ``.grad`` (already averaged by DDP), the boosted
        one where it is taken here. Tables are not handled by rows under torchrun."""
        if self.tables:
            raise RuntimeError("GradientProbe: embedding tables are handled by rows on a single process only")
        held = [t for t in (self.standard or []) if t is not None]
        if not self.step_gradient and not self.same:
            held += [t for t in (self.boosted or []) if t is not None]
        return held

    @staticmethod
    def _coalesce(held: list, rows: torch.Tensor, dim: int, device) -> torch.Tensor:
        """Per-micro-batch (rows, values) summed onto ``rows`` (the step's sorted looked-up rows)."""
        total = torch.zeros(len(rows), dim, device=device)
        for micro_rows, values in held:
            if len(micro_rows):
                total.index_add_(0, torch.searchsorted(rows, micro_rows), values)
        return total

    def _step_gradients(self):
        """(standard, boosted) per parameter as aligned lists (None: zero); tables as their rows."""
        boosted_dense = ([self.params[i].grad for i in self.dense] if self.step_gradient
                         else (self.standard if self.same else self.boosted) or [None] * len(self.dense))
        standard_dense = boosted_dense if self.same else (self.standard or [None] * len(self.dense))
        standard, boosted = list(standard_dense), list(boosted_dense)
        for i, table in enumerate(self.tables):
            rows, weight = table.rows(), table.module.weight
            if self.step_gradient:
                b = (weight.grad.index_select(0, rows) if weight.grad is not None
                     else torch.zeros(len(rows), table.module.embedding_dim, device=weight.device))
            else:
                b = self._coalesce(self.standard_rows[i] if self.same else self.boosted_rows[i], rows,
                                   table.module.embedding_dim, weight.device)
            s = b if self.same else self._coalesce(self.standard_rows[i], rows, table.module.embedding_dim,
                                                   weight.device)
            standard.append(s)
            boosted.append(b)
        return standard, boosted

    def summary(self) -> dict[str, float | int]:
        """The probed step's columns: norms and dot product accumulated per parameter (:func:`pair_sums`:
        float32 in chunks, float64 reduction, float64 where float32 squares would underflow), plus the
        step's standard gradient norm as torch computes it in fp32 (0.0 once it underflows)."""
        self.close()
        standard, boosted = self._step_gradients()
        pairs = []
        for s, b in zip(standard, boosted, strict=True):
            if s is None and b is None:  # a parameter neither loss reaches
                continue
            if self.same:  # one gradient: s is b
                single = s.float()
                pairs.append((single, single))
                continue
            s = torch.zeros_like(b) if s is None else s.float()
            pairs.append((s, torch.zeros_like(s) if b is None else b.float()))
        norm_standard_sq, norm_boosted_sq, dot = pair_sums(pairs)
        norm_standard, norm_boosted = math.sqrt(norm_standard_sq), math.sqrt(norm_boosted_sq)
        ratio = norm_boosted / norm_standard if norm_standard > 0 else (math.inf if norm_boosted > 0 else math.nan)
        denominator = norm_standard * norm_boosted
        saturated = sum(loss < SATURATION_LOSS for loss in self.standard_losses)
        fp32_norms = [torch.linalg.vector_norm(s) for s, _ in pairs]
        norm_fp32 = float(torch.linalg.vector_norm(torch.stack(fp32_norms))) if fp32_norms else 0.0
        row = {
            "grad_norm_standard": norm_standard,
            "grad_norm_boosted": norm_boosted,
            "grad_ratio": ratio,
            "grad_cosine": dot / denominator if denominator > 0 else math.nan,
            "standard_grad_zero": int(norm_standard == 0.0),
            "saturated_fraction": saturated / max(1, len(self.standard_losses)),
            "grad_norm_standard_fp32": norm_fp32,
        }
        for column in EXACT_ZERO_COLUMNS:
            row[column] = (sum(f[column] for f in self.zero_flags) / len(self.zero_flags)
                           if self.zero_flags else math.nan)
        self.standard = self.boosted = None  # the buffers, before the next step's activations
        return row
