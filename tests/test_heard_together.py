"""heard_together: which speakers of a finished diarization the segmentation model heard in one window, and the
rule that folds a small speaker never heard beside the voice nearest to theirs (issue 26)."""

from __future__ import annotations

import time

import numpy as np
import pytest

from speakerscribe.diarization.heard_together import WindowedSegmentation, heard_together
from speakerscribe.diarization.speaker_folding import apart_strays, fold_speakers
from speakerscribe.records import SpeakerTurn, Waveform
from speakerscribe.runtime import Placement

FRAMES = 100  # frames per 10 s window (0.1 s each)


def _segmentation(end: float, voices: list[list[tuple[float, float]]], step: float = 1.0) -> WindowedSegmentation:
    """10 s windows every ``step`` s over [0, end]; local speaker s of every window is active where ``voices[s]``
    (absolute spans) says, as the segmentation model gives one local speaker to one voice."""
    starts = np.arange(0.0, max(end - 10.0, 0.0) + 1e-9, step)
    data = np.zeros((len(starts), FRAMES, len(voices)), dtype=np.float32)
    t = starts[:, None] + (np.arange(FRAMES) + 0.5) * 10.0 / FRAMES
    for s, spans in enumerate(voices):
        for a, b in spans:
            data[:, :, s] += (t >= a) & (t < b)
    return WindowedSegmentation(np.minimum(data, 1.0), 0.0, 10.0, step)


def _turns(*spans) -> list[SpeakerTurn]:
    return [SpeakerTurn(a, b, s) for a, b, s in spans]


def test_a_piece_of_one_voice_is_never_heard_beside_it_two_people_are():
    # A speaks 0-10 and 16-26; B 10-16 and 26-42; the clustering called B's 10-16 "C"
    turns = _turns((0, 10, "A"), (10, 16, "C"), (16, 26, "A"), (26, 42, "B"))
    segmentation = _segmentation(42.0, [[(0, 10), (16, 26)], [(10, 16), (26, 42)]])
    together, present = heard_together(segmentation, turns, ["A", "B", "C"])
    assert together[2, 1] == together[1, 2] == 0  # C (B's own voice) is never heard beside B
    assert together[2, 0] > 0 and together[0, 1] > 0
    assert (together == together.T).all() and (np.diag(together) == 0).all()
    assert present.tolist() == [(segmentation.data[:, :, 0].sum(1) >= 10).sum(), present[1], present[2]]
    assert present[2] > 0
    # the segmentation heard C as a third voice, and in a window beside B: two people
    third = _segmentation(42.0, [[(0, 10), (16, 26)], [(26, 42)], [(10, 16)]], step=0.5)
    turns_b = _turns((0, 10, "A"), (10, 16, "C"), (16, 26, "A"), (26, 32, "B"), (32, 35, "C"), (35, 42, "B"))
    third.data[:, :, 2] = np.maximum(third.data[:, :, 2], _segmentation(42.0, [[(32, 35)]], step=0.5).data[:, :, 0])
    third.data[:, :, 1] *= 1 - _segmentation(42.0, [[(32, 35)]], step=0.5).data[:, :, 0]
    together, _ = heard_together(third, turns_b, ["A", "B", "C"])
    assert together[2, 1] > 0


def test_a_local_speaker_counts_only_with_enough_frames_on_someones_turn():
    turns = _turns((0, 9.5, "A"), (9.5, 10, "B"))
    segmentation = _segmentation(10.0, [[(0, 9.5)], [(9.5, 10)]])  # B: half a second of a 10 s window
    together, present = heard_together(segmentation, turns, ["A", "B"])
    assert present.tolist() == [1, 0] and together.sum() == 0
    together, present = heard_together(segmentation, turns, ["A", "B"], min_active=0.05)
    assert present.tolist() == [1, 1] and together[0, 1] == 1
    # active frames on nobody's turn (a voice the diarization dropped) give no label
    together, present = heard_together(segmentation, _turns((0, 9.5, "A")), ["A", "B"], min_active=0.05)
    assert present.tolist() == [1, 0]


@pytest.mark.parametrize(
    "data",
    [np.zeros((0, FRAMES, 3)), np.zeros((4, FRAMES, 0)), np.zeros((4, FRAMES)), np.full((2, FRAMES, 3), np.nan)],
)
def test_degenerate_segmentations_give_no_evidence(data):
    together, present = heard_together(WindowedSegmentation(data, 0.0, 10.0, 1.0), _turns((0, 5, "A")), ["A", "B"])
    assert together.sum() == 0 and present.sum() == 0 and together.shape == (2, 2)
    assert heard_together(WindowedSegmentation(data, 0.0, 10.0, 1.0), [], [])[0].shape == (0, 0)


