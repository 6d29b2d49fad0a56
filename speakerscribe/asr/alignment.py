"""Word timing from Whisper's cross-attention: one teacher-forced decoder pass, then dynamic time warping.

After a window is decoded (plain, assisted or compiled; it does not matter how), the scoring pass of
:mod:`speakerscribe.asr.engine` feeds the prompt and the tokens exactly as generated (timestamp tokens included) plus an
end-of-text token back through the decoder once, teacher-forced. The cross-attention of the model's alignment heads
at the positions that predict text tokens says which 20 ms encoder frame each token looks at; a monotonic path
through that (token x frame) matrix gives each token a start time. The attention
weights are read by hooks on the heads' query and key projections, so any attention implementation works.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

FRAME_S = 0.02  # one encoder frame
_MEDIAN_WIDTH = 7


def dtw_path(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost monotonic path from (0, 0) to (N-1, M-1) through ``cost`` (N x M); steps right, down, diagonal.

    Each row is solved at once: with ``a_j = min(D[i-1, j-1], D[i-1, j])`` and ``S`` the running sum of the row,
    ``D[i, j] = S_j + min_{k <= j}(a_k - S_{k-1})``, a cumulative minimum. Returns (row indices, column indices).
    """
    n, m = cost.shape
    acc = np.full((n + 1, m + 1), np.inf)
    acc[0, 0] = 0.0
    for i in range(1, n + 1):
        prev = acc[i - 1]
        a = np.minimum(prev[:-1], prev[1:])  # a[j-1] for columns j = 1..m
        s = np.cumsum(cost[i - 1], dtype=np.float64)
        s_prev = np.concatenate([[0.0], s[:-1]])
        acc[i, 1:] = s + np.minimum.accumulate(a - s_prev)
    rows, cols = [], []
    i, j = n, m
    while i > 0 and j > 0:
        rows.append(i - 1)
        cols.append(j - 1)
        diag, up, left = acc[i - 1, j - 1], acc[i - 1, j], acc[i, j - 1]
        if diag <= up and diag <= left:
            i, j = i - 1, j - 1
        elif up <= left:
            i -= 1
        else:
            j -= 1
    return np.array(rows[::-1]), np.array(cols[::-1])


def _median_filter(x: np.ndarray, width: int) -> np.ndarray:
    """Median over a sliding window along the last axis (reflect padding)."""
    if x.shape[-1] < width:
        return x
    pad = width // 2
    padded = np.pad(x, [(0, 0)] * (x.ndim - 1) + [(pad, pad)], mode="reflect")
    windows = np.lib.stride_tricks.sliding_window_view(padded, width, axis=-1)
    return np.median(windows, axis=-1)


def token_start_times(weights: np.ndarray, n_frames: int) -> np.ndarray:
    """Alignment-head attention (heads, rows, frames) -> start time of each row's token (seconds).

    Rows are the decoder positions that predict the text tokens followed by end-of-text; the result has one time
    per row, non-decreasing, within [0, n_frames * 0.02].
    """
    w = weights[:, :, : max(1, n_frames)].astype(np.float64)
    std = w.std(axis=1, keepdims=True)
    w = (w - w.mean(axis=1, keepdims=True)) / np.where(std > 0, std, 1.0)
    w = _median_filter(w, _MEDIAN_WIDTH)
    matrix = w.mean(axis=0)
    rows, cols = dtw_path(-matrix)
    first = np.concatenate([[True], np.diff(rows) > 0])
    times = np.zeros(matrix.shape[0])
    times[rows[first]] = cols[first] * FRAME_S
    return np.maximum.accumulate(times)


@contextmanager
def capture_cross_attention(model, alignment_heads: list[tuple[int, int]]):
    """While active, record query/key projections of the layers that hold alignment heads.

    Yields a function that, after a forward pass, returns (batch, n_heads, target_len, source_len) attention
    probabilities of the alignment heads in ``alignment_heads`` order.
    """
    import torch

    decoder = model.model.decoder
    layers = sorted({layer for layer, _ in alignment_heads})
    captured: dict[tuple[int, str], torch.Tensor] = {}
    handles = []
    owner = threading.get_ident()  # hooks are per module: ignore forward passes of concurrent requests
    for layer in layers:
        attn = decoder.layers[layer].encoder_attn
        for name in ("q_proj", "k_proj"):

            def hook(_module, _inputs, output, key=(layer, name)):
                if threading.get_ident() == owner:
                    captured[key] = output.detach()

            handles.append(getattr(attn, name).register_forward_hook(hook))

    def attention() -> torch.Tensor:
        out = []
        for layer, head in alignment_heads:
            attn = decoder.layers[layer].encoder_attn
            hd = attn.head_dim
            q = captured[(layer, "q_proj")][..., head * hd : (head + 1) * hd].float()
            k = captured[(layer, "k_proj")][..., head * hd : (head + 1) * hd].float()
            out.append(torch.softmax(q @ k.transpose(-1, -2) * hd**-0.5, dim=-1))
        return torch.stack(out, dim=1)

    try:
        yield attention
    finally:
        for h in handles:
            h.remove()
