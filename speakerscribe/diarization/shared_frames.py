"""Speaker embeddings from frames computed once per file, instead of once per overlapping 10 s chunk.

pyannote's diarization pipeline slides a 10 s window with a 1 s step and asks its embedding model for one vector
per (window, local speaker): every second of audio goes through the embedding network ten times. With CAM++ that is
~95% of the diarization time on a CPU. Here the network's frame-level part runs once over the file, in blocks of
``block_s`` seconds with ``context_s`` seconds of audio on each side (so the network's local context and its
per-block normalisation look like those of a 10 s window), and each (window, speaker) embedding is the weighted
statistics pooling of the shared frames inside that window, exactly as the model pools a window's own frames.

:class:`speakerscribe.diarization.pyannote_pipeline.SharedFrameDiarization` uses it as its ``get_embeddings``, for CAM++
(:class:`speakerscribe.diarization.campplus.CAMPPlusEmbedding`, whose network splits frames from pooling) and for
pyannote's
WeSpeaker ResNets (:mod:`speakerscribe.diarization.resnet_frames`: fbank once per file, the ResNet trunk in blocks,
pooling and
embedding layer per window); other embedding models keep pyannote's path. Only CAM++ frames are kept for the second
clustering pass and known-speaker naming, which were calibrated on CAM++.
"""

from __future__ import annotations

import math

import numpy as np

from ..records import SAMPLE_RATE

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


def frame_masks(segmentations, exclude_overlap: bool, min_num_samples) -> np.ndarray:
    """(chunks, seg_frames, speakers) float32 activity weights, as pyannote's ``get_embeddings`` uses them: NaN as
    0 and, with ``exclude_overlap``, overlapped frames zeroed for the (chunk, speaker) pairs that keep enough clean
    speech."""
    window = segmentations.sliding_window
    data = np.nan_to_num(segmentations.data, nan=0.0).astype(np.float32)  # (chunks, seg_frames, spk)
    num_seg_frames = data.shape[1]
    if exclude_overlap:
        min_frames = math.ceil(num_seg_frames * min_num_samples / (window.duration * SAMPLE_RATE))
        overlapped = data.sum(axis=2) >= 2  # (chunks, seg_frames)
        clean_frames = (data * ~overlapped[..., None]).sum(axis=1)  # (chunks, spk)
        enough = clean_frames > min_frames
        # zero the overlapped frames of the (chunk, speaker) pairs that keep enough clean speech, in place
        data *= ~(overlapped[:, :, None] & enough[:, None, :])
    return data


def pool_windows(
    frames,
    first,
    per_window: int,
    masks,
    pool,
    out: np.ndarray,
    rows: np.ndarray,
    hook,
    done: int = 0,
    valid=None,
    weights_out: np.ndarray | None = None,
):
    """Fill ``out[rows]`` ((n, speakers, D)) with ``pool`` (frames (n, C, T), weights (n, T) -> (n, D)) of the
    ``per_window`` frames from ``first`` (one per row; frames outside the file weigh 0) under each speaker's mask
    ((n, speakers, seg_frames) tensor, nearest-interpolated to ``per_window`` as pyannote's pooling does).
    ``hook`` hears ``done`` + the rows pooled so far. ``valid``: (n_frames,) bool tensor, frames that may be
    pooled (all when None); ``weights_out[rows]`` ((n, speakers)), when given: the weight each pooling had."""
    import torch

    n_frames, device = frames.shape[1], frames.device
    for a in range(0, len(rows), POOL_CHUNKS):
        b = min(len(rows), a + POOL_CHUNKS)
        index = first[a:b, None] + np.arange(per_window)[None, :]  # (n, per_window) frame numbers
        inside = torch.from_numpy((index >= 0) & (index < n_frames)).to(device)
        index_t = torch.from_numpy(np.clip(index, 0, n_frames - 1)).to(device)
        chunk_frames = frames[:, index_t].permute(1, 0, 2).float()  # (n, C, per_window)
        weights = torch.nn.functional.interpolate(masks[a:b], size=per_window, mode="nearest")
        weights = weights * inside[:, None, :]
        if valid is not None:
            weights = weights * valid[index_t][:, None, :]
        if weights_out is not None:
            weights_out[rows[a:b]] = weights.sum(-1).float().cpu().numpy()
        for spk in range(masks.shape[1]):  # one speaker at a time: no repeated copy of the frames
            out[rows[a:b], spk] = pool(chunk_frames, weights[:, spk]).float().cpu().numpy()
        if hook is not None:
            hook("embeddings", None, total=len(out), completed=done + b)


