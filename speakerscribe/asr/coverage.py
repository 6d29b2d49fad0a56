"""Which speech the transcript covers, and the windows that decode the rest ("follow-ups").

Whisper often stops before the end of a window (a window's last words, the first words after a cut inside a long
stretch of speech, a short reply between two windows never come out). openai-whisper and faster-whisper decode
one window after another and seek back to the last timestamp; we decode every window at once, in batches, and then
look at what came back: speech the VAD heard that no chunk (or word) covers is decoded again in windows of its own,
all in one batch, until a timestamped chunk covers it or Whisper says it is not speech (a window that gives nothing
is not decoded again). See :meth:`speakerscribe.pipeline.Transcriber.run`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..audio.windows import plan_windows, uncovered
from ..records import SAMPLE_RATE, Chunk, Span

# chosen on the festival long-form set (benchmarks/peers.py) and checked on the AMI excerpts
COVER_PAD_S = 0.15  # a chunk or word covers this much on both sides
FOLLOW_UP_MIN_S = 0.4  # uncovered speech shorter than this is left alone (region padding, pauses); 0.5 missed a
# two-word reply at a cut: 0.47 s between its neighbours' padded chunks (festival set, whisper-base)
FOLLOW_UP_PAD_S = 0.1  # audio added on both sides of an uncovered stretch (never reaching covered speech)
FOLLOW_UP_MIN_SPEECH_S = 0.25  # ... and the VAD must hear at least this much speech in it (its min_speech_s)
CUT_PAUSE_S = 0.1  # a window's end is in a pause when the VAD hears none within this of it (tail_gap)
MAX_FOLLOW_UP_ROUNDS = 2  # a follow-up window may stop early too: look once more
VAD_FRAME_S = 512 / SAMPLE_RATE


@dataclass(frozen=True)
class SpeechMap:
    """What the speech detector heard, for deciding what the transcript leaves out: its speech regions and its
    per-frame (32 ms) speech probabilities with the threshold they are read at."""

    regions: list[Span]
    probabilities: np.ndarray
    threshold: float


def covered_spans(chunks: tuple[Chunk, ...], pad: float = COVER_PAD_S) -> list[Span]:
    """What the transcript covers: each word (when word times exist) or else each chunk, padded by ``pad``."""
    return [Span(w.start - pad, w.end + pad) for c in chunks for w in (c.words or (c,))]


def speech_seconds(probabilities: np.ndarray, span: Span, threshold: float) -> float:
    """Seconds of VAD frames (32 ms each) inside ``span`` whose speech probability reaches ``threshold``."""
    a = max(0, int(np.floor(span.start / VAD_FRAME_S)))
    b = min(probabilities.size, int(np.ceil(span.end / VAD_FRAME_S)))
    if b <= a:
        return 0.0
    return float(np.count_nonzero(probabilities[a:b] >= threshold)) * VAD_FRAME_S


def follow_up_windows(
    regions: list[Span],
    covered: list[Span],
    probabilities: np.ndarray,
    threshold: float,
    samples: np.ndarray,
    max_len: float,
) -> list[Span]:
    """Windows over the speech ``regions`` that nothing ``covered`` (padded spans, :func:`covered_spans`) reaches:
    stretches of at least ``FOLLOW_UP_MIN_S`` in which the VAD hears at least ``FOLLOW_UP_MIN_SPEECH_S`` of speech,
    padded by ``FOLLOW_UP_PAD_S``, then widened by ``COVER_PAD_S`` so that a window starts at the last timestamp
    before it (Whisper's end times run late as often as early: the next turn's first word can start before the
    previous chunk's end), and cut into windows of at most ``max_len`` seconds (each stretch its own windows:
    packing two would decode the covered speech between them again)."""
    gaps = uncovered(regions, covered, FOLLOW_UP_MIN_S, FOLLOW_UP_PAD_S)
    gaps = [Span(g.start - COVER_PAD_S, g.end + COVER_PAD_S) for g in gaps]
    duration = samples.size / SAMPLE_RATE
    gaps = [Span(max(0.0, g.start), min(g.end, duration)) for g in gaps if g.start < duration]
    gaps = [g for g in gaps if speech_seconds(probabilities, g, threshold) >= FOLLOW_UP_MIN_SPEECH_S]
    return [w for g in gaps for w in plan_windows([g], samples, max_len)]


def tail_gap(window: Span, chunks: list[Chunk], speech: SpeechMap) -> Span | None:
    """Where ``window``'s transcript stopped early: from the first stretch of speech after its last chunk that the
    chunks (``chunks``, decoded in this window) do not cover and that a follow-up window would decode (the same
    rules as :func:`follow_up_windows`, and started ``COVER_PAD_S`` early as one is) to the window's end. None when
    the window has no chunk (Whisper heard nothing there, or said so), when nothing uncovered follows its last one,
    or when the window was cut in the middle of speech (:func:`cut_in_speech`): decoded up to such a cut, Whisper
    finishes the cut word as it guesses ("with the training." where the next window says "testing"), and a
    follow-up window holds all of it."""
    if not chunks or cut_in_speech(window, speech):
        return None
    covered = covered_spans(tuple(chunks))
    last = max(c.end for c in covered)
    inside = [Span(max(r.start, window.start), min(r.end, window.end)) for r in speech.regions]
    inside = [r for r in inside if r.end > r.start and r.end > last]
    for gap in uncovered(inside, covered, FOLLOW_UP_MIN_S, FOLLOW_UP_PAD_S):
        if gap.start < last or speech_seconds(speech.probabilities, gap, speech.threshold) < FOLLOW_UP_MIN_SPEECH_S:
            continue
        start = max(window.start, gap.start - COVER_PAD_S)
        return Span(start, window.end) if window.end - start >= FOLLOW_UP_MIN_S else None
    return None


def cut_in_speech(window: Span, speech: SpeechMap) -> bool:
    """Whether ``window`` ends inside a speech region (a long region is cut at its quietest point) with the VAD
    hearing speech in every frame within ``CUT_PAUSE_S`` of the cut: no pause there, the cut went through words.
    Measured: the festival long-form set's cuts lie in pauses between turns (the VAD's probability falls to 0.01-0.16
    beside them), the backchannel conversation's cut at 30.2 s through "testing" (1.0 in every frame)."""
    if not any(r.start < window.end < r.end for r in speech.regions):
        return False
    a = max(0, int(np.floor((window.end - CUT_PAUSE_S) / VAD_FRAME_S)))
    b = min(speech.probabilities.size, int(np.ceil((window.end + CUT_PAUSE_S) / VAD_FRAME_S)))
    return b > a and bool((speech.probabilities[a:b] >= speech.threshold).all())