def test_an_hour_with_many_speakers_is_bounded():
    rng = np.random.default_rng(0)
    windows, local = 3600, 3
    data = (rng.random((windows, 589, local)) > 0.6).astype(np.float32)
    labels = [f"S{k:02d}" for k in range(64)]
    turns = [SpeakerTurn(float(t), float(t) + 0.9, labels[int(rng.integers(64))]) for t in range(3610)]
    start = time.perf_counter()
    together, present = heard_together(WindowedSegmentation(data, 0.0, 10.0, 1.0), turns, labels)
    assert time.perf_counter() - start < 60  # a bound against a runaway, not a speed claim (about 1 s here)
    assert together.shape == (64, 64) and present.max() <= windows


# speakers: A, B, a small speaker whose voice is nearest B's, a small one nearest A's
VOICES = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.3, 0.6, 0.74], [0.9, 0.0, 0.43]])
SECONDS = np.array([40.0, 40.0, 6.0, 7.0])


def test_a_small_speaker_never_heard_beside_their_nearest_voice_is_a_piece_of_it():
    together = np.array([[0, 9, 3, 2], [9, 0, 0, 4], [3, 0, 0, 1], [2, 4, 1, 0]])
    # C (nearest B) never beside B, heard beside A and D: a piece of B; D (nearest A) heard beside A: a person
    marked = apart_strays(VOICES, SECONDS, together, share=0.15, max_s=30.0)
    assert marked.tolist() == [False, False, True, False]
    assert fold_speakers(VOICES, SECONDS, marked=marked).tolist() == [0, 1, 1, 3]
    # heard beside A but never beside D either: someone who says little is heard beside few, no evidence
    few = together.copy()
    few[2, 3] = few[3, 2] = 0
    assert not apart_strays(VOICES, SECONDS, few, share=0.15, max_s=30.0).any()
    # never heard beside anyone: no evidence either way
    alone = together.copy()
    alone[2, :] = alone[:, 2] = 0
    assert not apart_strays(VOICES, SECONDS, alone, share=0.15, max_s=30.0).any()
    # holding a share of the speech or more seconds than max_s: a person, whatever the windows say
    assert not apart_strays(VOICES, np.array([40.0, 40.0, 16.0, 7.0]), together, share=0.15, max_s=30.0).any()
    assert not apart_strays(VOICES, SECONDS, together, share=0.15, max_s=5.0).any()
    # with two speakers the evidence says nothing
    assert not apart_strays(VOICES[:2], SECONDS[:2], np.zeros((2, 2), int), share=0.15, max_s=30.0).any()


def test_marked_and_smallest_fold_together_never_below_least():
    marked = np.array([False, False, False, True])  # D marked, C the smallest: both fold, each into its nearest
    assert fold_speakers(VOICES, SECONDS, fold=1, marked=marked).tolist() == [0, 1, 1, 0]
    assert fold_speakers(VOICES, SECONDS, fold=1, marked=marked, least=3).tolist() == [0, 1, 1, 3]  # smallest first
    only_c = np.array([False, False, True, False])
    assert fold_speakers(VOICES, SECONDS, fold=1, marked=only_c).tolist() == [0, 1, 1, 3]  # C asked twice: once
    assert len(set(fold_speakers(VOICES, SECONDS, marked=np.ones(4, bool)).tolist())) == 1  # least: one


class _Clustering:
    last_segmentations = None


