"""Speech regions and the windows Whisper decodes."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.audio.vad import FRAME_S, heard_only_briefly, speech_regions
from speakerscribe.audio.windows import plan_windows, quietest_cut, uncovered
from speakerscribe.options import VadOptions
from speakerscribe.records import Span


def probs_from(spec, total_s):
    p = np.zeros(int(total_s / FRAME_S))
    for s, e, v in spec:
        p[int(s / FRAME_S) : int(e / FRAME_S)] = v
    return p


def test_hysteresis_padding_and_gap_closing():
    p = probs_from([(1, 2, 0.9), (2, 2.3, 0.4), (2.6, 3, 0.9), (5, 5.1, 0.9), (7, 7.5, 0.4), (9, 10, 0.8)], 12)
    opts = VadOptions(threshold=0.5, neg_threshold=0.35, min_speech_s=0.25, min_silence_s=0.5, pad_s=0.2)
    regions = speech_regions(p, 12.0, opts)
    # 1-2.3 (0.4 continues the run) and 2.6-3 merge (gap 0.3 < 0.5 after padding); 5-5.1 is too short;
    # 7-7.5 never reaches the threshold; 9-10 stands alone
    got = [(r.start, r.end) for r in regions]
    assert len(got) == 2
    for (a, b), (ea, eb) in zip(got, [(0.8, 3.2), (8.8, 10.2)]):
        assert a == pytest.approx(ea, abs=FRAME_S) and b == pytest.approx(eb, abs=FRAME_S)


def test_regions_are_clipped_to_the_audio():
    p = probs_from([(0, 1, 0.9)], 1.0)
    regions = speech_regions(p, 0.99)
    assert regions[0].start == 0.0 and regions[0].end == pytest.approx(0.99)


def test_no_speech_gives_no_regions():
    assert speech_regions(np.zeros(100), 3.2) == [] and speech_regions(np.zeros(0), 0.0) == []


def test_windows_pack_regions_without_exceeding_the_limit():
    samples = np.random.default_rng(0).normal(size=16000 * 100).astype(np.float32)
    regions = [Span(0, 5), Span(6, 12), Span(20, 29), Span(31, 95)]
    windows = plan_windows(regions, samples, 30.0)
    assert all(w.end - w.start <= 30.0 + 1e-9 for w in windows)
    assert windows[0] == Span(0, 29)
    # every region is covered, windows are ordered and disjoint
    for r in regions:
        covered = sum(max(0.0, min(w.end, r.end) - max(w.start, r.start)) for w in windows)
        assert covered == pytest.approx(r.end - r.start)
    assert all(a.end <= b.start for a, b in zip(windows, windows[1:]))


def test_long_region_is_cut_at_the_quietest_point():
    rate = 16000
    samples = np.ones(rate * 40, dtype=np.float32)
    samples[int(27.0 * rate) : int(27.1 * rate)] = 0.0  # a pause inside the search range
    windows = plan_windows([Span(0, 40)], samples, 30.0)
    assert 27.0 <= windows[0].end <= 27.1
    assert windows[1].start == windows[0].end and windows[-1].end == 40


def test_a_long_region_fills_the_window_its_predecessor_left_open():
    """Long regions back to back (meetings: speech with no pause the VAD closes): each is cut where the open window
    ends, not from its own start, so no window holds only the second or two a cut left over; a region that fits in
    a window of its own is not cut when the open window has little room, it starts the next one."""
    rate = 16000
    samples = np.ones(rate * 130, dtype=np.float32)
    for pause in np.arange(1.0, 130.0, 1.0):  # a pause every second: any cut can fall on one
        samples[int(pause * rate) : int((pause + 0.05) * rate)] = 0.0
    regions = [Span(0.0, 31.0), Span(31.5, 62.5), Span(63.0, 94.0), Span(94.5, 125.5)]
    windows = plan_windows(regions, samples, 30.0)
    assert all(w.end - w.start <= 30.0 + 1e-9 for w in windows)
    assert all(a.end <= b.start for a, b in zip(windows, windows[1:]))
    for r in regions:
        covered = sum(max(0.0, min(w.end, r.end) - max(w.start, r.start)) for w in windows)
        assert covered == pytest.approx(r.end - r.start)
    # 125.5 s of audio: five windows (each long region cut from its own start would make eight)
    assert len(windows) == 5
    assert min(w.end - w.start for w in windows[:-1]) >= 26.0
    # a 20 s region after 25 s of speech: no cut inside it, it opens the next window
    short = plan_windows([Span(0.0, 25.0), Span(25.5, 45.5)], samples, 30.0)
    assert short == [Span(0.0, 25.0), Span(25.5, 45.5)]


def test_quietest_cut_on_an_empty_range_returns_the_limit():
    assert quietest_cut(np.zeros(100, dtype=np.float32), 1.0, 1.0) == 1.0


def test_uncovered_is_the_union_of_spans_minus_covered_pieces_long_enough_and_padded():
    spans = [Span(0.0, 3.0), Span(2.0, 5.0), Span(8.0, 8.5), Span(10.0, 14.0)]
    covered = [Span(1.0, 2.5), Span(11.0, 11.5)]
    got = uncovered(spans, covered, min_len=0.8, pad=0.1)
    # [0, 1) and [2.5, 5) of the first union, [10, 11) and [11.5, 14); [8, 8.5) is too short
    assert got == [Span(0.0, 1.0), Span(2.5, 5.1), Span(9.9, 11.0), Span(11.5, 14.1)]


def test_uncovered_never_pads_into_covered_speech_and_is_empty_when_all_is_covered():
    assert uncovered([Span(0.0, 4.0)], [Span(0.0, 4.0)], 0.5) == []
    assert uncovered([], [Span(0.0, 1.0)], 0.5) == []
    got = uncovered([Span(0.0, 10.0)], [Span(2.95, 3.0), Span(4.0, 10.0)], min_len=0.5, pad=0.2)
    assert got == [Span(0.0, 2.95), Span(3.0, 4.0)]
    assert uncovered([Span(5.0, 7.0)], [], 0.5, pad=0.5) == [Span(4.5, 7.5)]


@pytest.mark.parametrize("seed", range(20))
def test_uncovered_against_a_sampled_timeline(seed):
    rng = np.random.default_rng(seed)

    def random_spans(n, length):
        starts = np.sort(rng.uniform(0, 100, n))
        return [Span(float(a), float(a + d)) for a, d in zip(starts, rng.uniform(0.05, length, n))]

    spans, covered = random_spans(15, 8.0), random_spans(int(rng.integers(0, 40)), 1.5)
    got = uncovered(spans, covered, min_len=0.8, pad=0.1)
    t = np.arange(0, 110, 0.01) + 0.005

    def inside(xs):
        return np.any([(t >= x.start) & (t < x.end) for x in xs], axis=0) if xs else np.zeros(t.size, bool)

    speech, heard, out = inside(spans), inside(covered), inside(got)
    assert not np.any(out & heard)  # never into covered time
    # every uncovered stretch of speech at least min_len long is in the output
    gap = speech & ~heard
    edges = np.flatnonzero(np.diff(np.concatenate([[0], gap.astype(int), [0]])))
    for a, b in zip(edges[::2], edges[1::2]):
        if (b - a) * 0.01 >= 0.8 + 0.02:
            assert out[a:b].all()
    # and nothing far from uncovered speech: output within pad of it
    near = np.convolve(gap.astype(int), np.ones(2 * 10 + 3, int), mode="same") > 0
    assert np.all(out <= near)
    assert all(x.end > x.start for x in got) and all(p.end < q.start for p, q in zip(got, got[1:]))


def test_speech_heard_only_in_moments_too_short_for_a_region_is_told_apart_from_noise():
    opts = VadOptions()
    quiet = np.full(940, 0.05)
    quiet[[100, 300, 301, 700]] = [0.64, 0.55, 0.2, 0.6]  # far-field speech: scattered frames over the threshold
    regions = speech_regions(quiet, 30.0, opts)
    assert regions == [] and heard_only_briefly(quiet, regions, opts)
    noisy = np.full(940, 0.3)  # steady noise under the threshold
    assert not heard_only_briefly(noisy, speech_regions(noisy, 30.0, opts), opts)
    assert not heard_only_briefly(np.zeros(940), [], opts) and not heard_only_briefly(np.zeros(0), [], opts)
    speech = np.full(940, 0.05)
    speech[100:140] = 0.9  # a region: nothing brief about it
    regions = speech_regions(speech, 30.0, opts)
    assert regions and not heard_only_briefly(speech, regions, opts)


def test_several_clips_in_one_batch_get_what_each_gets_alone():
    """SileroVAD.probabilities_of runs the streams of several waveforms as one batch (known speakers' clips): each
    clip's probabilities equal those of its own call, for clips of one stream, of many streams, and empty."""
    from speakerscribe.audio.vad import FRAME, SileroVAD

    rng = np.random.default_rng(3)
    t = np.arange(40 * 16000) / 16000
    voiced = (np.sin(2 * np.pi * 1.5 * t) > 0) * np.sin(2 * np.pi * 180 * t) * 0.4
    audio = (voiced + 0.01 * rng.standard_normal(t.size)).astype(np.float32)
    clips = [audio[: 5 * 16000 + 123], audio[16000:32000], audio, audio[:700], np.zeros(0, np.float32)]
    vad = SileroVAD()
    together = vad.probabilities_of(clips)
    assert [len(p) for p in together] == [-(-len(c) // FRAME) for c in clips]
    for clip, batched in zip(clips, together):
        np.testing.assert_allclose(batched, vad.probabilities(clip), atol=1e-5)
    assert vad.probabilities_of([]) == []


def _frame_by_frame(model, samples, streams, warm):
    """Silero's own model called step by step on a batch of ``streams`` rows, each row one equal part of
    ``samples`` preceded by ``warm`` frames of the audio before it (silence before the start and after the end):
    the model carries each row's context and state itself, from zeros. Per frame of ``samples``."""
    import torch

    from speakerscribe.audio.vad import FRAME

    n = -(-len(samples) // FRAME)
    frames = np.zeros((n + 1, FRAME), np.float32)  # the last row: silence
    frames.reshape(-1)[: len(samples)] = samples
    per = -(-n // streams)
    first = np.arange(streams) * per - warm
    model.reset_states()
    out = []
    with torch.inference_mode():
        for k in range(per + warm):
            index = first + k
            batch = frames[np.where((index >= 0) & (index < n), index, n)]
            out.append(model(torch.from_numpy(batch), 16000).reshape(-1).numpy())
    model.reset_states()
    return np.stack(out, axis=1)[:, warm:].reshape(-1)[:n]


def test_the_front_end_once_over_the_file_gives_what_the_model_gives_frame_by_frame(meeting):
    """The front end run once over every frame, the recurrent cell stepping alone: what silero's own model gives
    when called frame by frame, with one stream and with parallel streams warmed up on the second before their part
    (whose first frame the model reads after silence)."""
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.audio.vad import SileroVAD, _StreamPlan

    samples = decode_audio(meeting.wav.read_bytes()).waveform.samples
    for streams in (1, 64):
        vad = SileroVAD(streams=streams)
        plan = _StreamPlan(samples, streams, vad.warmup_frames)
        own = _frame_by_frame(vad.model, samples, plan.n_streams, plan.warm)
        got = vad.probabilities(samples)
        assert len(got) == len(own) and np.abs(got - own).max() < 1e-5, streams
        assert (own > 0.5).mean() > 0.3  # speech was heard: the comparison covers both kinds of frame
    assert plan.n_streams > 4  # ... and the second time, parts were stepped side by side


def test_a_silero_model_without_the_pieces_used_is_a_load_error_naming_the_version(monkeypatch):
    import torch

    from speakerscribe.audio import vad
    from speakerscribe.errors import ModelLoadError

    class Outer(torch.nn.Module):
        def forward(self, x, sr):
            return x

    monkeypatch.setattr(torch.jit, "load", lambda *a, **k: Outer())
    with pytest.raises(ModelLoadError, match=r"no run_extractors, encoder, decoder: silero-vad >= 5.1"):
        vad.SileroVAD()