def speech_at_cut(window: Span, speech: SpeechMap, duration: float) -> bool:
    """Whether ``window`` ends at a cut with speech right before it: the VAD hears speech in a frame within
    ``CUT_PAUSE_S`` before the window's end, and the audio goes on. Whisper decodes the last words of such a window
    poorly (no pause follows them inside it), so a tail there that its own encoding gives nothing sure for is left to
    the follow-ups, whose window ends in the pause after them."""
    if window.end >= duration - VAD_FRAME_S:
        return False
    return speech_seconds(speech.probabilities, Span(window.end - CUT_PAUSE_S, window.end), speech.threshold) > 0


def confident(chunks: tuple[Chunk, ...], logprob_threshold: float) -> tuple[Chunk, ...]:
    """The chunks of windows decoded with a mean log-probability of at least ``logprob_threshold``: on a second
    attempt over audio the first pass left out, Whisper's low-confidence text is what it makes up in a pause between
    turns ("Thank you.", "Bye."), not a word someone said."""
    return tuple(c for c in chunks if c.avg_logprob is None or c.avg_logprob >= logprob_threshold)


def chunks_in(window: Span, chunks: tuple[Chunk, ...]) -> list[Chunk]:
    """The chunks that start inside ``window``."""
    return [c for c in chunks if window.start <= c.start < window.end]
