"""A requested speaker count is applied only when the result without it breaks it (issue 26): the diarizer runs the
pipeline without the count first, keeps that result when it has an allowed number of speakers, and otherwise runs
clustering again with the count on the same segmentation and embeddings (computed once)."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.options import SpeakerCounts
from speakerscribe.records import Waveform
from speakerscribe.runtime import Placement


class EvidencePipeline:
    """Stands in for pyannote's SpeakerDiarization: the evidence has ``found`` speakers; a count forces its own.
    Counts how often the expensive steps run."""

    def __init__(self, found: int, reach: int = 64):
        self.found = found
        self.reach = reach  # the most speakers a count can make of the evidence
        self.segmentations = self.embeddings = 0
        self.calls: list[dict] = []

    def get_segmentations(self, file, hook=None):
        self.segmentations += 1
        return ("seg", id(file))

    def get_embeddings(self, file, binary_segmentations, exclude_overlap=False, hook=None):
        self.embeddings += 1
        return ("emb", binary_segmentations)

    def __call__(self, audio, num_speakers=None, min_speakers=None, max_speakers=None, hook=None):
        from pyannote.core import Annotation, Segment

        seg = self.get_segmentations(audio)
        self.get_embeddings(audio, seg)
        self.calls.append({"num_speakers": num_speakers, "min_speakers": min_speakers, "max_speakers": max_speakers})
        n = self.found
        if num_speakers is not None:
            n = num_speakers
        elif min_speakers is not None and n < min_speakers:
            n = min_speakers
        elif max_speakers is not None and n > max_speakers:
            n = max_speakers
        n = min(n, max(self.reach, self.found))
        ann = Annotation()
        for k in range(n):
            counted = any(v is not None for v in (num_speakers, min_speakers, max_speakers))
            ann[Segment(k, k + 0.9)] = f"COUNTED_{k:02d}" if counted else f"SPEAKER_{k:02d}"
        return ann


def _diarizer(pipeline):
    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    return SpeakerDiarizer(pipeline, Placement("cpu", "float32", "sdpa"))


WAVE = Waveform(np.zeros(16000 * 5, dtype=np.float32))


def _speakers(result):
    return len({t.speaker for t in result.turns})


@pytest.mark.parametrize(
    "counts",
    [SpeakerCounts(num=2), SpeakerCounts(min=1, max=3), SpeakerCounts(min=2), SpeakerCounts(max=2)],
)
def test_a_count_the_evidence_already_meets_changes_nothing(counts):
    pipeline = EvidencePipeline(found=2)
    result = _diarizer(pipeline)(WAVE, counts)
    assert _speakers(result) == 2
    assert pipeline.calls == [{"num_speakers": None, "min_speakers": None, "max_speakers": None}]
    assert pipeline.segmentations == pipeline.embeddings == 1


@pytest.mark.parametrize(
    ("counts", "expected"),
    [(SpeakerCounts(num=3), 3), (SpeakerCounts(num=1), 1), (SpeakerCounts(min=4), 4), (SpeakerCounts(max=1), 1)],
)
def test_a_count_the_evidence_breaks_reclusters_on_the_same_features(counts, expected):
    pipeline = EvidencePipeline(found=2)
    result = _diarizer(pipeline)(WAVE, counts)
    assert _speakers(result) == expected
    assert len(pipeline.calls) == 2
    assert pipeline.calls[0] == {"num_speakers": None, "min_speakers": None, "max_speakers": None}
    assert pipeline.calls[1] == {"num_speakers": counts.num, "min_speakers": counts.min, "max_speakers": counts.max}
    assert pipeline.segmentations == pipeline.embeddings == 1  # computed once, reused by the second run
    # the memo lives for one call only: the pipeline's own methods are back
    assert "get_segmentations" not in vars(pipeline) and "get_embeddings" not in vars(pipeline)
    _diarizer(pipeline)(WAVE, counts)
    assert pipeline.segmentations == pipeline.embeddings == 2


def test_no_count_runs_once():
    pipeline = EvidencePipeline(found=3)
    assert _speakers(_diarizer(pipeline)(WAVE)) == 3
    assert len(pipeline.calls) == 1


def test_a_pipeline_without_features_gets_the_count_directly():
    seen = []

    def pipeline(audio, **kwargs):
        from pyannote.core import Annotation, Segment

        seen.append(kwargs)
        ann = Annotation()
        ann[Segment(0, 1)] = "A"
        return ann

    _diarizer(pipeline)(WAVE, SpeakerCounts(num=2))
    assert seen == [{"num_speakers": 2, "min_speakers": None, "max_speakers": None}]


def test_a_patched_pipeline_keeps_its_patches():
    pipeline = EvidencePipeline(found=2)
    own = pipeline.get_segmentations
    pipeline.get_segmentations = lambda file, hook=None: own(file, hook)  # a benchmark's cache, say
    patched = pipeline.get_segmentations
    _diarizer(pipeline)(WAVE, SpeakerCounts(num=3))
    assert pipeline.get_segmentations is patched


@pytest.mark.parametrize(("reach", "kept"), [(2, "SPEAKER"), (3, "COUNTED")])
def test_a_count_the_evidence_cannot_reach_keeps_the_result_without_it_unless_it_comes_closer(reach, kept):
    pipeline = EvidencePipeline(found=2, reach=reach)
    result = _diarizer(pipeline)(WAVE, SpeakerCounts(num=4))
    assert len(pipeline.calls) == 2
    assert {t.speaker.split("_")[0] for t in result.turns} == {kept}


@pytest.mark.parametrize(
    ("counts", "count", "allowed"),
    [
        (SpeakerCounts(), 5, True),
        (SpeakerCounts(num=2), 2, True),
        (SpeakerCounts(num=2), 3, False),
        (SpeakerCounts(min=2), 1, False),
        (SpeakerCounts(min=2, max=3), 3, True),
        (SpeakerCounts(max=3), 4, False),
    ],
)
def test_allows(counts, count, allowed):
    assert counts.allows(count) is allowed


def _absorber():
    """A diarizer whose speaker embeddings are the mean of the frames (stands in for CAM++'s pooling)."""
    import torch

    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    class MeanPool(SpeakerDiarizer):
        @property
        def frame_pool(self):
            return lambda chunk, weights: chunk.mean(dim=-1)

    diarizer = MeanPool(EvidencePipeline(found=3), Placement("cpu", "float32", "sdpa"))
    # CAM++ frames (20 ms): 0-20 s voice A, 20-40 s voice B, 40-42 s a short stretch that sounds like B
    frames = torch.zeros(4, 2100)
    frames[0, :1000] = 1.0
    frames[1, 1000:2000] = 1.0
    frames[1, 2000:] = 0.9
    frames[2, 2000:] = 0.1
    return diarizer, frames


def _turns(*spans):
    from speakerscribe.records import SpeakerTurn

    return tuple(SpeakerTurn(a, b, s) for a, b, s in spans)


def test_too_many_speakers_fold_the_small_one_into_its_nearest_voice():
    from speakerscribe.records import Diarization

    diarizer, frames = _absorber()
    turns = _turns((0.0, 20.0, "SPEAKER_00"), (20.0, 40.0, "SPEAKER_01"), (40.0, 42.0, "SPEAKER_02"))
    folded = diarizer._absorb(Diarization(turns, turns), frames, 2)
    assert folded.exclusive == _turns((0.0, 20.0, "SPEAKER_00"), (20.0, 42.0, "SPEAKER_01"))
    assert folded.turns == folded.exclusive
    # numbered again by first appearance when the folded one came first
    early = _turns((0.0, 2.0, "SPEAKER_00"), (2.0, 22.0, "SPEAKER_01"), (22.0, 42.0, "SPEAKER_02"))
    frames_early = frames[:, list(range(2000, 2100)) + list(range(0, 2000))]
    folded = diarizer._absorb(Diarization(early, early), frames_early, 2)
    assert {t.speaker for t in folded.exclusive} == {"SPEAKER_00", "SPEAKER_01"}
    assert folded.exclusive[0] == _turns((0.0, 2.0, "SPEAKER_00"))[0]


def test_speakers_holding_real_speech_are_not_folded():
    from speakerscribe.records import Diarization

    diarizer, frames = _absorber()
    turns = _turns((0.0, 20.0, "SPEAKER_00"), (20.0, 30.0, "SPEAKER_01"), (30.0, 42.0, "SPEAKER_02"))
    assert diarizer._absorb(Diarization(turns, turns), frames, 2) is None  # 10 s of 42 is a person: count again
    assert diarizer._absorb(Diarization(turns, turns), frames, 3) is None  # not too many
    assert diarizer._absorb(Diarization(turns, turns), None, 2) is None  # no frames (not CAM++)
