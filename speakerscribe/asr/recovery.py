"""Failed windows recovered, never dropped (openai-whisper's and faster-whisper's rules): decoded again by sampling
at rising temperatures until one passes (else the best attempt is kept); a window that still loops keeps its text
before the loop and the rest is decoded again in shorter windows; what loops after that is cut after its first
copy."""

from __future__ import annotations

import logging

import numpy as np

from ..audio.windows import plan_windows
from ..options import AsrOptions
from ..records import Span, Waveform
from . import decoding, features
from .decoded import Decoded, DecodePlan
from .tokens import RawSegment, find_loop

logger = logging.getLogger(__name__)

MAX_SPLIT_DEPTH = 2  # a looping window is re-decoded in halves at most this many times
MIN_SPLIT_S = 2.0  # a looping remainder shorter than this is not re-decoded, only cut after the loop


def decode_batch(
    engine, enc, windows: list[Span], language: str, opts: AsrOptions, plan: DecodePlan, clock
) -> list[Decoded]:
    """Decode a batch of encoded windows; windows that fail are decoded again at higher temperatures."""
    prompt = features.prompt_ids(engine, language, opts.task, opts.prompt)
    assistant = engine.assistant if plan.assisted else None
    out = decoding.attempt(engine, enc, windows, prompt, opts, plan.word_timestamps, clock, opts.temperature, assistant)
    if engine.min_new_tokens is not None:  # forced token counts (benchmarks): no recovery
        return out
    failing = [i for i, d in enumerate(out) if d.failed(opts)]
    hotter = tuple(t for t in opts.fallback_temperatures if t > opts.temperature)
    if not failing or not hotter:
        return out
    retry = _side_by_side if engine.tight_loop(assistant) and plan.batch_size >= len(hotter) else _in_turn
    tries = retry(engine, enc, windows, failing, hotter, prompt, opts, plan, clock, assistant)
    for i in failing:
        attempts = [out[i], *tries[i]]
        passed = next((k for k, d in enumerate(attempts) if not d.failed(opts)), None)
        out[i] = attempts[passed] if passed is not None else best_attempt(attempts, opts)
        logger.info(
            "window %.1f-%.1f s: %d attempts, kept temperature %.1f (avg log-prob %.2f, compression %.2f%s)",
            windows[i].start,
            windows[i].end,
            len(attempts),  # decoded: in turn, up to the first that passed; side by side, all of them
            out[i].temperature,
            out[i].avg_logprob,
            out[i].compression_ratio,
            ", loops" if out[i].loops else "",
        )
    return out


