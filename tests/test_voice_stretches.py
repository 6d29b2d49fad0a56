"""Single-voice stretches (speakerscribe.diarization.voice_stretches): where one voice is heard alone, cut where it
changes, read across windows whose local speakers are numbered differently; each stretch embedded on its own, so a
(window, speaker) embedding does not move when another voice of the window changes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from speakerscribe.diarization.shared_frames import FRAME_HOP
from speakerscribe.diarization.voice_stretches import (
    MAX_FRAMES,
    MIN_FRAMES,
    pieces,
    single_voice_runs,
    stretch_embeddings,
)

SEG_FRAMES = 589  # segmentation-3.0's frames in a 10 s window
HOP_S = FRAME_HOP / 16000


def segmentation(duration: float, people: dict[int, list[tuple[float, float]]], rotate: bool = True):
    """pyannote's binarized segmentation (10 s windows, 1 s step, 3 local speakers) of ``people`` (person ->
    [(start, end)] seconds); with ``rotate`` each window numbers its local speakers differently, as the model does."""
    from pyannote.core import SlidingWindow, SlidingWindowFeature

    chunks = max(1, int(np.floor(duration - 10.0)) + 1)
    data = np.zeros((chunks, SEG_FRAMES, 3), dtype=np.float32)
    times = (np.arange(SEG_FRAMES) + 0.5) * 10.0 / SEG_FRAMES
    for c in range(chunks):
        for person, spans in people.items():
            local = (person + c) % 3 if rotate else person
            for a, b in spans:
                data[c, (times + c >= a) & (times + c < b), local] = 1.0
    return SlidingWindowFeature(data, SlidingWindow(start=0.0, duration=10.0, step=1.0))


def test_runs_follow_one_voice_cut_at_overlap_changes_and_silence():
    # A alone 0-4 s, A and B 4-5 s, B alone 5-9 s, C straight after B 9-12 s, silence 12-13 s, A again 13-20 s
    people = {0: [(0.0, 5.0), (13.0, 20.0)], 1: [(4.0, 9.0)], 2: [(9.0, 12.0)]}
    n_frames = int(20.0 / HOP_S)
    runs = single_voice_runs(segmentation(20.0, people), n_frames) * HOP_S
    expected = np.array([[0.0, 4.0], [5.0, 9.0], [9.0, 12.0], [13.0, 20.0]])
    assert runs.shape == expected.shape, runs
    np.testing.assert_allclose(runs, expected, atol=0.05)


def test_a_voice_numbered_differently_in_each_window_stays_one_stretch():
    people = {0: [(0.0, 25.0)]}
    n_frames = int(25.0 / HOP_S)
    for rotate in (False, True):
        runs = single_voice_runs(segmentation(25.0, people, rotate=rotate), n_frames)
        assert runs.tolist() == [[0, n_frames]]


def test_two_voices_that_take_over_from_each_other_across_a_window_handover_are_cut():
    # the change from A to B falls between frames read from two different windows (centres 1 s apart)
    people = {0: [(0.0, 10.5)], 1: [(10.5, 20.0)]}
    runs = single_voice_runs(segmentation(20.0, people), int(20.0 / HOP_S)) * HOP_S
    np.testing.assert_allclose(runs, [[0.0, 10.5], [10.5, 20.0]], atol=0.05)


def test_pieces_drop_short_runs_and_cut_long_ones_into_near_equal_parts():
    runs = np.array([[0, MIN_FRAMES - 1], [100, 100 + MIN_FRAMES], [1000, 1000 + 2 * MAX_FRAMES + 50]])
    out = pieces(runs)
    assert out[0].tolist() == [100, 100 + MIN_FRAMES]
    long = out[1:]
    assert len(long) == 3 and long[0, 0] == 1000 and long[-1, 1] == 1000 + 2 * MAX_FRAMES + 50
    assert (long[1:, 0] == long[:-1, 1]).all()  # contiguous
    lengths = long[:, 1] - long[:, 0]
    assert lengths.max() <= MAX_FRAMES and lengths.max() - lengths.min() <= 1


@pytest.fixture(scope="module")
def campplus(random_models):
    from pyannote.audio import Model

    return Model.from_pretrained(random_models.pipeline, subfolder="embedding").eval()


def _shared(model, wave, seg):
    from speakerscribe.diarization.shared_frames import shared_frame_embeddings

    return shared_frame_embeddings(model, wave, seg, exclude_overlap=True, min_num_samples=400)[0]


def _moved(a: np.ndarray, b: np.ndarray) -> float:
    """The largest change between two sets of embeddings, relative to their size (random weights give small
    vectors)."""
    return float(np.abs(a - b).max() / np.abs(a).max())


def test_an_embedding_does_not_move_when_the_other_voice_of_its_window_changes(campplus):
    """A speaks 0-8 s, B 8-16 s: A's embeddings come from A's audio alone; the shared frames' do not."""
    rng = np.random.default_rng(0)
    seg = segmentation(16.0, {0: [(0.0, 8.0)], 1: [(8.0, 16.0)]}, rotate=False)
    wave = torch.from_numpy(rng.normal(0, 0.1, 16 * 16000).astype(np.float32))[None]
    other = wave.clone()
    other[:, 8 * 16000 :] = torch.from_numpy(rng.normal(0, 0.4, 8 * 16000).astype(np.float32)) * torch.sin(
        torch.arange(8 * 16000) / 40.0
    )
    with torch.inference_mode():
        shared, shared_other = _shared(campplus, wave, seg), _shared(campplus, other, seg)
        ours = stretch_embeddings(campplus, wave, seg, shared)
        ours_other = stretch_embeddings(campplus, other, seg, shared_other)
    assert ours.shape == shared.shape and np.isfinite(ours).all()
    a = 0  # local speaker of A in every window (rotate=False)
    np.testing.assert_allclose(ours[:, a], ours_other[:, a], rtol=1e-4, atol=1e-8)
    # the test can fail: the shared frames of A's speech do carry B's audio
    assert _moved(shared[:, a], shared_other[:, a]) > 0.02
    # B's own embeddings follow B's audio
    assert _moved(ours[:, 1], ours_other[:, 1]) > 0.02


