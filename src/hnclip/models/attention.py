"""Multi-head attention built from four ``nn.Linear`` so PEFT can adapt q, k, v and out separately.

``nn.MultiheadAttention`` packs q/k/v into one ``in_proj_weight`` Parameter (no module for PEFT to
wrap) and calls ``out_proj``'s weight directly instead of the module: peft's DoRA refuses it, and LoRA
on its ``out_proj`` trains adapters that never reach the output. :class:`LinearAttention` computes the
same function with a call signature and return value that are drop-in for the module it replaces.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["LinearAttention", "convert_attention_to_linear", "convert_attention_to_native",
           "has_linear_attention"]


def _as_additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    # nn.MultiheadAttention's convention: a bool mask marks positions that may NOT be attended
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))
    return mask.to(dtype)


class LinearAttention(nn.Module):
    """Self/cross attention with separate ``q_proj``/``k_proj``/``v_proj``/``out_proj`` Linears.

    Same arguments, masks (bool = blocked, float = added; ``attn_mask`` [L, S] or [B*H, L, S];
    ``key_padding_mask`` [B, S]), ``batch_first`` layout and ``(output, weights-or-None)`` return as
    ``nn.MultiheadAttention``. Without ``need_weights`` it runs PyTorch's fused SDPA kernel.
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 batch_first: bool = False, device=None, dtype=None):
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim={embed_dim} is not divisible by num_heads={num_heads}")
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    def _split_heads(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.num_heads, self.head_dim).transpose(1, 2)

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                key_padding_mask: torch.Tensor | None = None, need_weights: bool = True,
                attn_mask: torch.Tensor | None = None, average_attn_weights: bool = True,
                is_causal: bool = False):
        if is_causal and attn_mask is None:
            # nn.MultiheadAttention treats is_causal only as a hint about attn_mask
            raise RuntimeError("is_causal=True needs the causal attn_mask as well "
                               "(nn.MultiheadAttention semantics)")
        unbatched = query.dim() == 2
        if unbatched:
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        if not self.batch_first or unbatched:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        batch, target_len, _ = query.shape
        source_len = key.shape[1]

        q = self._split_heads(self.q_proj(query))
        k = self._split_heads(self.k_proj(key))
        v = self._split_heads(self.v_proj(value))

        mask = None
        if attn_mask is not None:
            mask = _as_additive(attn_mask, q.dtype)
            if mask.dim() == 3:  # [B*H, L, S], batch-major as in nn.MultiheadAttention
                mask = mask.view(batch, self.num_heads, target_len, source_len)
        if key_padding_mask is not None:
            padding = _as_additive(key_padding_mask, q.dtype).view(batch, 1, 1, source_len)
            mask = padding if mask is None else mask + padding
        dropout = self.dropout if self.training else 0.0

        weights = None
        if need_weights:
            scores = (q @ k.transpose(-2, -1)) / self.head_dim ** 0.5
            if mask is not None:
                scores = scores + mask
            weights = scores.softmax(dim=-1)
            context = F.dropout(weights, p=dropout) @ v
            if average_attn_weights:
                weights = weights.mean(dim=1)
        else:
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)

        output = self.out_proj(context.transpose(1, 2).reshape(batch, target_len, self.embed_dim))
        if not self.batch_first or unbatched:
            output = output.transpose(0, 1)
        if unbatched:
            output = output.squeeze(1)
            weights = weights.squeeze(0) if weights is not None else None
        return output, weights


def _named_children_of_type(model: nn.Module, kind: type) -> list[tuple[nn.Module, str, nn.Module]]:
    found = []
    for parent in model.modules():
        for child_name, child in parent.named_children():
            if type(child) is kind:
                found.append((parent, child_name, child))
    return found


def has_linear_attention(model: nn.Module) -> bool:
    return any(isinstance(m, LinearAttention) for m in model.modules())


@torch.no_grad()
def convert_attention_to_linear(model: nn.Module) -> nn.Module:
    """Replace every ``nn.MultiheadAttention`` in ``model`` (in place) by an equal LinearAttention."""
    for parent, child_name, mha in _named_children_of_type(model, nn.MultiheadAttention):
        if not mha._qkv_same_embed_dim or mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(f"{type(parent).__name__}.{child_name}: only self-attention-shaped "
                             "nn.MultiheadAttention (equal q/k/v dims, no bias_k/bias_v, no add_zero_attn) "
                             "can be converted")
        weight = mha.in_proj_weight
        bias = mha.in_proj_bias is not None
        linear = LinearAttention(mha.embed_dim, mha.num_heads, mha.dropout, bias, mha.batch_first,
                                 device=weight.device, dtype=weight.dtype)
        for index, proj in enumerate((linear.q_proj, linear.k_proj, linear.v_proj)):
            rows = slice(index * mha.embed_dim, (index + 1) * mha.embed_dim)
            proj.weight.copy_(weight[rows])
            proj.weight.requires_grad_(weight.requires_grad)
            if bias:
                proj.bias.copy_(mha.in_proj_bias[rows])
                proj.bias.requires_grad_(mha.in_proj_bias.requires_grad)
        linear.out_proj.load_state_dict(mha.out_proj.state_dict())
        linear.out_proj.requires_grad_(mha.out_proj.weight.requires_grad)
        linear.train(mha.training)
        setattr(parent, child_name, linear)
    return model


@torch.no_grad()
def convert_attention_to_native(model: nn.Module) -> nn.Module:
    """Inverse of :func:`convert_attention_to_linear` (in place); adapters must be merged first."""
    for parent, child_name, linear in _named_children_of_type(model, LinearAttention):
        projections = (linear.q_proj, linear.k_proj, linear.v_proj, linear.out_proj)
        if any(type(p) is not nn.Linear for p in projections):
            raise ValueError(f"{type(parent).__name__}.{child_name}: projections are wrapped "
                             f"({type(linear.q_proj).__name__}); merge adapters before converting back")
        weight = linear.q_proj.weight
        bias = linear.q_proj.bias is not None
        mha = nn.MultiheadAttention(linear.embed_dim, linear.num_heads, dropout=linear.dropout, bias=bias,
                                    batch_first=linear.batch_first, device=weight.device, dtype=weight.dtype)
        mha.in_proj_weight.copy_(torch.cat([p.weight for p in projections[:3]], dim=0))
        mha.in_proj_weight.requires_grad_(weight.requires_grad)
        if bias:
            mha.in_proj_bias.copy_(torch.cat([p.bias for p in projections[:3]], dim=0))
            mha.in_proj_bias.requires_grad_(linear.q_proj.bias.requires_grad)
        mha.out_proj.load_state_dict(linear.out_proj.state_dict())
        mha.out_proj.requires_grad_(linear.out_proj.weight.requires_grad)
        mha.train(linear.training)
        setattr(parent, child_name, mha)
    return model
