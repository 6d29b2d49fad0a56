"""In how many of the segmentation model's windows each two speakers of a finished diarization were heard together
(issue 26).

The segmentation model hears a 10 s window at a time and gives each voice in it a local speaker of its own. One
person is one local speaker of a window, so two pieces of one person that the clustering left apart are never two
local speakers of the same window; two people usually are, somewhere in a conversation. Here each active local
speaker of each window is given the final label that holds most of its active frames (the diarization's exclusive
turns), and every window counts once for each pair of labels its local speakers carry.

Pure numpy, on records only: the binarized segmentation ``(windows, frames, local speakers)`` with its windows'
``start``, ``duration`` and ``step`` (seconds), and the turns. Cost O(windows x local speakers x (frames + labels))
time and memory (an hour of windows, three local speakers, 64 labels: about a second and tens of MB).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import SpeakerTurn

GRID_S = 0.02  # label grid resolution (pyannote's segmentation frames are about 17 ms)


@dataclass(frozen=True)
class WindowedSegmentation:
    """The segmentation model's binarized output for one file: ``data[w, f, s]`` is 1 where local speaker ``s`` of
    window ``w`` is active in frame ``f``; window ``w`` covers [start + w * step, start + w * step + duration]."""

    data: np.ndarray
    start: float
    duration: float
    step: float

    @classmethod
    def of(cls, feature) -> WindowedSegmentation:
        """From pyannote's ``SlidingWindowFeature`` (the one its clustering step receives)."""
        window = feature.sliding_window
        return cls(np.asarray(feature.data), float(window.start), float(window.duration), float(window.step))


def label_grid(turns: tuple[SpeakerTurn, ...] | list[SpeakerTurn], labels: list[str], end: float) -> np.ndarray:
    """Label index per ``GRID_S`` step over [0, end) from non-overlapping turns; -1 where nobody speaks."""
    grid = np.full(int(np.ceil(max(end, 0.0) / GRID_S)) + 1, -1, dtype=np.int64)
    index = {label: k for k, label in enumerate(labels)}
    for t in turns:
        k = index.get(t.speaker)
        if k is not None and t.end > t.start:
            grid[max(int(t.start / GRID_S), 0) : max(int(np.ceil(t.end / GRID_S)), 0)] = k
    return grid


def heard_together(
    segmentation: WindowedSegmentation,
    turns: tuple[SpeakerTurn, ...] | list[SpeakerTurn],
    labels: list[str],
    min_active: float = 0.1,
) -> tuple[np.ndarray, np.ndarray]:
    """``(together, present)``: ``together[i, j]``, the windows in which labels i and j (i != j) were each some local
    speaker's label; ``present[i]``, the windows in which label i was. A local speaker counts when it is active in
    at least ``min_active`` of the window's frames and its active frames fall on someone's turn; ``turns`` are the
    exclusive turns (one speaker at a time)."""
    k = len(labels)
    together = np.zeros((k, k), dtype=np.int64)
    present = np.zeros(k, dtype=np.int64)
    data = segmentation.data
    if k == 0 or data.ndim != 3 or data.size == 0:
        return together, present
    windows, frames, local = data.shape
    starts = segmentation.start + np.arange(windows) * segmentation.step
    offsets = (np.arange(frames) + 0.5) * segmentation.duration / frames
    end = float(starts[-1] + segmentation.duration)
    grid = label_grid(turns, labels, end)
    cells = np.clip(((starts[:, None] + offsets[None, :]) / GRID_S).astype(np.int64), 0, len(grid) - 1)
    at = grid[cells]  # (windows, frames): whose turn each frame falls on
    active = data > 0.5
    label = np.where(at < 0, k, at) + (k + 1) * np.arange(windows)[:, None]  # (windows, frames), flat index
    # (windows, local, k): active frames of each local speaker on each label's turns
    votes = np.stack(
        [
            np.bincount(label.ravel(), weights=active[:, :, s].ravel(), minlength=windows * (k + 1)).reshape(
                windows, k + 1
            )[:, :k]
            for s in range(local)
        ],
        axis=1,
    )
    heard = (active.sum(1) >= min_active * frames) & (votes.sum(2) > 0)
    owner = np.where(heard, votes.argmax(2), -1)  # (windows, local)
    member = np.zeros((windows, k), dtype=bool)
    rows, cols = np.nonzero(owner >= 0)
    member[rows, owner[rows, cols]] = True
    present += member.sum(0)
    m = member.astype(np.int64)
    together = m.T @ m
    np.fill_diagonal(together, 0)
    return together, present
