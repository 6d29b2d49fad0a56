"""Whisper decoding with timestamp tokens, greedy or sampled, in one tight loop.

transformers' generic ``generate`` spends most of a CPU decoding step outside the model: it re-reads every row's
whole sequence into Python for the timestamp rules, runs a generic processor and stopping-criteria stack, and
copies the cache bookkeeping. Here the same rules are kept as a few per-row tensors updated once per step, so a
step is one decoder call on the newest token, one projection onto the vocabulary of the last position and a few
vectorised masks.

The output is token for token what ``GenerationMixin.generate`` gives with greedy search, the model's
``suppress_tokens`` and ``begin_suppress_tokens``, :class:`~transformers.WhisperTimeStampLogitsProcessor` and the
engine's stop-on-loop criterion (``tests/test_greedy.py`` compares the two). Sampled (a temperature above 0), it
draws from the caller's own ``torch.Generator``, not the process-wide one, so concurrent requests cannot take each
other's random numbers; with a generator seeded like the global one, the tokens are ``generate``'s with
``do_sample`` (the same draws in the same order). Draft models and the static cache (CUDA graphs) still go through
``generate``.

The timestamp rules (openai-whisper's ``ApplyTimestampRules``):

* ``<|notimestamps|>`` never;
* timestamps come in pairs: after a lone timestamp only another timestamp or end-of-text, after a pair no timestamp;
* timestamps never decrease, and a timestamp closing nothing (after a pair, or at the start) is strictly later
  than the last one;
* the first token is a timestamp of at most ``max_initial_timestamp_index`` (1 s);
* when the timestamps together are more likely than the most likely text token, a timestamp is taken.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .attention import SharedRows, sharing
from .screened import exact_projection
from .steps import DecoderSteps, StepCache


@dataclass(frozen=True)
class TimestampRules:
    """The token ids the rules need, from a Whisper generation config."""

    timestamp_begin: int  # first timestamp token (<|0.00|>)
    no_timestamps: int
    eos: int
    max_initial_index: int | None  # the first timestamp is at most timestamp_begin + this
    suppress: tuple[int, ...] = ()  # never generated
    begin_suppress: tuple[int, ...] = ()  # never the first generated token

    @classmethod
    def from_generation_config(cls, gen) -> TimestampRules:
        eos = gen.eos_token_id if not isinstance(gen.eos_token_id, list) else gen.eos_token_id[0]
        initial = getattr(gen, "max_initial_timestamp_index", None)
        return cls(
            timestamp_begin=int(gen.no_timestamps_token_id) + 1,
            no_timestamps=int(gen.no_timestamps_token_id),
            eos=int(eos),
            max_initial_index=int(initial) if initial is not None else None,
            suppress=tuple(int(t) for t in (gen.suppress_tokens or [])),
            begin_suppress=tuple(int(t) for t in (gen.begin_suppress_tokens or [])),
        )


def greedy_decode(
    model,
    encoder_states,
    prompt_ids,
    rules: TimestampRules,
    max_new_tokens: int,
    stop_row: Callable[[list[int]], bool] | None = None,
    projection: VocabProjection | None = None,
    check: Callable[[], None] | None = None,
    temperature: float | Sequence[float] = 0.0,
    generator=None,
    min_new_tokens: int = 0,
    decoder=None,
    logprobs: TokenLogprobs | None = None,
    first_tokens=None,
    shared=None,
):
    """Decode every row of ``encoder_states`` (B, frames, d) from ``prompt_ids`` (B, P): greedily, or with
    ``temperature`` > 0 by sampling with ``generator`` (a ``torch.Generator`` on the model's device; required then),
    or with one temperature a row (a sequence: the fallback's temperatures side by side, rows at 0 greedy).
    Returns (B, P + steps) token ids, as ``generate`` does; finished rows are padded with end-of-text.
    ``stop_row(generated)`` is asked after each text token of an unfinished row (its tokens so far, timestamps
    included); True finishes the row. ``projection``: the model's :class:`VocabProjection` or its int8 screen
    (:mod:`.screened`), the same one every call. ``check()`` runs before every step and may raise to stop the
    decoding. Greedy or with a temperature a row, finished rows leave the batch once they are a quarter of it
    (``generate`` decodes them to the longest row's end). ``min_new_tokens`` forbids end-of-text for that many
    steps. ``decoder`` replaces ``model.model.decoder`` (an int8 copy, :mod:`.quantized`; either as
    :mod:`.steps`). ``logprobs``: filled with what the scoring pass would compute. ``first_tokens`` (B,): each row's
    first token (a timestamp). ``shared`` (B,): the window (row of ``encoder_states``) each row decodes."""
    import torch

    temperature, per_row, sampling = _temperatures(temperature, prompt_ids.device, generator)
    decoder = _stepped(decoder if decoder is not None else model.model.decoder)
    batch = prompt_ids.shape[0]
    project = _projection_for(projection, model, sampling)
    state = _RowStates(rules, model.proj_out.out_features, batch, prompt_ids.device, min_new_tokens, first_tokens)
    generated: list[list[int]] = [[] for _ in range(batch)]
    steps, cache, step_input, groups = [], None, prompt_ids, _shared_rows(shared, batch, encoder_states)
    rows = torch.arange(batch, device=prompt_ids.device)  # the batch row of each row still decoded
    for step in range(max_new_tokens):
        if check is not None:
            check()
        hidden, cache = _step(decoder, step_input, encoder_states, cache, groups, step)
        scores = _as_float_rows(project(hidden[:, -1]))
        seen = logprobs.before_rules(scores, hidden, project, step) if logprobs is not None else None
        state.apply_rules(scores, step)
        chosen = _choose(scores, rules.timestamp_begin, temperature[rows] if per_row else temperature, generator)
        token = state.advance(chosen, step)
        full = token if rows.shape[0] == batch else _scatter(token, rows, batch, rules.eos)
        steps.append(full)
        if logprobs is not None:
            logprobs.after_choice(seen, scores, token, rows, batch)
        state.finish(_rows_to_stop(token, state.finished, rows.tolist(), generated, rules.eos, stop_row))
        if bool(state.finished.all()):
            break
        if (per_row or not sampling) and _worth_dropping(state.finished):
            # sampling at one temperature keeps finished rows: its draws, one per row, follow generate's order
            encoder_states, rows, token, groups = _drop_finished(state, cache, encoder_states, rows, token, groups)
        step_input = token[:, None]
    return torch.cat([prompt_ids, torch.stack(steps, dim=1)], dim=1) if steps else prompt_ids


@dataclass
class TokenLogprobs:
    """What the scoring pass (:mod:`.scoring`) needs from the model's logits, taken in the loop instead of a second
    decoder pass: each row's log-probability of every token it generated and of the end-of-text after them (the
    model's own logits, before the rules mask any: what the teacher-forced pass computes, to rounding), and the
    log-probability of no-speech at the prompt's start-of-transcript position. Rows whose end-of-text the loop
    never scored (stopped at a repetition loop or the token limit, and out of the batch) have their tokens only."""

    eos: int
    sot_at: int
    no_speech_id: int | None
    per_step: list = field(default_factory=list)  # (B,) a step, NaN for rows out of the batch
    no_speech: list[float] | None = None

    def before_rules(self, scores, hidden, project, step: int):
        """Each row's log-normaliser and end-of-text logit, before the rules touch ``scores``; no-speech at step 0."""
        import torch

        if step == 0 and self.no_speech_id is not None:
            first = torch.log_softmax(project(hidden[:, self.sot_at]).float(), dim=-1)
            self.no_speech = first[:, self.no_speech_id].tolist()
        return torch.logsumexp(scores, dim=-1), scores[:, self.eos].clone()

    def after_choice(self, seen, scores, token, rows, batch: int) -> None:
        """The chosen tokens' log-probabilities: a chosen token's score is never masked, except end-of-text forced
        on a finished row, whose logit was kept before the rules."""
        import torch

        norm, eos_logit = seen
        chosen = scores.gather(1, token[:, None])[:, 0]
        value = torch.where(token == self.eos, eos_logit, chosen) - norm
        if rows.shape[0] != batch:
            full = torch.full((batch,), float("nan"), dtype=value.dtype, device=value.device)
            full[rows] = value
            value = full
        self.per_step.append(value)

    def rows(self, lengths: list[int]) -> list[tuple[list[float], float | None] | None]:
        """Per row of ``lengths`` generated tokens: the log-probabilities of its tokens and its end-of-text, and its
        no-speech probability; None for a row whose end-of-text the loop never scored."""
        import math

        import torch

        table = torch.stack(self.per_step, dim=1).cpu().tolist()
        out = []
        for i, n in enumerate(lengths):
            values = table[i][: n + 1]
            if len(values) < n + 1 or any(math.isnan(v) for v in values):
                out.append(None)
                continue
            out.append((values, math.exp(self.no_speech[i]) if self.no_speech is not None else None))
        return out


_DROP_SHARE = 0.25  # finished rows are dropped once they are this share of the batch (each drop copies the cache)


def _stepped(decoder):
    """The decoder as :class:`~.steps.DecoderSteps`; transformers' module where the steps do not apply."""
    return DecoderSteps.of(decoder) or decoder


def _projection_for(projection, model, sampling: bool):
    """The projection a decoding takes: a draw needs every score, and a screen (:mod:`.screened`) scores only what
    decides a greedy step with the model's weights, so sampling takes the model's projection behind it."""
    project = projection or VocabProjection(model.proj_out)
    return exact_projection(project) if sampling else project


def _as_float_rows(logits):
    """(B, vocab) float32 scores laid out row by row: the CPU projection hands back a transposed product, and every
    reduction of a step over the vocabulary (the normaliser, the best text token) ran 2-3x slower on it."""
    import torch

    if logits.is_contiguous() and logits.dtype == torch.float32:
        return logits
    return torch.empty(logits.shape, dtype=torch.float32, device=logits.device).copy_(logits)


def _worth_dropping(finished) -> bool:
    done = int(finished.sum())
    return done > 0 and done >= _DROP_SHARE * finished.shape[0]


def _drop_finished(state, cache, encoder_states, rows, token, groups=None):
    """The finished rows out of the batch: every step costs in proportion to the rows in it (cross-attention over
    1500 frames, the projection onto the vocabulary). Cuts ``state`` and ``cache`` in place; returns the encoder
    states, the batch row of each row left, their last tokens and their sharing (shared rows: a window leaves
    the cross-attention cache once none of its rows is left)."""
    import torch

    keep = torch.nonzero(~state.finished).squeeze(1)
    state.keep(keep)
    if groups is None:
        _keep(cache, keep, keep)
        encoder_states = encoder_states.index_select(0, keep)
    else:
        groups, used = groups.keep(keep)
        used = used if used.shape[0] < encoder_states.shape[0] else None
        _keep(cache, keep, used)
        if used is not None:
            encoder_states = encoder_states.index_select(0, used)
    return encoder_states, rows.index_select(0, keep), token.index_select(0, keep), groups


def _shared_rows(shared, batch: int, encoder_states) -> SharedRows | None:
    import torch

    if shared is None:
        return None
    groups = SharedRows.of(torch.as_tensor(shared, device=encoder_states.device))
    if groups.rows.shape[0] != batch or groups.windows != encoder_states.shape[0]:
        raise ValueError(f"shared: {batch} rows of {encoder_states.shape[0]} windows, got {groups.rows.tolist()}")
    return groups


def _step(decoder, step_input, encoder_states, cache, groups: SharedRows | None, step: int):
    """One decoder call: (hidden states, cache). Rows sharing windows (``groups``; :class:`~.attention.SharedRows`,
    the model on :func:`~.attention.step_attention`) decode the prompt once a window and read the cross-attention
    keys and values kept once a window. ``decoder``: :class:`~.steps.DecoderSteps` or transformers' module."""
    if groups is not None and step == 0:
        return _shared_prompt(decoder, step_input, encoder_states, groups)
    if isinstance(decoder, DecoderSteps):
        return decoder(step_input, encoder_states, cache, groups)
    with sharing(groups):
        out = decoder(input_ids=step_input, encoder_hidden_states=encoder_states, past_key_values=cache, use_cache=True)
    return out.last_hidden_state, out.past_key_values


def _shared_prompt(decoder, prompt_ids, encoder_states, groups: SharedRows):
    """The first step of rows sharing their windows: the prompt decoded once a window (the rows of a window share
    it), the cross-attention keys and values cached once a window, the self-attention cache and the hidden states
    copied out to every row. Returns (B, P, d) hidden states and the cache."""
    import torch

    first = groups.first_rows()
    once = prompt_ids.index_select(0, first)
    if not torch.equal(once.index_select(0, groups.rows), prompt_ids):
        raise ValueError("rows that share a window must share its prompt")
    if isinstance(decoder, DecoderSteps):
        hidden, cache = decoder(once, encoder_states)
        cache.keep_rows(groups.rows)
        return hidden.index_select(0, groups.rows), cache
    out = decoder(input_ids=once, encoder_hidden_states=encoder_states, use_cache=True)
    cache = out.past_key_values
    _select_rows(cache.self_attention_cache, groups.rows)
    return out.last_hidden_state.index_select(0, groups.rows), cache


def _keep(cache, rows, windows) -> None:
    """Only the self-attention rows ``rows`` and the cross-attention rows ``windows`` (None: all) of ``cache`` go
    on: a :class:`~.steps.StepCache` or transformers' encoder-decoder cache."""
    if isinstance(cache, StepCache):
        cache.keep_rows(rows)
        if windows is not None:
            cache.keep_windows(windows)
        return
    _select_rows(cache.self_attention_cache, rows)
    if windows is not None:
        _select_rows(cache.cross_attention_cache, windows)


def _select_rows(cache, keep) -> None:
    """Keep only the batch rows ``keep`` of a decoder cache, in place (transformers 4.56 to 5.x)."""
    if hasattr(cache, "batch_select_indices"):
        cache.batch_select_indices(keep)
    else:
        cache.reorder_cache(keep)


def _scatter(token, rows, batch: int, eos: int):
    """The tokens of the rows still decoded placed in a whole batch's row, end-of-text for the rows dropped."""
    import torch

    full = torch.full((batch,), eos, dtype=token.dtype, device=token.device)
    full[rows] = token
    return full


class _RowStates:
    """The timestamp rules' state of every row of a batch being decoded (tensors on the model's device), and the
    masks they imply: after a pair of timestamps only text, after a lone one a timestamp or end-of-text, timestamps
    never decreasing, the first token a timestamp of at most ``max_initial_index``."""

    def __init__(self, rules: TimestampRules, vocab: int, batch: int, device, min_new_tokens: int = 0, first=None):
        import torch

        self.first = first  # (B,) token ids every row starts with, or None
        self.tb, self.eos = rules.timestamp_begin, rules.eos
        self.min_new_tokens = min_new_tokens  # end-of-text forbidden before this step (forced token counts)
        never = torch.zeros(vocab, dtype=torch.bool, device=device)
        never[[t for t in rules.suppress if t < vocab]] = True
        never[rules.no_timestamps] = True
        first_never = never.clone()
        first_never[[t for t in rules.begin_suppress if t < vocab]] = True
        first_never[: self.tb] = True  # the first token is a timestamp...
        if rules.max_initial_index is not None:
            first_never[self.tb + rules.max_initial_index + 1 :] = True  # ... of at most max_initial_index
        self.never_ids, self.first_never = torch.nonzero(never).squeeze(1), first_never
        self.vocab_ids = torch.arange(vocab, device=device)
        self.finished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.last_ts = torch.zeros(batch, dtype=torch.bool, device=device)  # the last token was a timestamp
        self.penult_ts = torch.ones(batch, dtype=torch.bool, device=device)  # the one before too (True with < 2)
        self.newest_ts = torch.full((batch,), -1, dtype=torch.long, device=device)  # the last timestamp (-1: none)

    def apply_rules(self, scores, step: int) -> None:
        """Set the scores (B, vocab) of every token the rules forbid at this step to -inf, in place."""
        import torch

        if step == 0:
            if self.first is None:  # a first token given is the caller's: nothing is masked for it
                scores.masked_fill_(self.first_never, float("-inf"))
            return
        scores.index_fill_(1, self.never_ids, float("-inf"))
        pair_closed = self.last_ts & self.penult_ts  # after a pair: no timestamp
        lone = self.last_ts & ~self.penult_ts  # after a lone timestamp: a timestamp or end-of-text
        scores[:, : self.eos].masked_fill_(lone[:, None], float("-inf"))
        # timestamps never decrease; one that opens a segment is later than the last (the masks cover the timestamp
        # columns only: a whole-vocabulary mask a step cost as much as the rest of the rules)
        newest = self.newest_ts
        floor = torch.where(lone, newest, torch.where(newest >= 0, newest + 1, self.tb))
        timestamps = self.vocab_ids[self.tb :]
        scores[:, self.tb :].masked_fill_(pair_closed[:, None] | (timestamps < floor[:, None]), float("-inf"))
        if step < self.min_new_tokens:
            scores[:, self.eos] = float("-inf")

    def advance(self, token, step: int):
        """The chosen tokens (B,) with end-of-text for finished rows; the state moved past them."""
        import torch

        if step == 0 and self.first is not None:
            token = self.first
        token = torch.where(self.finished, torch.full_like(token, self.eos), token)
        self.penult_ts = self.last_ts if step >= 1 else torch.ones_like(self.last_ts)
        self.last_ts = token >= self.tb
        self.newest_ts = torch.where(self.last_ts, token, self.newest_ts)
        self.finished = self.finished | (token == self.eos)
        return token

    def finish(self, rows: list[int]) -> None:
        if rows:
            self.finished[rows] = True

    def keep(self, indices) -> None:
        """Only the rows ``indices`` go on (the others left the batch)."""
        self.finished = self.finished.index_select(0, indices)
        self.last_ts = self.last_ts.index_select(0, indices)
        self.penult_ts = self.penult_ts.index_select(0, indices)
        self.newest_ts = self.newest_ts.index_select(0, indices)


def _temperatures(temperature, device, generator):
    """(temperature, one a row?, sampling?): a sequence becomes a (B,) tensor on ``device``; its sampled rows may
    leave the batch as they finish (there is no ``generate`` order of draws to follow). Sampling needs a
    ``generator``."""
    import torch

    per_row = not isinstance(temperature, (int, float))
    if per_row:
        temperature = torch.as_tensor(temperature, dtype=torch.float32, device=device)
    sampling = bool((temperature > 0).any()) if per_row else temperature > 0
    if sampling and generator is None:
        raise ValueError("sampling (temperature > 0) needs a torch.Generator of its own")
    return temperature, per_row, sampling


def _choose(scores, tb: int, temperature: float, generator):
    """One token per row: text is forbidden where the timestamps together are likelier than the best text token;
    then the best (greedy) or a draw at ``temperature`` (generate's order: the rules, the temperature, softmax)."""
    import torch

    if isinstance(temperature, (int, float)) and temperature <= 0:
        return _greedy_choice(scores, tb)
    logprobs = torch.log_softmax(scores, dim=-1)
    timestamp_mass = torch.logsumexp(logprobs[:, tb:], dim=-1)
    best_text = logprobs[:, :tb].max(dim=-1).values
    scores[:, :tb].masked_fill_((timestamp_mass > best_text)[:, None], float("-inf"))
    if isinstance(temperature, (int, float)):
        if temperature > 0:
            probs = torch.softmax(scores / temperature, dim=-1)
            return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(1)
        return scores.argmax(dim=-1)
    # one temperature a row (rows at 0 greedy): every row draws, so the draws do not depend on which rows are greedy
    hot = temperature > 0
    probs = torch.softmax(scores / torch.where(hot, temperature, 1.0)[:, None], dim=-1)
    return torch.where(hot, _draw(probs, generator), scores.argmax(dim=-1))


def _draw(probs, generator):
    """One token a row drawn from ``probs`` (B, vocab; rows sum to 1, forbidden tokens 0) by inverting its
    cumulative sum at one uniform number a row: the distribution ``torch.multinomial`` draws from, at 0.4 ms instead
    of 21 ms for 20 rows of Whisper's vocabulary on 2 cores (multinomial's CPU kernel). A draw never lands on a
    token of probability 0: the first cumulative sum above the number is one a token raised."""
    import torch

    cumulative = torch.cumsum(probs, dim=-1)
    total = cumulative[:, -1:]
    u = torch.rand(total.shape, generator=generator, device=probs.device, dtype=cumulative.dtype) * total
    drawn = torch.searchsorted(cumulative, u, right=True).squeeze(1)
    past = drawn >= probs.shape[1]  # u rounded up to the total: the likeliest token, a row in billions
    if bool(past.any()):
        drawn = torch.where(past, probs.argmax(dim=-1), drawn)
    return drawn


def _greedy_choice(scores, tb: int):
    """:func:`_choose` at temperature 0 without a pass over the whole vocabulary for its log-softmax: both sides of
    "the timestamps together likelier than the best text token" are log-probabilities with the same normaliser, so
    it compares the raw scores' log-sum-exp over the 1501 timestamps with the best other score. Where the timestamps
    win, the best of them; else the best of the rest (which beats every timestamp then). Leaves ``scores`` as the
    rules left them: the chosen token's score is never one the rule would mask."""
    import torch

    best_text, text_token = scores[:, :tb].max(dim=-1)
    timestamps = scores[:, tb:]
    take_timestamp = torch.logsumexp(timestamps, dim=-1) > best_text
    return torch.where(take_timestamp, timestamps.argmax(dim=-1) + tb, text_token)


def _rows_to_stop(token, finished, rows: list[int], generated: list[list[int]], eos: int, stop_row) -> list[int]:
    """Each unfinished row's token appended to its batch row's ``generated`` (``rows``: the batch row of each);
    the positions of the rows that ``stop_row`` ends after a text token."""
    stopped = []
    for position, (value, done) in enumerate(zip(token.tolist(), finished.tolist())):
        if done:
            continue
        row = generated[rows[position]]
        row.append(value)
        if stop_row is not None and value < eos and stop_row(row):
            stopped.append(position)
    return stopped


class VocabProjection:
    """Hidden states -> vocabulary logits: Whisper's ``proj_out`` (no bias; its weight is the (vocab, d) token
    embedding, 80-106 MB in float32 for tiny/base, read at every decoding step).

    On the CPU the same product is taken in the orientation that runs fastest: several rows as weight @ hidden.T;
    one row in float32 against a transposed copy of the weight (made once, kept), in bfloat16 as a matrix-vector
    product. ``linear`` itself was 1.1-4x slower than one of these on the 2-core AMD machines here for every row
    count (``benchmarks/greedy_loop.py``); on the 2-core Xeon one bfloat16 row took 1.46 ms against the transposed
    copy and 1.02 ms as ``mv`` (tiny.en; base 2.01 -> 1.22 ms; a 30 s tiny.en request 0.84 -> 0.74 s), where in
    float32 ``mv`` was 5-13% slower. On an accelerator ``proj_out`` is used as it is."""

    def __init__(self, proj):
        self.proj = proj
        self.reorient = proj.weight.device.type == "cpu" and proj.bias is None
        self._transposed = None

    def __call__(self, hidden):
        import torch

        if not self.reorient:
            return self.proj(hidden)
        weight = self.proj.weight
        if hidden.shape[0] > 1:
            return (weight @ hidden.T).T
        if weight.dtype in (torch.bfloat16, torch.float16) and hidden.dtype == weight.dtype:
            return torch.mv(weight, hidden[0])[None]
        transposed = self._transposed
        if transposed is None or transposed.dtype != weight.dtype:
            transposed = self._transposed = weight.detach().t().contiguous()
        return hidden @ transposed