def test_a_speaker_heard_only_over_another_keeps_its_shared_frame_embedding(campplus):
    # C speaks only while A speaks: no single-voice frame of C's anywhere
    seg = segmentation(12.0, {0: [(0.0, 12.0)], 2: [(3.0, 6.0)]}, rotate=False)
    wave = torch.from_numpy(np.random.default_rng(1).normal(0, 0.1, 12 * 16000).astype(np.float32))[None]
    with torch.inference_mode():
        shared = _shared(campplus, wave, seg)
        ours = stretch_embeddings(campplus, wave, seg, shared)
    np.testing.assert_array_equal(ours[:, 2], shared[:, 2])
    assert _moved(ours[:, 0], shared[:, 0]) > 0.02  # A has stretches: its own embedding


def test_silence_everywhere_keeps_the_shared_embeddings(campplus):
    seg = segmentation(11.0, {})
    wave = torch.zeros(1, 11 * 16000)
    shared = np.random.default_rng(2).normal(size=(seg.data.shape[0], 3, 192)).astype(np.float32)
    np.testing.assert_array_equal(stretch_embeddings(campplus, wave, seg, shared), shared)


def test_the_pipeline_clusters_stretch_embeddings_when_asked(random_models):
    from pyannote.audio import Pipeline
    from pyannote.audio.utils.signal import binarize
    from test_handler import speechlike

    from speakerscribe.diarization.pyannote_pipeline import build

    pipeline = build(Pipeline.from_pretrained(random_models.pipeline))
    file = {"waveform": torch.from_numpy(speechlike(23.0))[None], "sample_rate": 16000, "uri": "x"}
    seg = pipeline.get_segmentations(file)
    binary = seg if pipeline._segmentation.model.specifications.powerset else binarize(seg)
    pipeline.voice_stretches = False
    off = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    pipeline.voice_stretches = True
    on = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    assert on.shape == off.shape and np.isfinite(on).all()
    # a segmentation that hears two voices taking turns (the random model's may hear no voice alone anywhere)
    binary = segmentation(23.0, {0: [(0.0, 9.0), (15.0, 23.0)], 1: [(9.0, 15.0)]}, rotate=False)
    pipeline.voice_stretches = False
    off = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    pipeline.voice_stretches = True
    on = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    assert on.shape == off.shape and np.isfinite(on).all() and _moved(on[:, 0], off[:, 0]) > 0.02
    assert pipeline.last_frames is not None  # the shared frames stay for the second pass and naming
    shared_frames = pipeline.last_frames.clone()
    pipeline.stretch_frames_downstream = True
    again = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    np.testing.assert_array_equal(again, on)
    assert (pipeline.last_frames != shared_frames).any()  # the stretches' frames, for what pools downstream


def test_stretch_frames_replace_the_shared_frames_only_where_a_stretch_filled_them(campplus):
    """frames_into: A alone 0-8 s, silence 8-10 s, B alone 10-16 s; the shared frames in the silence and at each
    stretch's first frame stay, the frames inside the stretches become those of A's and B's audio alone."""
    from speakerscribe.diarization.shared_frames import shared_frame_embeddings

    rng = np.random.default_rng(3)
    seg = segmentation(16.0, {0: [(0.0, 8.0)], 1: [(10.0, 16.0)]}, rotate=False)
    wave = torch.from_numpy(rng.normal(0, 0.1, 16 * 16000).astype(np.float32))[None]
    with torch.inference_mode():
        shared, frames = shared_frame_embeddings(campplus, wave, seg, exclude_overlap=True, min_num_samples=400)
        before = frames.clone()
        plain = stretch_embeddings(campplus, wave, seg, shared)
        ours = stretch_embeddings(campplus, wave, seg, shared, frames_into=frames)
        alone_b = campplus.campplus.frames(campplus.compute_fbank(wave[None, :, 10 * 16000 : 16 * 16000]))[0]
    np.testing.assert_array_equal(ours, plain)  # the embeddings do not depend on where the frames go
    changed = (frames != before).any(dim=0).numpy()
    silence = slice(int(8.2 / HOP_S), int(9.8 / HOP_S))
    assert not changed[silence].any()
    b0 = int(round(10.0 / HOP_S))
    assert not changed[b0] and changed[b0 + 1 : b0 + 200].all()
    # inside B's stretch the frames are B's audio embedded alone
    np.testing.assert_allclose(frames[:, b0 + 1 : b0 + 200].float(), alone_b[:, 1:200].float(), rtol=1e-3, atol=1e-5)
