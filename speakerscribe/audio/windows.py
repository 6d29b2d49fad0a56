"""Plan the audio windows Whisper decodes: speech regions packed into windows of at most ``max_len`` seconds.

Windows never overlap and start where speech starts, so every timestamp is the window's real start plus Whisper's
offset inside it (no drift, no stride merging). A region longer than ``max_len`` is cut at the quietest 20 ms frame
in the last few seconds before the limit, so cuts fall between words where possible.
"""

from __future__ import annotations

import numpy as np

from ..intervals import union_intervals
from ..records import SAMPLE_RATE, Span

_SEARCH_S = 4.0  # how far back from the limit to look for a quiet cut point
_FRAME = 320  # 20 ms at 16 kHz
_MIN_PIECE_S = 1.0  # the least of a region cut into a window that already holds speech


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
    """Ordered, disjoint speech regions packed into windows of length <= ``max_len``, filled in order.

    A region that fits in the open window joins it (the silence between them too). One that does not, but fits in a
    window of its own, starts the next window (the open one closes at the silence before it). One longer than a
    window is cut anyway, so it is cut at the quietest point before the open window's limit. Every window costs a
    whole 30 s encoder pass, however little speech it holds: a long region cut from its own start left a remainder
    of a second or two that the next long region could not join (the 6.9-minute festival long-form set: 19 windows
    before, 16 now; the AMI excerpts joined 15, now 14)."""
    if max_len <= 0:
        raise ValueError("max_len must be positive")
    windows: list[Span] = []
    start = end = None  # the open window: where it starts, where its speech so far ends
    for region in regions:
        s = region.start
        while True:
            if start is None:
                start = s
            limit = start + max_len
            if region.end <= limit:
                end = region.end
                break
            lo = start + max(max_len - _SEARCH_S, max_len / 2)
            if end is not None:  # speech already in the window: cut this region only where it leaves room
                lo = max(lo, s + _MIN_PIECE_S)
                if lo >= limit or region.end - s <= max_len:
                    windows.append(Span(start, end))
                    start, end = None, None
                    continue
            cut = quietest_cut(samples, lo, limit)
            windows.append(Span(start, cut))
            start, end, s = cut, None, cut
    if end is not None:  # (a window with speech in it has a start)
        windows.append(Span(start, end))
    return windows


def uncovered(spans: list[Span], covered: list[Span], min_len: float, pad: float = 0.0) -> list[Span]:
    """The parts of the union of ``spans`` outside every ``covered`` span, each at least ``min_len`` seconds long,
    then padded by ``pad`` on both sides without reaching into a covered span (sorted, disjoint).

    Linear in the number of spans: a four-hour meeting has tens of thousands of words (covered) and thousands of
    turns (spans)."""
    if not spans:
        return []
    s, e = union_intervals(np.array([x.start for x in spans]), np.array([x.end for x in spans]))
    cs, ce = union_intervals(np.array([x.start for x in covered]), np.array([x.end for x in covered]))
    out: list[Span] = []
    for start, end in zip(s.tolist(), e.tolist()):
        first = int(np.searchsorted(ce, start, side="right"))  # the first covered span ending after `start`
        last = int(np.searchsorted(cs, end, side="left"))  # covered spans [first, last) start before `end`
        edges = [start, *np.column_stack([cs[first:last], ce[first:last]]).ravel().tolist(), end]
        for a, b in zip(edges[::2], edges[1::2]):  # the gaps between covered spans, inside [start, end)
            a, b = max(a, start), min(b, end)
            if b - a < min_len:
                continue
            k = int(np.searchsorted(ce, a, side="right"))  # covered spans before the gap end at or before `a`
            lo = max(a - pad, float(ce[k - 1]) if k > 0 else 0.0, 0.0)
            hi = min(b + pad, float(cs[k]) if k < cs.size else np.inf)
            if out and lo <= out[-1].end:
                out[-1] = Span(out[-1].start, hi)
            else:
                out.append(Span(lo, hi))
    return out
