"""Recovery from Whisper failures: loop detection on hand-built token lists, keeping the text before a loop,
choosing among attempts, and the temperature fallback on a model whose every window fails (random weights)."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from audio_helpers import wav_bytes

from speakerscribe.asr.decoded import Decoded as _Decoded
from speakerscribe.asr.recovery import best_attempt as _best_attempt
from speakerscribe.asr.recovery import cut_loop as _cut_loop
from speakerscribe.asr.recovery import keep_before_loop as _keep_before_loop
from speakerscribe.asr.tokens import RawSegment, ends_in_loop, find_loop
from speakerscribe.options import AsrOptions
from speakerscribe.records import Span

YEAH, COMMA = 101, 102
SENTENCE = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]


def test_find_loop_finds_the_first_copy_of_a_repeated_block():
    tokens = SENTENCE + [YEAH, COMMA] * 8
    assert find_loop(tokens) == (len(SENTENCE), 2)
    assert tokens[: len(SENTENCE) + 2] == SENTENCE + [YEAH, COMMA]


def test_find_loop_single_token_and_long_period():
    assert find_loop([1, 2, 3] + [7] * 12) == (3, 1)
    block = list(range(200, 220))  # a 20-token sentence said four times
    assert find_loop([1, 2] + block * 4) == (2, 20)


@pytest.mark.parametrize(
    "tokens",
    [
        SENTENCE * 2,  # said twice: not a loop
        [YEAH, COMMA] * 3 + SENTENCE,  # "yeah, yeah, yeah," is speech
        [7] * 11,  # below the minimum repeated length
        list(range(60)),
    ],
)
def test_ordinary_speech_is_not_a_loop(tokens):
    assert find_loop(tokens) is None
    assert not ends_in_loop(tokens)


def test_ends_in_loop_only_at_the_tail():
    looping = SENTENCE + [YEAH, COMMA] * 6
    assert ends_in_loop(looping)
    assert not ends_in_loop(looping + SENTENCE)  # the loop ended: decoding goes on


def _decoded(segments, loops=True, compression=3.0, logprob=-0.5, window=Span(10.0, 40.0)):
    return _Decoded(
        window=window,
        segments=list(segments),
        loops=loops,
        compression_ratio=compression,
        avg_logprob=logprob,
        text="x",
    )


def test_keep_before_loop_keeps_whole_segments_and_returns_the_rest_of_the_window():
    d = _decoded(
        [
            RawSegment(0.0, 4.0, tuple(SENTENCE)),
            RawSegment(4.5, 9.0, tuple(SENTENCE[:5])),
            RawSegment(9.0, None, tuple([YEAH, COMMA] * 10)),
        ]
    )
    rest = _keep_before_loop(d)
    assert [s.token_ids for s in d.segments] == [tuple(SENTENCE), tuple(SENTENCE[:5])]
    assert rest == Span(19.0, 40.0)
    assert not d.loops


def test_keep_before_loop_when_repeated_segments_loop():
    sentence = tuple(range(300, 330))  # too long a period for find_loop: caught as a repeated segment
    d = _decoded([RawSegment(0.0, 3.0, (1, 2, 3)), *[RawSegment(3.0 + 2 * k, 5.0 + 2 * k, sentence) for k in range(4)]])
    rest = _keep_before_loop(d)
    assert len(d.segments) == 2 and rest == Span(15.0, 40.0)


def test_cut_loop_keeps_one_copy_and_opens_the_segment():
    d = _decoded([RawSegment(0.0, 2.0, tuple(SENTENCE)), RawSegment(2.0, None, tuple([YEAH, COMMA] * 10))])
    _cut_loop(d)
    assert [s.token_ids for s in d.segments] == [tuple(SENTENCE), (YEAH, COMMA)]
    assert d.segments[-1].end is None and not d.loops


def test_best_attempt_prefers_the_most_likely_attempt_that_does_not_repeat():
    opts = AsrOptions()
    looping = _decoded([], loops=True, compression=1.5, logprob=-0.2)
    repetitive = _decoded([], loops=False, compression=2.9, logprob=-0.3)
    unsure = _decoded([], loops=False, compression=1.4, logprob=-1.4)
    less_unsure = _decoded([], loops=False, compression=1.6, logprob=-1.1)
    assert _best_attempt([looping, repetitive, unsure, less_unsure], opts) is less_unsure
    assert _best_attempt([looping, repetitive], opts) is repetitive


def test_failure_signals_follow_whisper():
    opts = AsrOptions()
    seg = [RawSegment(0.0, 1.0, (1,))]
    assert _decoded(seg, loops=False, compression=2.5, logprob=-0.1).failed(opts)
    assert _decoded(seg, loops=False, compression=1.5, logprob=-1.2).failed(opts)
    assert _decoded(seg, loops=True, compression=1.5, logprob=-0.1).failed(opts)
    assert not _decoded(seg, loops=False, compression=1.5, logprob=-0.5).failed(opts)
    silence = _decoded(seg, loops=False, compression=1.5, logprob=-1.5)
    silence.no_speech_prob = 0.9
    assert not silence.failed(opts)  # silence is gated, not retried


def test_failing_windows_are_decoded_again_at_each_temperature_deterministically(random_handler, caplog):
    """Random weights: every window is low-confidence, so every fallback temperature is tried; sampling is
    seeded, so the same request gives the same words."""
    rng = np.random.default_rng(3)
    clip = wav_bytes(0.3 * np.sin(2 * np.pi * 180 * np.arange(3 * 16000) / 16000) + 0.05 * rng.standard_normal(48000))
    body = {"inputs": clip, "parameters": {"vad_filter": False}}
    with caplog.at_level(logging.INFO, logger="speakerscribe.asr"):
        first = random_handler(body)
    attempts = [r.getMessage() for r in caplog.records if "attempts" in r.getMessage()]
    assert attempts and "6 attempts" in attempts[0]
    assert random_handler(body)["text"] == first["text"]


def _fake_engine(shares: bool = False):
    class Engine:
        min_new_tokens = None
        assistant = None

        def tight_loop(self, assistant=None):
            return True

        def shares_windows(self):
            return shares

    return Engine()


def test_fallback_temperatures_are_decoded_side_by_side_and_the_first_that_passes_is_kept(monkeypatch):
    """Two windows fail greedy decoding: every fallback temperature of both is decoded in ONE call, a row each;
    a window keeps its first passing attempt (not a likelier later one), one that never passes keeps the best."""
    import speakerscribe.asr.recovery as recovery
    from speakerscribe.asr.decoded import DecodePlan

    opts = AsrOptions()
    windows = [Span(0.0, 30.0), Span(30.0, 60.0), Span(60.0, 90.0)]
    seg = [RawSegment(0.0, 1.0, (1,))]
    # window -> temperature -> avg log-prob of that attempt (>= -1 passes)
    logprob = {0: {0.0: -1.5, 0.2: -1.3, 0.4: -0.8, 0.6: -0.2}, 1: {0.0: -0.3}, 2: {0.0: -2.0, 0.8: -1.1}}
    calls = []

    def attempt(engine, enc, ws, prompt, o, words, clock, temperature, assistant=None, shared=None):
        calls.append((list(enc), temperature))
        temps = temperature if isinstance(temperature, tuple) else (temperature,) * len(ws)
        rows = enc if shared is None else [enc[k] for k in shared]  # each window's states once, read by its rows
        out = []
        for w, t, row in zip(ws, temps, rows):
            lp = logprob[row].get(t, -1.2)
            out.append(_Decoded(window=w, segments=list(seg), temperature=t, avg_logprob=lp, text="x"))
        return out

    monkeypatch.setattr(recovery.decoding, "attempt", attempt)
    monkeypatch.setattr(recovery.features, "prompt_ids", lambda *a: [1])
    monkeypatch.setattr(recovery, "select_rows", lambda enc, rows: [enc[i] for i in rows])
    out = recovery.decode_batch(_fake_engine(), [0, 1, 2], windows, "en", opts, DecodePlan(), lambda *a: None)
    hotter = (0.2, 0.4, 0.6, 0.8, 1.0)
    assert calls == [([0, 1, 2], 0.0), ([0] * 5 + [2] * 5, hotter * 2)]
    # window 0 passes first at 0.4 (0.6 is likelier, and not kept); window 2 never passes: its likeliest, 0.8
    assert [d.temperature for d in out] == [0.4, 0.0, 0.8]
    # where the engine can, a window's rows share its encoder states: each window once, the same attempts kept
    calls.clear()
    out = recovery.decode_batch(_fake_engine(True), [0, 1, 2], windows, "en", opts, DecodePlan(), lambda *a: None)
    assert calls == [([0, 1, 2], 0.0), ([0, 2], hotter * 2)]
    assert [d.temperature for d in out] == [0.4, 0.0, 0.8]
    # a batch too small for one window's temperatures: they go in turn, each for the windows still failing
    calls.clear()
    out = recovery.decode_batch(
        _fake_engine(), [0, 1, 2], windows, "en", opts, DecodePlan(batch_size=4), lambda *a: None
    )
    assert [c[1] for c in calls] == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert [c[0] for c in calls][1:3] == [[0, 2], [0, 2]] and calls[3][0] == [2]
    assert [d.temperature for d in out] == [0.4, 0.0, 0.8]
