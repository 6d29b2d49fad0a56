"""pyannote's WeSpeaker ResNet embeddings split into a trunk run once per file and a pooling run per window.

``WeSpeakerResNet34`` computes, for one 10 s window: kaldi fbank (25 ms / 10 ms, hamming) mean-normalised over the
window -> the ResNet trunk (2-D convolutions; time stride 8, so one trunk frame per 80 ms) -> statistics pooling
(weighted mean and std over time, the weights being the segmentation's per-frame activity of one local speaker,
nearest-interpolated to the trunk's frames) -> ``seg_1`` (and ``seg_2`` for two-layer heads). Here the fbank is
computed once for the file and the trunk runs over it in blocks with ``context`` frames of fbank on each side,
dropped afterwards: the trunk's receptive field is :data:`RECEPTIVE_FIELD` fbank frames (2.25 s), so a frame more
than half of it from a block edge is the frame the whole file would give.

What cannot be shared is the fbank mean: pyannote subtracts each window's own mean. Here each fbank frame has the
mean of the ``span_s`` seconds centred on it subtracted (``span_s`` = the window's duration), which is the window's
mean for a frame in the middle of a window and close to it elsewhere (measured in tests/test_shared_frames.py).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

FBANK_HOP = 160  # samples per fbank frame (10 ms at 16 kHz)
TIME_STRIDE = 8  # fbank frames per trunk frame: layer2, layer3 and layer4 each halve the time axis
FRAME_HOP = FBANK_HOP * TIME_STRIDE  # samples per trunk frame (80 ms)
# fbank frames that one trunk frame sees: 3x3 convolutions, 1 + 6 at stride 1, then three stages whose first
# convolution has stride 2 (4, 6 and 3 two-convolution blocks)
RECEPTIVE_FIELD = 225
CONTEXT = 128  # fbank frames of context on each side of a block: half the receptive field, rounded up to 8, + 16


def is_resnet(model) -> bool:
    """``model`` is one of pyannote's WeSpeaker ResNet embeddings (fbank -> ``resnet`` trunk -> pooling)."""
    from pyannote.audio.models.embedding.wespeaker import BaseWeSpeakerResNet

    return isinstance(model, BaseWeSpeakerResNet) and hasattr(model.resnet, "forward_frames")


def file_fbank(model, waveform: torch.Tensor, span_s: float) -> torch.Tensor:
    """(1, samples) -> (fbank frames, mel) of the whole file, each frame minus the mean of the ``span_s`` seconds
    around it (pyannote subtracts a window's own mean; see the module docstring)."""
    feats = model._fbank(waveform[0:1].float() * 32768.0)  # (frames, mel); kaldi takes (channels, samples)
    span = max(1, int(span_s * model.hparams.sample_rate) // FBANK_HOP)
    half = min(span // 2, feats.shape[0] - 1)
    mean = F.avg_pool1d(
        feats.T[None], kernel_size=2 * half + 1, stride=1, padding=half, count_include_pad=False
    )  # (1, mel, frames)
    return feats - mean[0].T


def window_frames(model, num_samples: int) -> int:
    """Trunk frames of a window of ``num_samples`` (what the model pools over for one window)."""
    return model.num_frames(num_samples)


def trunk_frames(model, fbank: torch.Tensor, block: int = 1000, context: int = CONTEXT, batch: int = 4) -> torch.Tensor:
    """(fbank frames, mel) -> (channels x frequency bins, ceil(frames / 8)) trunk output, float16, block by block.

    ``block`` and ``context`` are in fbank frames (multiples of 8); ``context`` >= half the receptive field. Only
    pieces of the same length share a batch: padding a short piece would not be the convolutions' zero padding."""
    n_fbank = fbank.shape[0]
    n_out = max(1, math.ceil(n_fbank / TIME_STRIDE))
    spans = [(s, max(0, s - context), min(n_fbank, s + block + context)) for s in range(0, n_fbank, block)]
    groups: dict[int, list[tuple[int, int, int]]] = {}
    for span in spans:
        groups.setdefault(span[2] - span[1], []).append(span)
    out = None
    for same in groups.values():
        for first in range(0, len(same), batch):
            group = same[first : first + batch]
            feats = model.resnet.forward_frames(torch.stack([fbank[a:b] for _, a, b in group]))  # (g, C, bins, t)
            feats = feats.flatten(1, 2)
            if out is None:
                out = torch.empty(feats.shape[1], n_out, dtype=torch.float16, device=feats.device)
            for i, (s, a, _) in enumerate(group):
                f0, skip = s // TIME_STRIDE, (s - a) // TIME_STRIDE
                take = min(block // TIME_STRIDE, n_out - f0)
                out[:, f0 : f0 + take] = feats[i, :, skip : skip + take]
    return out


def file_frames(model, waveform: torch.Tensor, span_s: float = 10.0, phase: int = 0) -> torch.Tensor:
    """(1, samples) at 16 kHz -> (channels x bins, frames) trunk frames at 80 ms for the whole file; frame ``j``
    is centred on fbank frame ``phase + 8 j``.

    A window whose first fbank frame is ``8 j + phase`` pools frames ``j, j + 1, ...`` of this phase: the trunk is
    not shift-invariant below its stride (a window starting 4 fbank frames off the grid gave cosine 0.990 against
    its own embedding, on the grid 0.9997), so each phase the windows start on gets its own pass."""
    fbank = file_fbank(model, waveform[:, phase * FBANK_HOP :], span_s)
    return trunk_frames(model, fbank, context=CONTEXT)


def window_trunk(model, waveform: torch.Tensor, start: int, size: int) -> torch.Tensor:
    """(channels x bins, frames) trunk frames of the ``size`` samples from ``start``, zero-padded past the end and
    normalised over themselves: exactly the frames the model pools for that window."""
    crop = waveform.new_zeros(1, 1, size)
    piece = waveform[0, start : start + size]
    crop[0, 0, : piece.shape[0]] = piece
    return model.resnet.forward_frames(model.compute_fbank(crop))[0].flatten(0, 1)


def pool(model, frames: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
    """(batch, channels x bins, T) trunk frames, (batch, T) weights -> (batch, dimension) embeddings: the model's
    own statistics pooling and embedding layer(s)."""
    bins = frames.shape[1] // model.resnet.layer4[-1].bn2.num_features
    return model.resnet.forward_embedding(frames.unflatten(1, (-1, bins)), weights=weights)[1]
