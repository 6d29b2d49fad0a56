"""Interval arithmetic on sorted numpy arrays of start and end times (seconds), shared by window planning and the
merge."""

from __future__ import annotations

import numpy as np


def union_intervals(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge overlapping or touching intervals into sorted disjoint ones."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.concatenate([[True], s[1:] > reach[:-1]])
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)
