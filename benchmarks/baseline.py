"""The original handler's approach, re-implemented from its description, as the baseline of every benchmark:

* the transformers ASR pipeline with ``chunk_length_s=30``, ``batch_size=24``, ``return_timestamps=True``;
* the audio decoded a second time for the diarizer, which runs after ASR (not alongside it);
* consecutive diarizer turns of one speaker joined, then the "nearest end" merge: for each turn, the chunk whose
  end is nearest the turn's end, and every earlier unassigned chunk, go to that speaker (O(turns x chunks)).

Same models, same input, same machine as ours, in the same run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np


def nearest_end_merge(turns: list[dict[str, Any]], chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The original merge. ``turns``: joined ``{"segment": {"start", "end"}, "speaker"}``; ``chunks``: pipeline
    chunks ``{"timestamp": (start, end), "text"}``. A null end counts as +inf, as in the original."""
    ends = np.array([c["timestamp"][-1] if c["timestamp"][-1] is not None else np.finfo(float).max for c in chunks])
    out: list[dict[str, Any]] = []
    remaining = list(chunks)
    for turn in turns:
        if not remaining:
            break
        upto = int(np.argmin(np.abs(ends - turn["segment"]["end"])))
        out.extend({"speaker": turn["speaker"], **c} for c in remaining[: upto + 1])
        remaining = remaining[upto + 1 :]
        ends = ends[upto + 1 :]
    return out


def join_turns(annotation) -> list[dict[str, Any]]:
    """A pyannote annotation's segments joined into turns (see :func:`join_segments`)."""
    return join_segments((seg.start, seg.end, label) for seg, _, label in annotation.itertracks(yield_label=True))


def join_segments(segments) -> list[dict[str, Any]]:
    """Consecutive (start, end, speaker) segments of the same speaker joined into turns (the original's loop, fixed
    for empty input so the benchmark can run on any audio)."""
    joined: list[dict[str, Any]] = []
    for start, end, label in segments:
        if joined and joined[-1]["speaker"] == label:
            joined[-1]["segment"]["end"] = end
        else:
            joined.append({"segment": {"start": start, "end": end}, "speaker": label})
    return joined


class OriginalApproach:
    """Loads the same model folders our handler loads and runs them the original way."""

    def __init__(self, asr_model: str, diarization_model: str | None = None, assistant_model: str | None = None):
        import torch
        from transformers import AutoModelForCausalLM, pipeline

        device = "cuda" if torch.cuda.is_available() else "cpu"
        dtype = torch.float16 if device == "cuda" else torch.float32
        self.assistant = None
        if assistant_model:
            self.assistant = AutoModelForCausalLM.from_pretrained(assistant_model, dtype=dtype).to(device)
        self.asr = pipeline("automatic-speech-recognition", model=asr_model, dtype=dtype, device=device)
        self.diarizer = None
        if diarization_model:
            from pyannote.audio import Pipeline

            self.diarizer = Pipeline.from_pretrained(diarization_model)
            self.diarizer.to(torch.device(device))

    def __call__(self, audio_bytes: bytes, assisted: bool = False, batch_size: int = 24) -> tuple[dict, dict]:
        import torch

        from speakerscribe.audio.decode import decode_audio

        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        samples = decode_audio(audio_bytes).waveform.samples
        timings["decode"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        generate_kwargs = {"assistant_model": self.assistant} if assisted and self.assistant is not None else {}
        asr = self.asr(
            samples.copy(),
            chunk_length_s=30,
            batch_size=batch_size,
            return_timestamps=True,
            generate_kwargs=generate_kwargs,
        )
        timings["asr"] = time.perf_counter() - t0
        speakers: list[dict] = []
        if self.diarizer is not None:
            t0 = time.perf_counter()
            again = decode_audio(audio_bytes).waveform.samples  # the original decoded the file a second time
            output = self.diarizer({"waveform": torch.from_numpy(again)[None], "sample_rate": 16000})
            annotation = getattr(output, "speaker_diarization", output)
            timings["diarization"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            speakers = nearest_end_merge(join_turns(annotation), asr["chunks"])
            timings["merge"] = time.perf_counter() - t0
        return {"speakers": speakers, "chunks": asr["chunks"], "text": asr["text"]}, timings
