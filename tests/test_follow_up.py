"""No words lost between windows: speech the VAD heard that no chunk covers is decoded again (follow-ups)."""

from __future__ import annotations

import jiwer
import numpy as np
import pytest

from speakerscribe import pipeline
from speakerscribe.asr.coverage import (
    FOLLOW_UP_MIN_SPEECH_S,
    VAD_FRAME_S,
    chunks_in,
    covered_spans,
    follow_up_windows,
    speech_seconds,
)
from speakerscribe.records import SAMPLE_RATE, Chunk, Span, Word


def probabilities(duration: float, speech: list[tuple[float, float]]) -> np.ndarray:
    p = np.full(int(np.ceil(duration / VAD_FRAME_S)), 0.05, dtype=np.float32)
    for a, b in speech:
        p[int(a / VAD_FRAME_S) : int(b / VAD_FRAME_S)] = 0.9
    return p


def test_uncovered_speech_at_a_window_end_gets_a_follow_up_window():
    samples = np.zeros(40 * SAMPLE_RATE, dtype=np.float32)
    regions = [Span(0.5, 33.0)]
    probs = probabilities(40, [(0.7, 32.8)])
    # Whisper stopped at 27.6 s in a window that ran to 30 s, and the next window (30-33 s) gave nothing either
    chunks = (Chunk(0.6, 12.0, " a"), Chunk(12.0, 27.6, " b"))
    windows = follow_up_windows(regions, covered_spans(chunks), probs, 0.5, samples, 30.0)
    assert len(windows) == 1
    w = windows[0]
    # from the last timestamp on, padded by FOLLOW_UP_PAD_S + COVER_PAD_S after the region's end
    assert w.start == pytest.approx(27.6) and w.end == pytest.approx(33.25)


def test_covered_speech_silence_and_brief_noise_get_no_follow_up():
    samples = np.zeros(40 * SAMPLE_RATE, dtype=np.float32)
    regions = [Span(0.5, 10.0), Span(20.0, 25.0)]
    chunks = (Chunk(0.6, 9.9, " a"), Chunk(20.1, 24.9, " b"))
    probs = probabilities(40, [(0.7, 9.8), (20.2, 24.8)])
    assert follow_up_windows(regions, covered_spans(chunks), probs, 0.5, samples, 30.0) == []
    # an uncovered region in which the VAD heard less than FOLLOW_UP_MIN_SPEECH_S of speech: nothing
    brief = probabilities(40, [(30.0, 30.0 + FOLLOW_UP_MIN_SPEECH_S / 2)])
    assert follow_up_windows([Span(29.8, 31.0)], [], brief, 0.5, samples, 30.0) == []
    # the same region with enough speech in it: one window
    enough = probabilities(40, [(30.0, 30.6)])
    assert follow_up_windows([Span(29.8, 31.0)], [], enough, 0.5, samples, 30.0) == [Span(29.55, 31.25)]


def test_word_times_cover_more_precisely_than_their_chunk():
    words = (Word(" one", 1.0, 1.4), Word(" two", 5.0, 5.3))
    chunk = Chunk(1.0, 5.3, " one two", words=words)
    spans = covered_spans((chunk,), pad=0.1)
    assert [x for s in spans for x in (s.start, s.end)] == pytest.approx([0.9, 1.5, 4.9, 5.4])
    (whole,) = covered_spans((Chunk(1.0, 5.3, " x"),), pad=0.1)
    assert (whole.start, whole.end) == pytest.approx((0.9, 5.4))
    assert speech_seconds(probabilities(10, [(1.0, 2.0)]), Span(0.0, 10.0), 0.5) == pytest.approx(1.0, abs=0.07)
    assert chunks_in(Span(1.0, 5.0), (Chunk(0.5, 1.2, "a"), Chunk(1.0, 2.0, "b"), Chunk(5.0, 6.0, "c"))) == [
        Chunk(1.0, 2.0, "b")
    ]


@pytest.fixture(scope="module")
def longform(speech_dir):
    from speakerscribe_dev.longform import festival_longform

    return festival_longform(speech_dir, 100)


def deletions(handler, longform) -> tuple[int, float, dict]:
    from speakerscribe_dev.evaluation import normalise

    lf, _ = longform
    response = handler({"inputs": lf.wav.read_bytes()})
    out = jiwer.process_words(normalise(lf.reference), normalise(response["text"]))
    return out.deletions, out.wer, response


@pytest.mark.slow
def test_long_form_loses_no_turn_between_windows(real_models, longform, monkeypatch):
    """Seven minutes of two- and three-person conversations, ASR only: with follow-ups, fewer words are deleted
    than without them and no more than faster-whisper's sequential decoding loses on the same weights (0 of 1044
    here, `benchmarks/peers.py`; 4 allowed), and every reference turn shows up."""
    from conftest import make_handler

    from speakerscribe_dev.evaluation import normalise

    handler = make_handler(ASR_MODEL=str(real_models / "whisper-tiny.en"), DIARIZATION_MODEL=None)
    with_follow_up, wer_on, response = deletions(handler, longform)
    monkeypatch.setattr(pipeline, "MAX_FOLLOW_UP_ROUNDS", 0)
    without, wer_off, _ = deletions(handler, longform)
    assert with_follow_up <= 4, (with_follow_up, without)
    assert with_follow_up < without
    assert wer_on < wer_off and wer_on <= 0.06
    text = normalise(response["text"])
    _, conversation = longform
    for turn in conversation.turns:  # the turn whose last words were lost at a window edge is one of these
        words = normalise(turn.text).split()
        if len(words) >= 4:
            assert " ".join(words[-2:]) in text or " ".join(words[:2]) in text, turn