def window_grid(window, num_chunks: int) -> tuple[np.ndarray, int]:
    """Where each of ``num_chunks`` windows of ``window`` (a pyannote SlidingWindow) starts in 20 ms CAM++ frames,
    and how many frames a window spans: ((num_chunks,) int64, per_window)."""
    starts = np.array([window[c].start for c in range(num_chunks)]) * SAMPLE_RATE
    first = np.round(starts / FRAME_HOP).astype(np.int64)
    return first, int(round(window.duration * SAMPLE_RATE / FRAME_HOP))


def shared_frame_embeddings(model, waveform, segmentations, exclude_overlap: bool, min_num_samples, hook=None):
    """What ``SpeakerDiarization.get_embeddings`` computes - a (num_chunks, local_speakers, dimension) array - from
    frames computed once: returns (embeddings, the file's CAM++ frames, or None for a ResNet). ``model`` is a
    :class:`~speakerscribe.diarization.campplus.CAMPPlusEmbedding` or one of pyannote's WeSpeaker ResNets
    (:mod:`speakerscribe.diarization.resnet_frames`); ``waveform`` (1, samples) at 16 kHz."""
    import torch

    from . import resnet_frames

    window = segmentations.sliding_window
    data = frame_masks(segmentations, exclude_overlap, min_num_samples)
    num_chunks, _, num_speakers = data.shape
    device = next(model.parameters()).device
    out = np.zeros((num_chunks, num_speakers, model.dimension), dtype=np.float32)
    starts = np.array([window[c].start for c in range(num_chunks)]) * SAMPLE_RATE
    with torch.inference_mode():
        masks = torch.from_numpy(data).to(device).permute(0, 2, 1)  # (chunks, spk, seg_frames)
        waveform = waveform.to(device)
        if resnet_frames.is_resnet(model):
            _resnet_windows(model, waveform, window, starts, masks, out, hook)
            return out, None
        frames = file_frames(model, waveform)  # (C, F)
        first, per_window = window_grid(window, num_chunks)
        pool_windows(frames, first, per_window, masks, model.campplus.pool, out, np.arange(num_chunks), hook)
    return out, frames


def _resnet_windows(model, waveform, window, starts: np.ndarray, masks, out: np.ndarray, hook) -> None:
    """The ResNet trunk once per phase that windows start on (in fbank frames modulo the trunk's stride), each
    window pooled from its phase's frames; a window running past the end of the file gets a trunk pass of its own.

    pyannote pads such a window with silence, whose fbank (the log floor) weighs heavily in the window's mean:
    shared frames normalised without it gave cosine 0.94 there (random ResNet34, 4 s past the end)."""
    from functools import partial

    from . import resnet_frames as rf

    size = int(round(window.duration * SAMPLE_RATE))
    per_window = rf.window_frames(model, size)
    first_fbank = np.round(starts / rf.FBANK_HOP).astype(np.int64)
    tail = np.round(starts).astype(np.int64) + size > waveform.shape[-1]
    pool, done = partial(rf.pool, model), 0
    for phase in sorted(set((first_fbank[~tail] % rf.TIME_STRIDE).tolist())):
        rows = np.flatnonzero(~tail & (first_fbank % rf.TIME_STRIDE == phase))
        frames = rf.file_frames(model, waveform, span_s=window.duration, phase=phase)
        first = (first_fbank[rows] - phase) // rf.TIME_STRIDE
        pool_windows(frames, first, per_window, masks[rows], pool, out, rows, hook, done)
        done += len(rows)
    for row in np.flatnonzero(tail):
        frames = rf.window_trunk(model, waveform, int(round(starts[row])), size)
        pool_windows(
            frames, np.zeros(1, np.int64), per_window, masks[row : row + 1], pool, out, np.array([row]), hook, done
        )
        done += 1
