"""A pyannote pipeline that computes segmentation and embeddings once per file, for benchmarks and tests that try
several clusterings on the same files (only clustering and reconstruction run again)."""

from __future__ import annotations

import hashlib
from pathlib import Path


def pyannote_file(uri: str, wav: Path) -> dict:
    """The in-memory file dict pyannote takes: decoded as the service decodes, with a ``uri`` to cache by."""
    import torch

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.records import SAMPLE_RATE

    waveform = decode_audio(wav.read_bytes()).waveform
    return {"waveform": torch.from_numpy(waveform.samples)[None], "sample_rate": SAMPLE_RATE, "uri": uri}


def cached(pipeline, shared_frames: bool, constrained: bool = False):
    """``pipeline`` built as the service builds it, with its features memoised (:func:`memoise_features`)."""
    from speakerscribe.diarization.pyannote_pipeline import build, supports_shared_frames

    if shared_frames and not supports_shared_frames(pipeline):
        raise ValueError("the diarization model does not support shared frames")
    return memoise_features(build(pipeline, shared_frames, constrained=constrained))


def memoise_features(pipeline):
    """Segmentation and embeddings of ``pipeline`` memoised per file: its uri and a hash of its samples (a
    :class:`~speakerscribe.diarization.diarizer.SpeakerDiarizer`'s in-memory files have no uri of their own, and
    pyannote names them all alike). The file's CAM++ frames are handed back on every call, as a fresh run leaves
    them; ``pipeline.frames_of(uri)``: the frames of the last file of that uri. Returns ``pipeline``."""
    seg, emb = pipeline.get_segmentations, pipeline.get_embeddings
    cache: dict = {}

    def name(file):
        waveform = file["waveform"]
        digest = hashlib.sha1(waveform.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
        return (file.get("uri"), digest, tuple(waveform.shape))

    def get_segmentations(file, hook=None):
        key = ("seg", name(file))
        if key not in cache:
            cache[key] = seg(file, hook=hook)
        return cache[key]

    def get_embeddings(file, binarized, exclude_overlap=False, hook=None):
        key = name(file)
        if ("emb", key) not in cache:
            cache[("emb", key)] = emb(file, binarized, exclude_overlap=exclude_overlap, hook=hook)
            cache[("frames", key)] = cache[("frames", file.get("uri"))] = getattr(pipeline, "last_frames", None)
        pipeline.last_frames = cache[("frames", key)]
        return cache[("emb", key)]

    pipeline.frames_of = lambda uri: cache.get(("frames", uri))
    pipeline.get_segmentations, pipeline.get_embeddings = get_segmentations, get_embeddings
    return pipeline
