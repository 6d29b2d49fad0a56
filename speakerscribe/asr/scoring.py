"""The scoring pass: the no-speech probability, the mean log-probability (Whisper's confidence) and, for word times,
the alignment heads' cross-attention (:mod:`.alignment`). The tight loop reports the first two as it decodes
(:class:`~.greedy.TokenLogprobs`); one teacher-forced decoder pass over prompt + generated tokens gives what it did
not (the transformers path, int8 steps, a row stopped at a repetition loop before its end-of-text was scored) and
the cross-attention. Without word times and with everything reported, no decoder pass runs."""

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
    logprobs=None,
    given: int = 0,
    shared: list[int] | None = None,
) -> None:
    """No-speech probability and mean log-probability of each row (from ``logprobs`` where the loop reported them),
    and cross-attention for word times, from a teacher-forced pass over ``prompt`` + generated rows. The first
    ``given`` generated tokens of each row were the caller's choice, not the model's: the mean leaves them out.
    ``shared``: the row of ``encoder_states`` each row was decoded from, where rows share windows."""
    reported = logprobs.rows([len(g) for g in generated]) if logprobs is not None and logprobs.per_step else None
    todo = []
    for i, d in enumerate(out):
        if reported is None or reported[i] is None:
            todo.append(i)
            continue
        values, no_speech = reported[i]
        if no_speech is not None:
            d.no_speech_prob = no_speech
        d.avg_logprob = float(np.mean(values[given:]))  # the generated tokens and the closing end-of-text, as Whisper
    want_words = words and bool(engine.alignment_heads)
    rows = list(range(len(out))) if want_words else todo
    if rows:
        state_rows = rows if shared is None else [shared[i] for i in rows]
        _teacher_forced(
            engine, encoder_states, prompt, generated, rows, set(todo), want_words, out, windows, given, state_rows
        )


def _teacher_forced(
    engine, encoder_states, prompt, generated, rows, todo, want_words, out, windows, given=0, state_rows=None
) -> None:
    """One decoder pass over ``prompt`` + the generated ``rows``: log-probabilities for the rows in ``todo``, the
    alignment heads' cross-attention for word times when ``want_words``. ``state_rows``: the row of
    ``encoder_states`` of each of ``rows`` (``rows`` themselves when not given)."""
    import torch

    p = len(prompt)
    sot_at = prompt.index(engine.sot)
    seqs = [prompt + generated[i] + [engine.eos] for i in rows]
    ids = torch.full((len(seqs), max(len(r) for r in seqs)), engine.eos, dtype=torch.long)
    for k, r in enumerate(seqs):
        ids[k, : len(r)] = torch.tensor(r)
    ids = ids.to(engine.placement.device)
    state_rows = rows if state_rows is None else state_rows
    if state_rows != list(range(encoder_states.shape[0])):
        encoder_states = encoder_states.index_select(0, torch.tensor(state_rows, device=encoder_states.device))
    decoder = engine.model.model.decoder
    if want_words:
        with capture_cross_attention(engine.model, engine.alignment_heads) as attention:
            hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
            attn = attention().float().cpu().numpy()  # (B, heads, T, frames)
    else:
        hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
    for k, i in enumerate(rows):
        d, g = out[i], generated[i]
        n = p + len(g)  # positions 0..n-1 predict seqs[1..n]
        if i in todo:
            logprobs = token_logprobs(engine, hidden[k, :n], ids[k, 1 : n + 1])
            if engine.no_speech_id is not None:
                d.no_speech_prob = float(np.exp(log_softmax_row(engine, hidden[k, sot_at])[engine.no_speech_id]))
            # mean over the generated tokens and the closing end-of-text, as Whisper does
            d.avg_logprob = float(np.mean(logprobs[p - 1 + given :])) if n > p - 1 + given else 0.0
        text_pos = [j for j, t in enumerate(g) if t < engine.eos]
        if want_words and text_pos:
            # row (p - 1 + j) predicts generated token j; add the end-of-text row for the last word's end
            att_rows = [p - 1 + j for j in text_pos] + [p - 1 + len(g)]
            n_frames = int(np.ceil((windows[i].end - windows[i].start) / 0.02))
            times = token_start_times(attn[k][:, att_rows, :], n_frames)
            d.text_positions = text_pos
            d.token_times = {j: float(t) for j, t in zip(text_pos + [len(g)], times)}


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
