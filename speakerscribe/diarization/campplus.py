"""CAM++ speaker embedding (3D-Speaker's D-TDNN with context-aware masking) as a pyannote.audio ``Model``.

pyannote's diarization pipeline asks its embedding model for one vector per (chunk, local speaker): the same 10 s
waveform comes in once per speaker, each time with that speaker's frame-activity ``weights``. This wrapper computes
the frame-level network once per distinct waveform in a batch and pools it once per weight vector, so the usual
3 speakers per chunk cost one forward pass instead of three.

Parameter names follow the published CAM++ checkpoints (``head.*``, ``xvector.*``) so their state dicts load as is.
Shapes: waveforms (batch, 1, samples) at 16 kHz -> fbank (batch, frames, 80) -> frames (batch, 512, frames / 2)
-> embeddings (batch, 192).
"""

from __future__ import annotations

from collections import OrderedDict
from functools import partial

import torch
import torch.nn.functional as F
from pyannote.audio.core.model import Model
from pyannote.audio.core.task import Problem, Resolution, Specifications
from torch import nn


def _bn_relu(channels: int, affine: bool = True, relu: bool = True) -> nn.Sequential:
    layers: OrderedDict[str, nn.Module] = OrderedDict(batchnorm=nn.BatchNorm1d(channels, affine=affine))
    if relu:
        layers["relu"] = nn.ReLU()
    return nn.Sequential(layers)


