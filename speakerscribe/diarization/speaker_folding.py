"""Speakers of a finished diarization folded into others, by their whole speech (issue 26).

The clustering works on one embedding per 10 s window and local speaker; once the turns are known, each speaker has
an embedding of all of their speech (CAM++ frames pooled over their exclusive turns), which is steadier. Two rules
use it, on speaker-level records only (no audio here):

* a speaker holding very little of the speech is folded into the speaker whose voice is nearest (the diarizer
  decides which and how many: :meth:`speakerscribe.diarization.diarizer.SpeakerDiarizer._fold_strays` and
  ``_absorb``);
* two speakers whose whole speech sounds alike (cosine at or above ``alike``) are one person: on wideband
  calibration meetings, pairs of different people reached 0.54 at most (AMI included), the alike pieces of one
  person the clustering had left apart 0.72 and 0.85 (strays, the first rule's, can sit far lower).

Each fold joins the speech-weighted sums, so a group's voice is the mean of all it holds.
"""

from __future__ import annotations

import numpy as np


def fold_speakers(
    embeddings: np.ndarray,
    seconds: np.ndarray,
    fold: int = 0,
    alike: float | None = None,
    least: int = 1,
    marked: np.ndarray | None = None,
) -> np.ndarray:
    """Index of the speaker each speaker ends up in (itself when kept).

    ``embeddings`` (n, D) and ``seconds`` (n,) describe the speakers. First the ``fold`` speakers of least speech
    and those ``marked`` (a boolean mask), smallest first, each join the nearest speaker still standing; then, with
    ``alike``, the two most alike groups join while their cosine is at least ``alike``. Never fewer than ``least``
    groups remain."""
    n = len(seconds)
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-9)
    sums = unit * np.asarray(seconds, dtype=np.float64)[:, None]
    alive = np.ones(n, dtype=bool)
    target = np.arange(n)
    least = max(least, 1)

    def join(into: int, k: int) -> None:
        sums[into] += sums[k]
        target[target == k] = into

    order = np.argsort(seconds, kind="stable")
    chosen = np.zeros(n, dtype=bool)
    chosen[order[: max(0, fold)]] = True
    if marked is not None:
        chosen |= np.asarray(marked, dtype=bool)
    for k in order[chosen[order]][: max(0, n - least)]:
        alive[k] = False  # into the nearest of the others
        centres = sums[alive] / np.maximum(np.linalg.norm(sums[alive], axis=1, keepdims=True), 1e-9)
        join(int(np.flatnonzero(alive)[int(np.argmax(centres @ unit[k]))]), int(k))
    while alike is not None and alive.sum() > least:
        idx = np.flatnonzero(alive)
        centres = sums[idx] / np.maximum(np.linalg.norm(sums[idx], axis=1, keepdims=True), 1e-9)
        cos = centres @ centres.T
        np.fill_diagonal(cos, -np.inf)
        i, j = np.unravel_index(int(np.argmax(cos)), cos.shape)
        if cos[i, j] < alike:
            break
        a, b = int(idx[i]), int(idx[j])
        held = [seconds[target == a].sum(), seconds[target == b].sum()]
        keep, gone = (a, b) if held[0] >= held[1] else (b, a)  # the label of the one holding more speech stays
        alive[gone] = False
        join(keep, gone)
    return target


def apart_strays(
    embeddings: np.ndarray, seconds: np.ndarray, together: np.ndarray, share: float, max_s: float
) -> np.ndarray:
    """Speakers that are pieces of the speaker nearest to them in voice, by the segmentation's evidence: holding under
    ``share`` of the speech (and under ``max_s`` seconds), never heard in one window with that nearest speaker, and
    heard in some window with every other speaker (``together``:
    :func:`speakerscribe.diarization.heard_together.heard_together`). One person is one voice of a window, so a piece
    split off a person is heard beside everyone but that person. Someone who says little is heard beside few: a
    real person of a calibration meeting, never in a window with the speaker nearest their voice, was not heard
    with two others either (README, "Pieces never heard with their own voice"). With two speakers the evidence
    says nothing."""
    n = len(seconds)
    if n < 3:
        return np.zeros(n, dtype=bool)
    unit = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-9)
    cos = unit @ unit.T
    np.fill_diagonal(cos, -np.inf)
    nearest = np.argmax(cos, axis=1)
    seconds = np.asarray(seconds, dtype=np.float64)
    small = (seconds < share * seconds.sum()) & (seconds < max_s)
    never = together[np.arange(n), nearest] == 0
    others = np.ones((n, n), dtype=bool)
    np.fill_diagonal(others, False)
    others[np.arange(n), nearest] = False
    beside_all = ((together > 0) | ~others).all(axis=1)
    return small & never & beside_all
