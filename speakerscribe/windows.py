"""Plan the audio windows Whisper decodes: speech regions packed into windows of at most ``max_len`` seconds.

Windows never overlap and start where speech starts, so every timestamp is the window's real start plus Whisper's
offset inside it (no drift, no stride merging). A region longer than ``max_len`` is cut at the quietest 20 ms frame
in the last few seconds before the limit, so cuts fall between words where possible.
"""

from __future__ import annotations

import numpy as np

from .records import SAMPLE_RATE, Span

_SEARCH_S = 4.0  # how far back from the limit to look for a quiet cut point
_FRAME = 320  # 20 ms at 16 kHz


def quietest_cut(samples: np.ndarray, lo: float, hi: float) -> float:
    """Time in [lo, hi] (seconds) at the centre of the lowest-energy 20 ms frame; ``hi`` if the range is empty."""
    a, b = int(lo * SAMPLE_RATE), int(hi * SAMPLE_RATE)
    n = (b - a) // _FRAME
    if n < 2:
        return hi
    frames = samples[a : a + n * _FRAME].reshape(n, _FRAME)
    energy = np.einsum("ij,ij->i", frames, frames)
    k = int(np.argmin(energy))
    return lo + (k + 0.5) * _FRAME / SAMPLE_RATE


def plan_windows(regions: list[Span], samples: np.ndarray, max_len: float) -> list[Span]:
    """Greedy packing of ordered, disjoint speech regions into windows of length <= ``max_len``."""
    if max_len <= 0:
        raise ValueError("max_len must be positive")
    pieces: list[Span] = []
    for region in regions:
        start = region.start
        while region.end - start > max_len:
            lo = start + max(max_len - _SEARCH_S, max_len / 2)
            cut = quietest_cut(samples, lo, start + max_len)
            pieces.append(Span(start, cut))
            start = cut
        if region.end > start:
            pieces.append(Span(start, region.end))
    windows: list[Span] = []
    for piece in pieces:
        if windows and piece.end - windows[-1].start <= max_len:
            windows[-1] = Span(windows[-1].start, piece.end)
        else:
            windows.append(piece)
    return windows
