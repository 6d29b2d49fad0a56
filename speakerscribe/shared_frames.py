"""Speaker embeddings from frames computed once per file, instead of once per overlapping 10 s chunk.

pyannote's diarization pipeline slides a 10 s window with a 1 s step and asks its embedding model for one vector
per (window, local speaker): every second of audio goes through the embedding network ten times. With CAM++ that is
~95% of the diarization time on a CPU. Here the network's frame-level part runs once over the file, in blocks of
``block_s`` seconds with ``context_s`` seconds of audio on each side (so the network's local context and its
per-block normalisation look like those of a 10 s window), and each (window, speaker) embedding is the weighted
statistics pooling of the shared frames inside that window, exactly as the model pools a window's own frames.

:class:`speakerscribe.pyannote_pipeline.SharedFrameDiarization` uses it as its ``get_embeddings``, for CAM++
(:class:`speakerscribe.campplus.CAMPPlusEmbedding`, whose network splits frames from pooling); other embedding
models keep pyannote's path.
"""

from __future__ import annotations

import math

import numpy as np

from .records import SAMPLE_RATE

FRAME_HOP = 320  # samples per CAM++ output frame: 10 ms fbank hop, time stride 2
STORE_DTYPE_NAME = "float16"  # how the file's frames are kept (see file_frames)
POOL_CHUNKS = 16  # windows pooled per step: bounds the temporaries of weighted statistics (~16 MB a window)


def _store_dtype():
    import torch

    return getattr(torch, STORE_DTYPE_NAME)


def file_frames(model, waveform, block_s: float = 10.0, context_s: float = 2.5, batch: int = 4):
    """(1, samples) waveform -> (channels, n_frames) CAM++ frames at 20 ms, computed block by block.

    Each block is embedded with ``context_s`` extra seconds on both sides, which are then dropped, so frames near
    a block edge see the same neighbourhood as frames in the middle.
    """
    import torch

    samples = waveform.shape[-1]
    n_frames = max(1, math.ceil(samples / FRAME_HOP))
    block = int(block_s * SAMPLE_RATE) // FRAME_HOP * FRAME_HOP
    context = int(context_s * SAMPLE_RATE) // FRAME_HOP * FRAME_HOP
    starts = list(range(0, samples, block)) or [0]
    skip, width = context // FRAME_HOP, block // FRAME_HOP  # frames dropped at each side, frames kept per block
    out = None
    for first in range(0, len(starts), batch):
        group = starts[first : first + batch]
        pieces = torch.zeros(len(group), 1, block + 2 * context + 400, dtype=waveform.dtype, device=waveform.device)
        for i, s in enumerate(group):
            a, b = max(0, s - context), min(samples, s + block + context + 400)
            pieces[i, 0, a - (s - context) : b - (s - context)] = waveform[0, a:b]
        feats = model.campplus.frames(model.compute_fbank(pieces))  # (g, C, ~ (block + 2 context) / 320)
        if out is None:
            # stored in half precision: 512 channels x 50 frames/s is 51 KB per audio second (184 MB an hour)
            # instead of 102 KB; pooling upcasts each window's slice back to float32
            out = torch.empty(feats.shape[1], n_frames, dtype=_store_dtype(), device=feats.device)
        for i, s in enumerate(group):
            f0 = s // FRAME_HOP
            take = min(width, n_frames - f0)
            out[:, f0 : f0 + take] = feats[i, :, skip : skip + take]
    return out


def shared_frame_embeddings(model, waveform, segmentations, exclude_overlap: bool, min_num_samples, hook=None):
    """What ``SpeakerDiarization.get_embeddings`` computes - a (num_chunks, local_speakers, dimension) array - from
    frames computed once: returns (embeddings, the file's frames). ``model`` is a
    :class:`~speakerscribe.campplus.CAMPPlusEmbedding`; ``waveform`` (1, samples) at 16 kHz."""
    import torch

    window = segmentations.sliding_window
    data = np.nan_to_num(segmentations.data, nan=0.0).astype(np.float32)  # (chunks, seg_frames, spk)
    num_chunks, num_seg_frames, num_speakers = data.shape
    if exclude_overlap:
        # as pyannote: use only frames where one speaker talks, unless that leaves too little speech
        min_frames = math.ceil(num_seg_frames * min_num_samples / (window.duration * SAMPLE_RATE))
        overlapped = data.sum(axis=2) >= 2  # (chunks, seg_frames)
        clean_frames = (data * ~overlapped[..., None]).sum(axis=1)  # (chunks, spk)
        enough = clean_frames > min_frames
        # zero the overlapped frames of the (chunk, speaker) pairs that keep enough clean speech, in place
        data *= ~(overlapped[:, :, None] & enough[:, None, :])
    device = next(model.parameters()).device
    with torch.inference_mode():
        frames = file_frames(model, waveform.to(device))  # (C, F)
        n_frames = frames.shape[1]
        per_window = int(round(window.duration * SAMPLE_RATE / FRAME_HOP))
        first = np.round(np.array([window[c].start for c in range(num_chunks)]) * SAMPLE_RATE / FRAME_HOP)
        first = first.astype(np.int64)
        masks = torch.from_numpy(data).to(device).permute(0, 2, 1)  # (chunks, spk, seg_frames)
        out = np.zeros((num_chunks, num_speakers, model.dimension), dtype=np.float32)
        for a in range(0, num_chunks, POOL_CHUNKS):
            b = min(num_chunks, a + POOL_CHUNKS)
            index = first[a:b, None] + np.arange(per_window)[None, :]  # (n, per_window) frame numbers
            inside = torch.from_numpy((index >= 0) & (index < n_frames)).to(device)
            index_t = torch.from_numpy(np.clip(index, 0, n_frames - 1)).to(device)
            chunk_frames = frames[:, index_t].permute(1, 0, 2).float()  # (n, C, per_window)
            weights = torch.nn.functional.interpolate(masks[a:b], size=per_window, mode="nearest")
            weights = weights * inside[:, None, :]
            for spk in range(num_speakers):  # one speaker at a time: no repeated copy of the frames
                out[a:b, spk] = model.campplus.pool(chunk_frames, weights[:, spk]).float().cpu().numpy()
            if hook is not None:
                hook("embeddings", None, total=num_chunks, completed=b)
    return out, frames
