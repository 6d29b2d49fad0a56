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
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

NAME = "speakerscribe_cpu_step"


def step_attention(module, query, key, value, attention_mask=None, scaling=None, dropout=0.0, **kwargs):
    """Transformers' attention-function signature: (B, H, q, d) query, (B, H, k, d) key and value ->
    ((B, q, H, d) output, None)."""
    import torch
    import torch.nn.functional as F

    scale = query.shape[-1] ** -0.5 if scaling is None else scaling
    q_len, kv_len = query.shape[-2], key.shape[-2]
    if q_len == 1 and attention_mask is None:
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


def use_step_attention(model) -> bool:
    """Register :func:`step_attention` with transformers (once per process; registering again replaces it with
    itself) and point ``model``'s config at it. False, and the model left as it was, where this transformers has no
    attention registry."""
    try:
        from transformers import AttentionInterface
    except ImportError:  # pragma: no cover - transformers < 4.48; requirements ask for >= 4.56
        return False
    AttentionInterface.register(NAME, step_attention)
    model.config._attn_implementation = NAME
    logger.debug("Whisper decoding steps use plain attention products (%s)", NAME)
    return True