class _ResBlock2d(nn.Module):
    """Two 3x3 convolutions with a residual path; ``stride`` applies to the frequency axis only."""

    def __init__(self, in_ch: int, out_ch: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, stride=(stride, 1), padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=(stride, 1), bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class _FrontEnd(nn.Module):
    """2-D convolutional front end: (B, F, T) fbank -> (B, channels * F / 8, T)."""

    def __init__(self, feat_dim: int = 80, channels: int = 32):
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.layer1 = nn.Sequential(_ResBlock2d(channels, channels, 2), _ResBlock2d(channels, channels, 1))
        self.layer2 = nn.Sequential(_ResBlock2d(channels, channels, 2), _ResBlock2d(channels, channels, 1))
        self.conv2 = nn.Conv2d(channels, channels, 3, stride=(2, 1), padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.out_channels = channels * (feat_dim // 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x.unsqueeze(1))))
        y = self.layer2(self.layer1(y))
        y = F.relu(self.bn2(self.conv2(y)))
        return y.flatten(1, 2)


class _TDNN(nn.Module):
    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int):
        super().__init__()
        self.linear = nn.Conv1d(in_ch, out_ch, kernel, stride=stride, padding=kernel // 2, bias=False)
        self.nonlinear = _bn_relu(out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x))


class _CAMLayer(nn.Module):
    """Local convolution gated by a context vector (global mean + 100-frame segment means)."""

    segment = 100

    def __init__(self, bn_ch: int, out_ch: int, kernel: int, dilation: int):
        super().__init__()
        pad = (kernel - 1) // 2 * dilation
        self.linear_local = nn.Conv1d(bn_ch, out_ch, kernel, padding=pad, dilation=dilation, bias=False)
        self.linear1 = nn.Conv1d(bn_ch, bn_ch // 2, 1)
        self.linear2 = nn.Conv1d(bn_ch // 2, out_ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        seg = F.avg_pool1d(x, self.segment, self.segment, ceil_mode=True)
        seg = seg.repeat_interleave(self.segment, dim=-1)[..., :n]
        context = x.mean(-1, keepdim=True) + seg
        gate = torch.sigmoid(self.linear2(F.relu(self.linear1(context))))
        return self.linear_local(x) * gate


class _DenseLayer(nn.Module):
    def __init__(self, in_ch: int, growth: int, bn_ch: int, kernel: int, dilation: int):
        super().__init__()
        self.nonlinear1 = _bn_relu(in_ch)
        self.linear1 = nn.Conv1d(in_ch, bn_ch, 1, bias=False)
        self.nonlinear2 = _bn_relu(bn_ch)
        self.cam_layer = _CAMLayer(bn_ch, growth, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.cam_layer(self.nonlinear2(self.linear1(self.nonlinear1(x))))


class _DenseBlock(nn.Module):
    def __init__(self, n_layers: int, in_ch: int, growth: int, bn_ch: int, kernel: int, dilation: int):
        super().__init__()
        for i in range(n_layers):
            self.add_module(f"tdnnd{i + 1}", _DenseLayer(in_ch + i * growth, growth, bn_ch, kernel, dilation))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.children():
            x = torch.cat([x, layer(x)], dim=1)
        return x


class _Transit(nn.Module):
    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.nonlinear = _bn_relu(in_ch)
        self.linear = nn.Conv1d(in_ch, out_ch, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(self.nonlinear(x))


class _Dense(nn.Module):
    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.linear = nn.Conv1d(in_ch, out_ch, 1, bias=False)
        self.nonlinear = _bn_relu(out_ch, affine=False, relu=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.nonlinear(self.linear(x.unsqueeze(-1))).squeeze(-1)


def weighted_stats(frames: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """Mean and unbiased standard deviation over time, optionally weighted.

    frames: (batch, channels, T); weights: (batch, T') resampled (nearest) to T. Returns (batch, 2 * channels).
    """
    if weights is None:
        std = frames.std(-1, correction=1) if frames.shape[-1] > 1 else torch.zeros_like(frames[..., 0])
        return torch.cat([frames.mean(-1), std], dim=-1)
    w = F.interpolate(weights.unsqueeze(1).to(frames.dtype), size=frames.shape[-1], mode="nearest")
    v1 = w.sum(-1) + 1e-8
    mean = (frames * w).sum(-1) / v1
    v2 = (w * w).sum(-1)
    var = ((frames - mean.unsqueeze(-1)) ** 2 * w).sum(-1) / (v1 - v2 / v1 + 1e-8)
    return torch.cat([mean, var.clamp_min(0).sqrt()], dim=-1)


class CAMPPlusNet(nn.Module):
    """The CAM++ network proper; ``frames`` and ``pool`` are split so frames can be shared across masks."""

    def __init__(self, feat_dim: int = 80, embedding_size: int = 192, growth: int = 32, init_channels: int = 128):
        super().__init__()
        self.head = _FrontEnd(feat_dim)
        ch = init_channels
        self.xvector = nn.Sequential(OrderedDict(tdnn=_TDNN(self.head.out_channels, ch, 5, stride=2)))
        for i, (n_layers, kernel, dilation) in enumerate([(12, 3, 1), (24, 3, 2), (16, 3, 2)], start=1):
            self.xvector.add_module(f"block{i}", _DenseBlock(n_layers, ch, growth, 4 * growth, kernel, dilation))
            ch += n_layers * growth
            self.xvector.add_module(f"transit{i}", _Transit(ch, ch // 2))
            ch //= 2
        self.xvector.add_module("out_nonlinear", _bn_relu(ch))
        self.xvector.add_module("dense", _Dense(2 * ch, embedding_size))
        self.channels = ch
        self.embedding_size = embedding_size

    def frames(self, fbank: torch.Tensor) -> torch.Tensor:
        """(batch, T, feat) -> (batch, channels, T / 2)."""
        x = self.head(fbank.transpose(1, 2))
        for name, module in self.xvector.named_children():
            if name == "dense":
                break
            x = module(x)
        return x

    def pool(self, frames: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        return self.xvector.dense(weighted_stats(frames, weights))

    def forward(self, fbank: torch.Tensor) -> torch.Tensor:
        return self.pool(self.frames(fbank))


class CAMPPlusEmbedding(Model):
    """pyannote ``Model`` wrapper: waveforms in, CAM++ embeddings out (cosine metric)."""

    def __init__(
        self,
        sample_rate: int = 16000,
        num_channels: int = 1,
        num_mel_bins: int = 80,
        embedding_size: int = 192,
        task=None,
    ):
        super().__init__(sample_rate=sample_rate, num_channels=num_channels, task=task)
        self.save_hyperparameters("sample_rate", "num_channels", "num_mel_bins", "embedding_size")
        self.campplus = CAMPPlusNet(feat_dim=num_mel_bins, embedding_size=embedding_size)
        self.specifications = Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=10.0)
        import torchaudio.compliance.kaldi as kaldi

        self._fbank = partial(
            kaldi.fbank,
            num_mel_bins=num_mel_bins,
            frame_length=25.0,
            frame_shift=10.0,
            dither=0.0,
            sample_frequency=sample_rate,
            window_type="povey",
        )

    @property
    def dimension(self) -> int:
        return self.hparams.embedding_size

    def compute_fbank(self, waveforms: torch.Tensor) -> torch.Tensor:
        """(batch, 1, samples) in [-1, 1] -> (batch, frames, mel) log-mel, mean-normalised over time."""
        feats = torch.vmap(self._fbank)(waveforms.float() * 32768.0)
        return feats - feats.mean(dim=1, keepdim=True)

    def forward(self, waveforms: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        # Rows repeating the previous row's waveform (one per local speaker) share one frame-level pass.
        batch = waveforms.shape[0]
        flat = waveforms.reshape(batch, -1)
        new = torch.ones(batch, dtype=torch.bool, device=waveforms.device)
        if batch > 1:
            new[1:] = ~(flat[1:] == flat[:-1]).all(dim=1)
        owner = torch.cumsum(new.long(), 0) - 1
        frames = self.campplus.frames(self.compute_fbank(waveforms[new]))
        return self.campplus.pool(frames[owner], weights)
