"""The original handler's diarization helpers, same names and call shapes, with its bugs fixed.

* ``preprocess_inputs`` decodes once to 16 kHz mono and hands back the same samples for the diarizer.
* ``diarize_audio`` tells pyannote the true sample rate (16 kHz), not the request's ``sampling_rate``.
* ``post_process_segments_and_transcripts`` attributes each chunk to the speaker who overlaps it most (nearest
  turn otherwise) instead of cutting at the chunk whose end is nearest a turn's end; a chunk with a null end
  keeps its text; no turns or no chunks give an empty list instead of an exception.

The endpoint itself uses :mod:`speakerscribe.pipeline`; these functions serve code written against the original.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from speakerscribe.audio.decode import load_inputs
from speakerscribe.merge import attribute_chunks
from speakerscribe.merge import group_by_speaker as _group
from speakerscribe.options import SpeakerCounts
from speakerscribe.records import Chunk, SpeakerTurn, Waveform

__all__ = ["preprocess_inputs", "diarize_audio", "post_process_segments_and_transcripts", "diarize"]


def preprocess_inputs(inputs: Any, sampling_rate: int = 16000):
    """Audio bytes / base64 / sample list -> (float32 16 kHz mono array, (1, samples) float tensor)."""
    import torch

    waveform = load_inputs(inputs, sampling_rate).waveform
    return waveform.samples, torch.from_numpy(waveform.samples)[None]


def diarize_audio(diarizer_inputs, diarization_pipeline, parameters) -> list[dict[str, Any]]:
    """Run a pyannote pipeline; returns speaker turns ``{"segment": {"start", "end"}, "speaker"}``, consecutive
    turns of one speaker joined."""
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.runtime import resolve_placement

    samples = np.asarray(diarizer_inputs, dtype=np.float32).reshape(-1)
    diarizer = SpeakerDiarizer.from_pipeline(diarization_pipeline, resolve_placement("cpu"))
    speakers = SpeakerCounts(
        getattr(parameters, "num_speakers", None),
        getattr(parameters, "min_speakers", None),
        getattr(parameters, "max_speakers", None),
    )
    result = diarizer(Waveform(samples), speakers)
    joined: list[dict[str, Any]] = []
    for turn in result.exclusive or result.turns:
        if joined and joined[-1]["speaker"] == turn.speaker:
            joined[-1]["segment"]["end"] = max(joined[-1]["segment"]["end"], turn.end)
        else:
            joined.append({"segment": {"start": turn.start, "end": turn.end}, "speaker": turn.speaker})
    return joined


def post_process_segments_and_transcripts(new_segments, transcript, group_by_speaker: bool = False) -> list[dict]:
    """Speaker turns + ASR chunks (``{"timestamp": (start, end), "text"}``) -> speaker-attributed chunks."""
    turns = [
        SpeakerTurn(float(s["segment"]["start"]), float(s["segment"]["end"]), str(s["speaker"])) for s in new_segments
    ]
    if not turns or not transcript:
        return []
    last_turn_end = max(t.end for t in turns)
    chunks = []
    for c in transcript:
        start, end = c["timestamp"]
        start = float(start or 0.0)
        end = float(end) if end is not None else max(start, last_turn_end)
        chunks.append(Chunk(start=start, end=end, text=c["text"]))
    utterances = attribute_chunks(chunks, turns)
    if group_by_speaker:
        utterances = _group(utterances)
    return [{"speaker": u.speaker, "text": u.text, "timestamp": (u.start, u.end)} for u in utterances]


def diarize(diarization_pipeline, file, parameters, asr_outputs) -> list[dict]:
    """The original entry point: decode ``file``, diarize it, attribute ``asr_outputs["chunks"]``."""
    _, diarizer_inputs = preprocess_inputs(file, getattr(parameters, "sampling_rate", 16000))
    segments = diarize_audio(diarizer_inputs, diarization_pipeline, parameters)
    return post_process_segments_and_transcripts(segments, asr_outputs["chunks"], group_by_speaker=False)
