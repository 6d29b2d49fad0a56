"""Speaker embeddings of reference clips and of diarized speakers, from the diarizer's own embedding model.

Two routes, chosen by :class:`~speakerscribe.diarization.diarizer.SpeakerDiarizer`:

* CAM++ (the offline default): each clip's filterbank is computed and mean-normalised on its own, the clips are
  padded and run through the network in one batch, and each is pooled over the frames where its person speaks.
  A diarized speaker is pooled from the CAM++ frames the diarizer already computed for the whole file (see
  :mod:`speakerscribe.diarization.shared_frames`) over that speaker's exclusive turns: no second network pass over
  the audio.
* Any other pyannote embedding (WeSpeaker, ...): pyannote's ``embedding(waveforms, masks)`` on the padded clips,
  and on each speaker's exclusive speech joined end to end (at most ``MAX_SPEAKER_SECONDS``), in one batch.
"""

from __future__ import annotations

import numpy as np

from ..records import SAMPLE_RATE, Span, SpeakerTurn

MAX_SPEAKER_SECONDS = 300.0  # of a speaker's speech pooled into its embedding (evenly spread over the file)
FBANK_HOP_S = 0.01
MIN_PIECE_SAMPLES = SAMPLE_RATE // 2


def _spans_mask(spans: tuple[Span, ...] | list[Span], n: int, step_s: float) -> np.ndarray:
    """(n,) float32: 1 where a frame of ``step_s`` seconds starts inside one of ``spans``."""
    mask = np.zeros(n, dtype=np.float32)
    for s in spans:
        mask[max(0, int(s.start / step_s)) : max(0, int(np.ceil(s.end / step_s)))] = 1.0
    return mask


def campplus_clip_embeddings(model, clips: list[tuple[np.ndarray, tuple[Span, ...]]]) -> np.ndarray:
    """(len(clips), D) embeddings of 16 kHz clips, each pooled over its ``spans`` (all of it when empty), one
    network batch. ``model`` is a :class:`~speakerscribe.diarization.campplus.CAMPPlusEmbedding`."""
    import torch

    device = next(model.parameters()).device
    with torch.inference_mode():
        clip_tensors = [torch.from_numpy(np.ascontiguousarray(s))[None, None].to(device) for s, _ in clips]
        feats = [model.compute_fbank(c)[0] for c in clip_tensors]
        longest = max(f.shape[0] for f in feats)
        batch = torch.zeros(len(feats), longest, feats[0].shape[1], device=device)
        weights = torch.zeros(len(feats), longest, device=device)
        for i, (f, (_, spans)) in enumerate(zip(feats, clips)):
            batch[i, : f.shape[0]] = f  # padding is 0, the mean of a normalised filterbank
            mask = _spans_mask(spans, f.shape[0], FBANK_HOP_S) if spans else np.ones(f.shape[0], np.float32)
            weights[i, : f.shape[0]] = torch.from_numpy(mask).to(device)
        frames = model.campplus.frames(batch)
        return model.campplus.pool(frames, weights).float().cpu().numpy()


def _speaker_frame_index(turns: list[SpeakerTurn], n_frames: int, frame_s: float, most: int) -> np.ndarray:
    index = np.concatenate(
        [np.arange(int(t.start / frame_s), min(n_frames, int(np.ceil(t.end / frame_s)))) for t in turns] or [[]]
    ).astype(np.int64)
    if len(index) > most:
        index = index[np.linspace(0, len(index) - 1, most).round().astype(np.int64)]
    return index


def frame_speaker_embeddings(pool, frames, turns: tuple[SpeakerTurn, ...], labels: list[str], frame_s: float):
    """(len(labels), D): each speaker pooled over the file's frames inside its turns. A speaker with fewer than
    two frames gets a zero row (similar to nothing)."""
    import torch

    most = int(MAX_SPEAKER_SECONDS / frame_s)
    rows = []
    with torch.inference_mode():
        for label in labels:
            index = _speaker_frame_index([t for t in turns if t.speaker == label], frames.shape[-1], frame_s, most)
            if len(index) < 2:
                rows.append(None)
                continue
            chunk = frames[:, torch.from_numpy(index).to(frames.device)].float()[None]  # (1, C, L)
            rows.append(pool(chunk, None).float().cpu().numpy()[0])
    width = next((len(r) for r in rows if r is not None), 1)
    return np.stack([r if r is not None else np.zeros(width, np.float32) for r in rows])


def waveform_embeddings(embedding, pieces: list[tuple[np.ndarray, tuple[Span, ...]]]) -> np.ndarray:
    """(len(pieces), D) with pyannote's ``embedding(waveforms (B, 1, N), masks (B, N))``, one batch."""
    import torch

    longest = max(len(s) for s, _ in pieces)
    waveforms = np.zeros((len(pieces), 1, longest), dtype=np.float32)
    masks = np.zeros((len(pieces), longest), dtype=np.float32)
    for i, (samples, spans) in enumerate(pieces):
        waveforms[i, 0, : len(samples)] = samples
        masks[i, : len(samples)] = _spans_mask(spans, len(samples), 1 / SAMPLE_RATE) if spans else 1.0
    out = embedding(torch.from_numpy(waveforms), masks=torch.from_numpy(masks))
    return np.nan_to_num(np.asarray(out, dtype=np.float32))


def speaker_speech(samples: np.ndarray, turns: tuple[SpeakerTurn, ...], label: str) -> np.ndarray:
    """A speaker's exclusive speech joined end to end, at most MAX_SPEAKER_SECONDS taken evenly across its turns."""
    own = [t for t in turns if t.speaker == label]
    total = sum(t.end - t.start for t in own)
    keep = min(1.0, MAX_SPEAKER_SECONDS / total) if total > 0 else 1.0
    parts = []
    for t in own:
        a = int(t.start * SAMPLE_RATE)
        b = a + int((t.end - t.start) * keep * SAMPLE_RATE)
        parts.append(samples[a:b])
    joined = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    return np.pad(joined, (0, max(0, MIN_PIECE_SAMPLES - len(joined))))  # the filterbank needs a few frames