def _side_by_side(engine, enc, windows, failing, hotter, prompt, opts, plan, clock, assistant) -> dict:
    """Every fallback temperature of every failing window decoded at once, a row each (as many windows a batch as
    ``plan.batch_size`` rows hold): one pass of decoding steps instead of one per temperature, the rows of a window
    sharing its cross-attention where the engine can (:meth:`~.engine.WhisperEngine.shares_windows`). Each row
    samples from its own temperature's distribution, so what passes is what the turns would have drawn from."""
    per_batch = max(1, plan.batch_size // len(hotter))
    tries: dict[int, list[Decoded]] = {}
    share = engine.shares_windows()
    for b in range(0, len(failing), per_batch):
        group = failing[b : b + per_batch]
        rows = [i for i in group for _ in hotter]
        temperatures = hotter * len(group)
        # a window's encoder states once, its rows reading them (the cross-attention cached once a window)
        shared = [k for k in range(len(group)) for _ in hotter] if share else None
        decoded = decoding.attempt(
            engine,
            select_rows(enc, group if share else rows),
            [windows[i] for i in rows],
            prompt,
            opts,
            plan.word_timestamps,
            clock,
            temperatures,
            shared=shared,
        )
        for k, i in enumerate(group):
            tries[i] = decoded[k * len(hotter) : (k + 1) * len(hotter)]
    return tries


def _in_turn(engine, enc, windows, failing, hotter, prompt, opts, plan, clock, assistant) -> dict:
    """The fallback temperatures in turn (openai-whisper's order), each for the windows still failing: where the
    rows of one window's temperatures do not fit a batch, or decoding goes through ``generate``."""
    tries: dict[int, list[Decoded]] = {i: [] for i in failing}
    for temperature in hotter:
        if not failing:
            break
        sub = select_rows(enc, failing)
        ws = [windows[i] for i in failing]
        retry = decoding.attempt(engine, sub, ws, prompt, opts, plan.word_timestamps, clock, temperature, assistant)
        for i, d in zip(failing, retry):
            tries[i].append(d)
        failing = [i for i, d in zip(failing, retry) if d.failed(opts)]
    return tries


def split_loops(
    engine, waveform: Waveform, decoded: list[Decoded], opts: AsrOptions, plan: DecodePlan, language: str, clock
) -> list[Decoded]:
    """Windows that still loop keep their text before the loop; the rest is decoded again in shorter windows
    cut at the quietest points. After ``MAX_SPLIT_DEPTH`` halvings a loop is cut after its first copy."""
    done = list(decoded)
    for depth in range(1, MAX_SPLIT_DEPTH + 1):
        retry: list[Span] = []
        for d in done:
            if not decoded_again(d, opts):
                continue
            rest = keep_before_loop(d)
            if rest is not None and rest.end - rest.start >= MIN_SPLIT_S:
                half = max(MIN_SPLIT_S, (rest.end - rest.start) / 2)
                retry.extend(plan_windows([rest], waveform.samples, half))
        if not retry:
            break
        logger.info("re-decoding %d shorter window(s) after a repetition loop (depth %d)", len(retry), depth)
        again, _, _ = engine._decode_windows(waveform, retry, opts, plan, language, None, clock)
        done.extend(again)
    for d in done:
        if d.loops:
            cut_loop(d)
    return done


def decoded_again(d: Decoded, opts: AsrOptions) -> bool:
    """Whether :func:`split_loops` decodes the rest of this window again: it repeats itself (a loop, or text more
    repetitive than ``compression_ratio_threshold``) and is not silence, where the fallback runs at all."""
    return bool(opts.fallback_temperatures) and d.repeats(opts) and not d.is_silence(opts)


def select_rows(encoder_outputs, rows: list[int]):
    """The encoder outputs of some rows of a batch."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[rows])


def _loop_segment(d: Decoded) -> int:
    """Index of the first segment that takes part in a repetition: the one where a token loop starts, else the
    first segment whose text repeats the one before it; 0 when the repetition has no such structure."""
    tokens = [t for seg in d.segments for t in seg.token_ids]
    found = find_loop(tokens)
    if found is not None:
        ends = np.cumsum([len(seg.token_ids) for seg in d.segments])
        return int(np.searchsorted(ends, found[0], side="right"))
    for j in range(1, len(d.segments)):
        if d.segments[j].token_ids == d.segments[j - 1].token_ids:
            return j
    return 0


def keep_before_loop(d: Decoded) -> Span | None:
    """Drop the segments from the loop on; returns the rest of the window (absolute seconds) to decode again."""
    j = _loop_segment(d)
    start = d.window.start + (d.segments[j].start if j < len(d.segments) else 0.0)
    if j > 0:
        start = max(start, d.window.start + (d.segments[j - 1].end or d.segments[j - 1].start))
    d.segments = d.segments[:j]
    d.loops, d.compression_ratio = False, 0.0
    return Span(start, d.window.end) if start < d.window.end else None


def cut_loop(d: Decoded) -> None:
    """Keep the text up to the end of the repeated block's first copy."""
    tokens = [t for seg in d.segments for t in seg.token_ids]
    found = find_loop(tokens)
    if found is None:
        return
    keep = found[0] + found[1]
    out, used = [], 0
    for seg in d.segments:
        if used >= keep:
            break
        take = seg.token_ids[: keep - used]
        out.append(seg if len(take) == len(seg.token_ids) else RawSegment(seg.start, None, take))
        used += len(take)
    d.segments = out
    d.loops = False


def best_attempt(attempts: list[Decoded], opts: AsrOptions) -> Decoded:
    """The most likely attempt that does not repeat itself; if all do, the least repetitive."""
    clean = [d for d in attempts if not d.repeats(opts)]
    if clean:
        return max(clean, key=lambda d: d.avg_logprob)
    return min(attempts, key=lambda d: (d.loops, d.compression_ratio))
