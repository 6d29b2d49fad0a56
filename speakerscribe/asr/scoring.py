"""The scoring pass: one teacher-forced decoder pass over prompt + generated tokens gives the no-speech
probability, the mean log-probability (Whisper's confidence) and, for word times, the alignment heads'
cross-attention (:mod:`.alignment`)."""

from __future__ import annotations

import numpy as np

from ..records import Span
from .alignment import capture_cross_attention, token_start_times
from .decoded import Decoded

_LOGIT_ROWS = 2048  # rows of (tokens x vocab) logits computed at a time in the scoring pass


def score(
    engine,
    encoder_states,
    prompt: list[int],
    generated: list[list[int]],
    words: bool,
    out: list[Decoded],
    windows: list[Span],
) -> None:
    """Teacher-forced pass over ``prompt`` + each generated row: no-speech probability, mean log-probability,
    and cross-attention for words."""
    import torch

    p = len(prompt)
    sot_at = prompt.index(engine.sot)
    rows = [prompt + g + [engine.eos] for g in generated]
    longest = max(len(r) for r in rows)
    ids = torch.full((len(rows), longest), engine.eos, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
    ids = ids.to(engine.placement.device)
    want_words = words and bool(engine.alignment_heads)
    decoder = engine.model.model.decoder
    if want_words:
        with capture_cross_attention(engine.model, engine.alignment_heads) as attention:
            hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
            attn = attention().float().cpu().numpy()  # (B, heads, T, frames)
    else:
        hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
    for i, (d, g) in enumerate(zip(out, generated)):
        n = p + len(g)  # positions 0..n-1 predict rows[1..n]
        logprobs = token_logprobs(engine, hidden[i, :n], ids[i, 1 : n + 1])
        first = log_softmax_row(engine, hidden[i, sot_at])
        if engine.no_speech_id is not None:
            d.no_speech_prob = float(np.exp(first[engine.no_speech_id]))
        # mean over the generated tokens and the closing end-of-text, as Whisper does
        d.avg_logprob = float(np.mean(logprobs[p - 1 :])) if n > p - 1 else 0.0
        if want_words:
            text_pos = [k for k, t in enumerate(g) if t < engine.eos]
            if text_pos:
                # row (p - 1 + k) predicts generated token k; add the end-of-text row for the last word's end
                att_rows = [p - 1 + k for k in text_pos] + [p - 1 + len(g)]
                n_frames = int(np.ceil((windows[i].end - windows[i].start) / 0.02))
                times = token_start_times(attn[i][:, att_rows, :], n_frames)
                d.text_positions = text_pos
                d.token_times = {k: float(t) for k, t in zip(text_pos + [len(g)], times)}


def token_logprobs(engine, hidden, targets) -> np.ndarray:
    import torch

    out = []
    for a in range(0, hidden.shape[0], _LOGIT_ROWS):
        logits = engine.projection(hidden[a : a + _LOGIT_ROWS]).float()
        lp = logits.gather(-1, targets[a : a + _LOGIT_ROWS, None])[:, 0] - torch.logsumexp(logits, dim=-1)
        out.append(lp.cpu().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def log_softmax_row(engine, hidden_row) -> np.ndarray:
    import torch

    logits = engine.projection(hidden_row[None]).float()[0]
    return torch.log_softmax(logits, dim=-1).cpu().numpy()
