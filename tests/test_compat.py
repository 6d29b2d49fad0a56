"""diarization_utils keeps the original helper names with the original's bugs fixed."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from audio_helpers import tone, wav_bytes

import diarization_utils as du


def segs(*spec):
    return [{"segment": {"start": s, "end": e}, "speaker": who} for s, e, who in spec]


def test_post_process_keeps_a_last_chunk_with_null_end():
    transcript = [{"timestamp": (0.0, 4.0), "text": " one"}, {"timestamp": (4.0, None), "text": " two"}]
    out = du.post_process_segments_and_transcripts(segs((0, 4, "A"), (4, 9, "B")), transcript, False)
    assert [(u["speaker"], u["text"]) for u in out] == [("A", " one"), ("B", " two")]
    assert out[1]["timestamp"] == (4.0, 9.0)


def test_post_process_empty_inputs_give_empty_output():
    assert du.post_process_segments_and_transcripts([], [{"timestamp": (0, 1), "text": " x"}], False) == []
    assert du.post_process_segments_and_transcripts(segs((0, 1, "A")), [], True) == []


def test_post_process_backchannel_and_grouping():
    transcript = [{"timestamp": (0.0, 8.0), "text": " a"}, {"timestamp": (8.0, 12.0), "text": " b"}]
    out = du.post_process_segments_and_transcripts(
        segs((0, 4, "A"), (4, 4.5, "B"), (4.5, 12, "A")), transcript, group_by_speaker=True
    )
    assert out == [{"speaker": "A", "text": " a b", "timestamp": (0.0, 12.0)}]


def test_preprocess_inputs_decodes_once_to_16k():
    data = wav_bytes(tone(440, 1.0, 16000))
    samples, tensor = du.preprocess_inputs(base64.b64encode(data).decode(), 16000)
    assert samples.shape == (16000,) and tuple(tensor.shape) == (1, 16000)
    np.testing.assert_array_equal(tensor[0].numpy(), samples)


class RecordingPipeline:
    """Stands in for a pyannote pipeline to observe what it is told; returns two speakers."""

    def __init__(self):
        self.calls = []

    def __call__(self, audio, **kwargs):
        from pyannote.core import Annotation, Segment

        self.calls.append((audio["sample_rate"], tuple(audio["waveform"].shape), kwargs))
        ann = Annotation()
        ann[Segment(0, 1)] = "S1"
        ann[Segment(1, 1.5)] = "S1"
        ann[Segment(1.6, 2)] = "S2"
        return ann


def test_diarize_audio_reports_the_true_sample_rate_and_joins_turns():
    from config import InferenceConfig

    pipeline = RecordingPipeline()
    params = InferenceConfig(sampling_rate=44100, num_speakers=2)
    out = du.diarize_audio(np.zeros((1, 32000), dtype=np.float32), pipeline, params)
    assert pipeline.calls[0][0] == 16000  # not the request's 44100
    assert pipeline.calls[0][2] == {"num_speakers": 2, "min_speakers": None, "max_speakers": None}
    assert out == [
        {"segment": {"start": 0.0, "end": 1.5}, "speaker": "S1"},
        {"segment": {"start": 1.6, "end": 2.0}, "speaker": "S2"},
    ]


def test_diarize_end_to_end_with_the_original_signature():
    from config import InferenceConfig

    data = wav_bytes(tone(440, 2.0, 16000))
    asr_outputs = {"chunks": [{"timestamp": (0.0, 1.2), "text": " hi"}, {"timestamp": (1.2, None), "text": " yo"}]}
    out = du.diarize(RecordingPipeline(), data, InferenceConfig(), asr_outputs)
    assert [u["speaker"] for u in out] == ["S1", "S2"]


def test_invalid_speaker_counts_are_rejected():
    from speakerscribe.errors import InputError

    params = type("P", (), {"num_speakers": 2, "min_speakers": 3, "max_speakers": None})()
    with pytest.raises(InputError):
        du.diarize_audio(np.zeros(16000, dtype=np.float32), RecordingPipeline(), params)
