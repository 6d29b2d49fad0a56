"""Tails decoded again on the window's own encoding: where Whisper stopped before the end of a window's speech.

Whisper often ends a window's transcript early: the last words of a window, a short reply before its end never
come out (openai-whisper and faster-whisper seek back to the last timestamp and decode from there, a new 30 s window
and a new encoder pass each time). Every window of a batch is decoded at once here, so the batch's encoder states
are still at hand when its transcripts come back: a window whose speech goes on, uncovered, after its last chunk
(:func:`~.coverage.tail_gap`) is decoded once more from the same encoder states, its first token the timestamp
where that speech starts (Whisper's own way of saying "the text starts here"), all such rows of the batch in one
greedy decoding. No encoder pass and no new window: on the 7.2-minute joined AMI meetings that was 9 of 23 encoder
passes (tiny.en) and 5 of 19 (base).

What it finds is kept when Whisper is sure of it (mean log-probability at least ``logprob_threshold``, no loop,
not repetitive); otherwise the tail is declined: the follow-ups (:meth:`speakerscribe.pipeline.Transcriber.run`)
do not decode it again, as they do not decode again a follow-up window that gave nothing, except where the window
ends at a cut right after speech (:func:`~.coverage.speech_at_cut`: Whisper misses words with no pause after them
inside the window; a follow-up window ends in the pause after the cut). Speech left uncovered
in the middle of a window, or after a tail that stopped early again, is still theirs. Only the tight loop can start
rows at a given token: with a draft model or the static cache the follow-ups do all of it.
"""

from __future__ import annotations

import logging

from ..options import AsrOptions
from ..records import Span
from . import assembly, decoding, features
from .coverage import SpeechMap, speech_at_cut, tail_gap
from .decoded import Decoded, DecodePlan
from .tokens import TIME_PRECISION

logger = logging.getLogger(__name__)

MAX_TIMESTAMP_INDEX = 1500  # <|30.00|>: the last timestamp token
# a tail's text must fit its time: speech runs at 12-18 characters a second in the kept tails of the festival and AMI
# sets; a 1 s tail of AMI trn06 (float32) came back as 190 characters, the window's earlier sentences again at -0.33
MAX_CHARS_PER_S = 30.0


def refill_tails(
    engine,
    enc,
    windows: list[Span],
    decoded: list[Decoded],
    duration: float,
    language: str,
    opts: AsrOptions,
    plan: DecodePlan,
    clock,
    speech: SpeechMap | None,
) -> tuple[list[Decoded], list[Span]]:
    """The tails of a batch's ``decoded`` windows decoded again (``enc``: the batch's encoder outputs, rows in
    ``windows`` order): (the decodings kept, each for its whole window; the tails declined)."""
    from .recovery import decoded_again, select_rows

    if speech is None or plan.assisted or not engine.tight_loop():
        return [], []
    rows, tails = [], []
    for i, (window, d) in enumerate(zip(windows, decoded)):
        # split_loops decodes the rest of a repeating window again, its tail with it: decoded here too, the tail's
        # words came out twice (a festival window whose kept attempt was repetitive, compression 2.41, no loop)
        if d.loops or decoded_again(d, opts):
            continue
        chunks = assembly.window_chunks(engine, d, duration, language, opts, plan.word_timestamps)
        tail = tail_gap(window, chunks, speech)
        if tail is not None:
            rows.append(i)
            tails.append(tail)
    if not rows:
        return [], []
    starts = [round((t.start - windows[i].start) / TIME_PRECISION) for i, t in zip(rows, tails)]
    starts = [min(MAX_TIMESTAMP_INDEX, s) for s in starts]
    again = decoding.attempt(
        engine,
        select_rows(enc, rows),
        [windows[i] for i in rows],
        features.prompt_ids(engine, language, opts.task, opts.prompt),
        opts,
        plan.word_timestamps,
        clock,
        opts.temperature,
        first_tokens=[engine.timestamp_begin + s for s in starts],
    )
    sure = [_sure(d, t, opts) for t, d in zip(tails, again)]
    kept = [d for d, ok in zip(again, sure) if ok]
    declined = [t for i, t, ok in zip(rows, tails, sure) if not ok and not speech_at_cut(windows[i], speech, duration)]
    for t, d, ok in zip(tails, again, sure):
        logger.info(
            "tail %.1f-%.1f s decoded again: %s (avg log-prob %.2f)%s",
            t.start,
            t.end,
            repr(d.text.strip()[:80]),
            d.avg_logprob,
            "" if ok else ", declined",
        )
    return kept, declined


def _sure(d: Decoded, tail: Span, opts: AsrOptions) -> bool:
    """Text Whisper is sure of: some, confidently decoded, without a loop or repetitive text, and no more of it
    than the tail's time can hold (``MAX_CHARS_PER_S``)."""
    text = d.text.strip()
    fits = len(text) <= MAX_CHARS_PER_S * max(tail.end - tail.start, 0.0)
    return bool(text) and fits and not d.repeats(opts) and d.avg_logprob >= opts.logprob_threshold
