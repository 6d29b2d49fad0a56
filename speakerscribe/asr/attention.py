"""Whisper's attention on a CPU: plain products for a decoding step's single query, PyTorch's SDPA for the rest.

A greedy decoding step asks each attention layer for ONE query row against every cached key (the tokens so far,
and the 1500 encoder frames in cross-attention). PyTorch's CPU flash-attention kernel, which SDPA dispatches to, is
built for many query rows: measured on 2 cores (tiny.en, batch 8, one decoder step), it took 21.0 ms a step in
float32 and 29.8 ms in bfloat16, where two matrix products and a softmax take 19.1 ms and 14.3 ms (the kernel was
70% of the bfloat16 step). Everything with more than one query row (the encoder, the teacher-forced scoring pass,
the prompt) still runs through SDPA, causal where the module is.

Transformers looks an attention function up by the config's ``_attn_implementation`` name, so this one is
registered under :data:`NAME` and the model's config switched to it (:func:`use_step_attention`): only for a CPU
model with the dynamic cache. The name has no mask function of its own, so transformers hands it no mask; with the
dynamic cache none is needed (one query sees every key before it; several are causal, aligned to the end when the
cache holds keys before them, as in speculative decoding's verification), and a 4D mask given anyway is applied.
Not for the static cache, whose unfilled slots a mask must hide.

On a CPU with AMX tiles, in bfloat16, the kernel wins instead (its AMX micro-kernels; measured on a 2-core Intel
Xeon, torch 2.14, whisper-base's six cross-attention layers for one step: 14 rows 21.8 ms with products, 13.9 ms
with SDPA; one row 1.5 ms and 0.5 ms; float32 even): such a model is registered under :data:`NAME_SDPA`, the same
function with single queries through SDPA too (:func:`single_queries_by_sdpa`).

Rows that decode the same window (the fallback's temperatures side by side) can share its cross-attention keys and
values (:class:`SharedRows`): the cache holds them once a window, and a step reads them once a window instead of once
a row. On 2 cores these reads are most of what a row adds to a step (18 MB a row for whisper-base in bfloat16).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from dataclasses import dataclass

logger = logging.getLogger(__name__)

NAME = "speakerscribe_cpu_step"
NAME_SDPA = "speakerscribe_cpu_step_sdpa"  # single queries through SDPA too (AMX, bfloat16)


@dataclass(frozen=True)
class SharedRows:
    """Which row of the cross-attention keys each row of a decoding batch reads: ``rows`` (B,) non-decreasing, so
    the rows of one window sit together; ``slot`` (B,) each row's place among its window's rows, ``width`` the most
    rows a window has, ``windows`` the number of key rows."""

    rows: object  # torch.LongTensor (B,)
    slot: object  # torch.LongTensor (B,)
    width: int
    windows: int

    @classmethod
    def of(cls, rows) -> SharedRows:
        import torch

        if rows.ndim != 1 or rows.numel() == 0 or bool((rows[1:] < rows[:-1]).any()) or int(rows[0]) != 0:
            raise ValueError("shared rows must be non-decreasing key rows from 0, the rows of a window together")
        counts = torch.bincount(rows)
        if bool((counts == 0).any()):
            raise ValueError("every key row must be read by a row")
        starts = torch.cumsum(counts, 0) - counts
        slot = torch.arange(rows.shape[0], device=rows.device) - starts[rows]
        return cls(rows, slot, int(counts.max()), int(counts.shape[0]))

    def first_rows(self):
        """The first row of each window: (windows,)."""
        return (self.slot == 0).nonzero().squeeze(1)

    def keep(self, indices) -> tuple[SharedRows, object]:
        """Only the rows ``indices`` go on: the new grouping, and the key rows it still reads (for the cache)."""
        import torch

        rows = self.rows.index_select(0, indices)
        used, renumbered = torch.unique_consecutive(rows, return_inverse=True)
        return SharedRows.of(renumbered), used

    def attend(self, query, key, value, scale: float, by_sdpa: bool = False):
        """(B, H, q, d) queries against (windows, H, k, d) keys and values, each row against its window's: the rows
        of a window laid side by side as one window's queries, so a window's keys are read once."""
        import torch
        import torch.nn.functional as F

        b, heads, q, d = query.shape
        padded = query.new_zeros(self.windows, self.width, heads, q, d)
        padded[self.rows, self.slot] = query
        padded = padded.permute(0, 2, 1, 3, 4).reshape(self.windows, heads, self.width * q, d)
        if by_sdpa:
            out = F.scaled_dot_product_attention(padded, key, value, scale=scale)
        else:
            out = torch.matmul(torch.softmax(torch.matmul(padded, key.transpose(-1, -2)) * scale, dim=-1), value)
        out = out.reshape(self.windows, heads, self.width, q, d).permute(0, 2, 1, 3, 4)
        return out[self.rows, self.slot]  # (B, H, q, d)


_SHARED: contextvars.ContextVar[SharedRows | None] = contextvars.ContextVar("speakerscribe_shared_rows", default=None)


@contextlib.contextmanager
def sharing(rows: SharedRows | None):
    """Within the block, :func:`step_attention` takes a key batch shorter than the query batch as ``rows`` says."""
    token = _SHARED.set(rows)
    try:
        yield
    finally:
        _SHARED.reset(token)


def step_attention(
    module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, single_by_sdpa=False, **kwargs
):
    """Transformers' attention-function signature: (B, H, q, d) query, (B, H, k, d) key and value ->
    ((B, q, H, d) output, None). ``single_by_sdpa``: a single unmasked query through SDPA too (:data:`NAME_SDPA`).
    A key batch shorter than the query batch is cross-attention shared by rows (:func:`sharing`)."""
    import torch
    import torch.nn.functional as F

    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if key.shape[0] != query.shape[0]:
        shared = _SHARED.get()
        if shared is None or shared.rows.shape[0] != query.shape[0] or shared.windows != key.shape[0]:
            raise ValueError(f"{query.shape[0]} query rows against {key.shape[0]} key rows, and no sharing that fits")
        if attention_mask is not None or getattr(module, "is_causal", False):
            raise ValueError("shared keys are for cross-attention: no mask, not causal")
        return shared.attend(query, key, value, scale, single_by_sdpa).transpose(1, 2).contiguous(), None
    if q_len == 1 and attention_mask is None and not single_by_sdpa:
        weights = torch.softmax(torch.matmul(query, key.transpose(-1, -2)) * scale, dim=-1)
        out = torch.matmul(weights, value)
    else:
        mask, causal = attention_mask, False
        if mask is None and q_len > 1 and getattr(module, "is_causal", False):
            if kv_len == q_len:
                causal = True
            else:  # the queries are the last q_len positions of kv_len
                mask = torch.ones(q_len, kv_len, dtype=torch.bool, device=query.device).tril(kv_len - q_len)
        elif mask is not None and mask.ndim == 4:
            mask = mask[:, :, :, :kv_len]
        out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=causal, scale=scale)
    return out.transpose(1, 2).contiguous(), None


def step_attention_sdpa(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """:func:`step_attention` with single queries through SDPA (:data:`NAME_SDPA`)."""
    kwargs.pop("single_by_sdpa", None)
    return step_attention(module, query, key, value, attention_mask, scaling, dropout, single_by_sdpa=True, **kwargs)


STEP_ATTENTIONS = (NAME, NAME_SDPA)


def single_queries_by_sdpa(dtype) -> bool:
    """Whether a decoding step's single queries run faster through SDPA than as products: bfloat16 on a CPU with
    AMX tiles (PyTorch's own check; False where it has none)."""
    import torch

    if dtype != torch.bfloat16:
        return False
    try:
        return bool(torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover - a PyTorch without the check
        return False


def use_step_attention(model, by_sdpa: bool | None = None) -> bool:
    """Register :func:`step_attention` with transformers (once per process; registering again replaces it with
    itself) and point ``model``'s config at it, under :data:`NAME_SDPA` where ``by_sdpa`` (by default
    :func:`single_queries_by_sdpa` for the model's dtype). False, and the model left as it was, where this
    transformers has no attention registry."""
    try:
        from transformers import AttentionInterface
    except ImportError:  # pragma: no cover - transformers < 4.48; requirements ask for >= 4.56
        return False
    if by_sdpa is None:
        by_sdpa = single_queries_by_sdpa(model.dtype)
    name = NAME_SDPA if by_sdpa else NAME
    AttentionInterface.register(name, step_attention_sdpa if by_sdpa else step_attention)
    model.config._attn_implementation = name
    logger.debug("Whisper decoding steps' single queries by %s (%s)", "SDPA" if by_sdpa else "products", name)
    return True