class _WindowPipeline:
    """Stands in for pyannote's pipeline as the service runs it: A speaks 0-10 and 16-26 s, B 10-16 and 26-42 s; the
    clustering called B's 10-16 s "SPEAKER_02" (6 s, 14% of the speech: above the plain stray share), whose CAM++
    frames (20 ms) sound nearer B than A, not alike enough to join B on sound alone. The segmentation gives B one
    local speaker throughout. ``third``: that voice is a person of their own, a third local speaker, who speaks at
    10-15 s and again at 30-31 s, in windows beside B."""

    VOICE = {0: [1.0, 0.0, 0.0], 1: [0.0, 1.0, 0.0], 2: [0.3, 0.6, 0.74]}

    def __init__(self, third: bool = False, split_on_count: bool = False):
        self.clustering = _Clustering()
        self.split_on_count = split_on_count  # without a count that voice is labelled as B (or as A, when a person)
        if third:
            self.spans = ((0, 10, 0), (10, 15, 2), (15, 26, 0), (26, 30, 1), (30, 31, 2), (31, 42, 1))
        else:
            self.spans = ((0, 10, 0), (10, 16, 2), (16, 26, 0), (26, 42, 1))
        self.third = third
        self.last_frames = None

    def get_segmentations(self, file, hook=None):  # as pyannote's: the diarizer may run it twice on the features
        return None

    def get_embeddings(self, file, binary_segmentations, exclude_overlap=False, hook=None):
        return None

    def __call__(self, audio, num_speakers=None, min_speakers=None, max_speakers=None, hook=None):
        import torch
        from pyannote.core import Annotation, Segment, SlidingWindow, SlidingWindowFeature

        frames = torch.zeros(4, 2100)
        for a, b, s in self.spans:
            frames[:3, a * 50 : b * 50] = torch.tensor(self.VOICE[s])[:, None]
        self.last_frames = frames
        local = {0: 0, 1: 1, 2: 2 if self.third else 1}  # B and its piece share a local speaker unless a person
        voices = [[(a, b) for a, b, s in self.spans if local[s] == k] for k in range(3 if self.third else 2)]
        seg = _segmentation(42.0, voices)
        self.clustering.last_segmentations = SlidingWindowFeature(seg.data, SlidingWindow(10.0, 1.0, 0.0))
        ann = Annotation()
        merged = self.split_on_count and num_speakers is None
        for a, b, s in self.spans:
            ann[Segment(a, b)] = f"SPEAKER_{(1 if not self.third else 0) if merged and s == 2 else s:02d}"
        return ann


def _window_diarizer(third: bool = False, split_on_count: bool = False):
    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    class MeanPool(SpeakerDiarizer):
        @property
        def frame_pool(self):
            return lambda chunk, weights: chunk.mean(dim=-1)

    diarizer = MeanPool(_WindowPipeline(third, split_on_count), Placement("cpu", "float32", "sdpa"), shared_frames=True)
    diarizer.recluster = False
    return diarizer


def test_the_service_folds_a_piece_never_heard_beside_its_voice_and_keeps_a_third_voice():
    from speakerscribe.options import SpeakerCounts

    wave = Waveform(np.zeros(16000 * 42, dtype=np.float32))
    diarizer = _window_diarizer()
    assert 6 / 42 > diarizer.fold_share and 6 / 42 < diarizer.apart_share  # only the window evidence folds it
    result = diarizer(wave)
    assert [(t.start, t.end, t.speaker) for t in result.turns] == [
        (0.0, 10.0, "SPEAKER_00"),
        (10.0, 16.0, "SPEAKER_01"),
        (16.0, 26.0, "SPEAKER_00"),
        (26.0, 42.0, "SPEAKER_01"),
    ]
    assert diarizer.pipeline.clustering.last_segmentations is None  # taken off the pipeline with the call
    assert len({t.speaker for t in diarizer(wave, SpeakerCounts(min=3)).turns}) == 3  # never below min_speakers
    diarizer.apart_share = 0.0  # off: the piece stays a speaker
    assert len({t.speaker for t in diarizer(wave).turns}) == 3
    # the segmentation heard that voice as a third local speaker, in windows beside B: a person
    assert len({t.speaker for t in _window_diarizer(third=True)(wave).turns}) == 3


def test_a_count_asking_for_more_people_is_not_met_by_a_piece_of_one_voice():
    from speakerscribe.options import SpeakerCounts

    wave = Waveform(np.zeros(16000 * 42, dtype=np.float32))
    # two speakers without a count; told three, the clustering cuts B's 10-16 s off as a third: a piece of B
    diarizer = _window_diarizer(split_on_count=True)
    assert len({t.speaker for t in diarizer(wave).turns}) == 2
    assert len({t.speaker for t in diarizer(wave, SpeakerCounts(num=3)).turns}) == 2  # the answer without it kept
    assert diarizer.pipeline.clustering.last_segmentations is None
    diarizer.count_apart_check = False
    assert len({t.speaker for t in diarizer(wave, SpeakerCounts(num=3)).turns}) == 3
    # told three where the third is a person the first answer had merged into A: the count finds them
    person = _window_diarizer(third=True, split_on_count=True)
    assert len({t.speaker for t in person(wave).turns}) == 2
    assert len({t.speaker for t in person(wave, SpeakerCounts(num=3)).turns}) == 3
