"""Whisper token parsing, word grouping and the DTW used for word timing."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from speakerscribe.asr.alignment import dtw_path, token_start_times
from speakerscribe.asr.tokens import split_segments, text_token_ids

EOS, TS = 100, 200  # text ids < 100, specials 100..199, timestamps >= 200 (0.02 s steps)


def ts(seconds: float) -> int:
    return TS + int(round(seconds / 0.02))


def test_segments_between_timestamp_pairs():
    ids = [ts(0), 1, 2, ts(1.0), ts(1.0), 3, ts(2.5), EOS, EOS]
    segs = split_segments(ids, TS, EOS)
    assert [(s.start, s.end, s.token_ids) for s in segs] == [(0.0, 1.0, (1, 2)), (1.0, 2.5, (3,))]


def test_unclosed_last_segment_keeps_its_text_with_null_end():
    segs = split_segments([ts(0.5), 1, 2, ts(3.0), ts(3.2), 4, 5], TS, EOS)
    assert segs[-1].token_ids == (4, 5) and segs[-1].start == pytest.approx(3.2) and segs[-1].end is None


def test_text_without_any_timestamp_is_one_open_segment():
    segs = split_segments([1, 2, 3, EOS], TS, EOS)
    assert [(s.start, s.end, s.token_ids) for s in segs] == [(0.0, None, (1, 2, 3))]


def test_special_tokens_are_skipped_and_eos_ends_parsing():
    segs = split_segments([150, ts(0), 1, 150, 2, ts(1), EOS, 7, ts(2)], TS, EOS)
    assert [(s.start, s.end, s.token_ids) for s in segs] == [(0.0, 1.0, (1, 2))]
    assert text_token_ids([150, 1, ts(0), 2, EOS, 3], EOS) == [1, 2]


def test_empty_output_gives_no_segments():
    assert split_segments([], TS, EOS) == [] and split_segments([ts(0), ts(0.4), EOS], TS, EOS) == []


def _brute_force_dtw_cost(cost: np.ndarray) -> float:
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0
    for i, j in itertools.product(range(1, n + 1), range(1, m + 1)):
        acc[i, j] = cost[i - 1, j - 1] + min(acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1])
    return acc[n, m]


@pytest.mark.parametrize("shape", [(1, 1), (1, 7), (7, 1), (5, 9), (9, 5), (12, 40)])
def test_dtw_path_is_optimal_and_monotonic(shape):
    rng = np.random.default_rng(sum(shape))
    cost = rng.normal(size=shape)
    rows, cols = dtw_path(cost)
    assert rows[0] == 0 and cols[0] == 0 and rows[-1] == shape[0] - 1 and cols[-1] == shape[1] - 1
    steps = np.stack([np.diff(rows), np.diff(cols)], axis=1)
    assert all(tuple(s) in {(0, 1), (1, 0), (1, 1)} for s in steps)
    assert cost[rows, cols].sum() == pytest.approx(_brute_force_dtw_cost(cost))


def test_token_times_follow_a_diagonal_attention_pattern():
    heads, tokens, frames = 2, 5, 100
    w = np.full((heads, tokens, frames), 0.001)
    peaks = [5, 20, 40, 60, 80]
    for t, p in enumerate(peaks):
        w[:, t, p : p + 10] = 1.0
    times = token_start_times(w, frames)
    assert np.all(np.diff(times) >= 0)
    assert times[1:] == pytest.approx([p * 0.02 for p in peaks[1:]], abs=0.2)
