"""Who said it: attribute transcript pieces (chunks or words) to diarized speakers, vectorised.

Rule: a piece goes to the speaker whose turns overlap it the most (ties: first label); a piece of zero length
goes to the speaker whose turn contains it; a piece that touches no turn goes to the speaker of the nearest turn
(gap distance; ties to the earlier turn). Overlapping speech is handled by the turns
given: the pipeline passes pyannote's *exclusive* diarization (one speaker at a time) when it exists, so a piece
spoken over someone else goes to whoever holds the floor there.

Cost: each speaker's turns are merged into disjoint sorted intervals with prefix sums of their durations, so the
speech of speaker s inside [a, b] is ``C_s(b) - C_s(a)`` with ``C_s`` found by binary search. For n pieces, m turns
and K speakers: O(m log m + K n log m) time, O(n K) memory; no per-piece Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .records import Chunk, SpeakerTurn, Utterance, Word


@dataclass(frozen=True)
class SpeakerTimeline:
    labels: tuple[str, ...]
    starts: tuple[np.ndarray, ...]  # per speaker, sorted disjoint interval starts
    ends: tuple[np.ndarray, ...]
    before: tuple[np.ndarray, ...]  # per speaker, total duration of the intervals before each one
    turn_starts: np.ndarray  # all turns, sorted by start
    turn_start_speaker: np.ndarray
    turn_ends: np.ndarray  # all turns, sorted by end
    turn_end_speaker: np.ndarray

    @property
    def empty(self) -> bool:
        return len(self.labels) == 0


def build_timeline(turns: tuple[SpeakerTurn, ...] | list[SpeakerTurn]) -> SpeakerTimeline:
    valid = [t for t in turns if t.end > t.start]
    labels = tuple(sorted({t.speaker for t in valid}))
    index = {label: k for k, label in enumerate(labels)}
    s = np.array([t.start for t in valid], dtype=np.float64)
    e = np.array([t.end for t in valid], dtype=np.float64)
    spk = np.array([index[t.speaker] for t in valid], dtype=np.int64)
    starts, ends, before = [], [], []
    for k in range(len(labels)):
        ks, ke = _union(s[spk == k], e[spk == k])
        starts.append(ks)
        ends.append(ke)
        before.append(np.concatenate([[0.0], np.cumsum(ke - ks)[:-1]]))
    # full sort keys (not input order) break ties, so the result never depends on the order turns came in
    by_start = np.lexsort((spk, e, s))
    by_end = np.lexsort((spk, s, e))
    return SpeakerTimeline(
        labels, tuple(starts), tuple(ends), tuple(before), s[by_start], spk[by_start], e[by_end], spk[by_end]
    )


def _union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge overlapping or touching intervals into sorted disjoint ones."""
    if starts.size == 0:
        return starts, ends
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    new = np.concatenate([[True], s[1:] > reach[:-1]])
    first = np.flatnonzero(new)
    return s[first], np.maximum.reduceat(e, first)


def _covered(starts: np.ndarray, ends: np.ndarray, before: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Total length of the intervals inside [-inf, t], for each t."""
    if starts.size == 0:
        return np.zeros_like(t)
    k = np.searchsorted(starts, t, side="right") - 1
    kc = np.clip(k, 0, None)
    inside = np.clip(t - starts[kc], 0.0, ends[kc] - starts[kc])
    return np.where(k >= 0, before[kc] + inside, 0.0)


def overlap_matrix(timeline: SpeakerTimeline, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n pieces, K speakers): seconds of each speaker's speech inside each piece [a, b]."""
    cols = [
        _covered(s, e, c, b) - _covered(s, e, c, a) for s, e, c in zip(timeline.starts, timeline.ends, timeline.before)
    ]
    return np.stack(cols, axis=1) if cols else np.zeros((len(a), 0))


def nearest_speaker(timeline: SpeakerTimeline, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Speaker index of the turn nearest to each piece [a, b] that overlaps none."""
    i_prev = np.searchsorted(timeline.turn_ends, a, side="right") - 1  # last turn ending at or before a
    i_next = np.searchsorted(timeline.turn_starts, b, side="left")  # first turn starting at or after b
    has_prev, has_next = i_prev >= 0, i_next < timeline.turn_starts.size
    gap_prev = np.where(has_prev, a - timeline.turn_ends[np.clip(i_prev, 0, None)], np.inf)
    gap_next = np.where(has_next, timeline.turn_starts[np.clip(i_next, 0, timeline.turn_starts.size - 1)] - b, np.inf)
    take_prev = gap_prev <= gap_next
    spk_prev = timeline.turn_end_speaker[np.clip(i_prev, 0, None)]
    spk_next = timeline.turn_start_speaker[np.clip(i_next, 0, timeline.turn_starts.size - 1)]
    return np.where(take_prev, spk_prev, spk_next)


def assign(timeline: SpeakerTimeline, starts, ends) -> np.ndarray:
    """Speaker index for each piece: largest overlap, else nearest turn. Empty timeline -> all -1."""
    a = np.asarray(starts, dtype=np.float64)
    b = np.maximum(np.asarray(ends, dtype=np.float64), a)
    if timeline.empty or a.size == 0:
        return np.full(a.size, -1, dtype=np.int64)
    ov = overlap_matrix(timeline, a, b)
    best = np.argmax(ov, axis=1)
    none = ov[np.arange(a.size), best] <= 0.0
    if none.any():
        # zero overlap: a zero-length piece inside (or at the edge of) a turn belongs to it; else the nearest turn
        best = best.copy()
        idx = np.flatnonzero(none)
        holder = containing_speaker(timeline, (a[idx] + b[idx]) / 2)
        far = holder < 0
        holder[far] = nearest_speaker(timeline, a[idx[far]], b[idx[far]])
        best[idx] = holder
    return best


def containing_speaker(timeline: SpeakerTimeline, t: np.ndarray) -> np.ndarray:
    """Index of the first speaker (label order) with a turn [start, end] containing each time; -1 if none."""
    out = np.full(t.size, -1, dtype=np.int64)
    for k in range(len(timeline.labels) - 1, -1, -1):  # reverse, so the first label wins
        starts, ends = timeline.starts[k], timeline.ends[k]
        if starts.size == 0:
            continue
        i = np.searchsorted(starts, t, side="right") - 1
        inside = (i >= 0) & (t <= ends[np.clip(i, 0, None)])
        out[inside] = k
    return out


def attribute_chunks(chunks: tuple[Chunk, ...] | list[Chunk], turns) -> list[Utterance]:
    """One utterance per chunk (the original handler's shape), each with the chunk's best speaker."""
    timeline = build_timeline(turns)
    if timeline.empty or not chunks:
        return []
    who = assign(timeline, [c.start for c in chunks], [c.end for c in chunks])
    out = []
    for c, k in zip(chunks, who):
        words = tuple(_with_speaker(w, timeline.labels[k]) for w in c.words)
        out.append(Utterance(timeline.labels[k], c.start, c.end, c.text, words))
    return out


def attribute_words(chunks: tuple[Chunk, ...] | list[Chunk], turns) -> list[Utterance]:
    """Every word gets its own speaker; each chunk is split where the speaker changes inside it."""
    timeline = build_timeline(turns)
    if timeline.empty or not chunks:
        return []
    words = [w for c in chunks for w in c.words]
    if not words:
        return attribute_chunks(chunks, turns)
    owner = np.repeat(np.arange(len(chunks)), [len(c.words) for c in chunks])
    who = assign(timeline, [w.start for w in words], [w.end for w in words])
    # a new utterance starts at each chunk's first word and wherever the speaker changes
    boundary = np.concatenate([[True], (who[1:] != who[:-1]) | (owner[1:] != owner[:-1])])
    starts = np.flatnonzero(boundary)
    stops = np.concatenate([starts[1:], [len(words)]])
    out = []
    for a, b in zip(starts, stops):
        label = timeline.labels[who[a]]
        piece = tuple(_with_speaker(w, label) for w in words[a:b])
        text = "".join(w.text for w in piece)
        out.append(Utterance(label, piece[0].start, piece[-1].end, text, piece))
    # chunks without words (no alignment possible) keep chunk-level attribution
    chunk_only = [c for c in chunks if not c.words]
    if chunk_only:
        out.extend(attribute_chunks(chunk_only, turns))
        out.sort(key=lambda u: (u.start, u.end))
    return out


def _with_speaker(word: Word, speaker: str) -> Word:
    return Word(word.text, word.start, word.end, word.probability, speaker)


def group_by_speaker(utterances: list[Utterance]) -> list[Utterance]:
    """Merge runs of consecutive utterances of the same speaker into one."""
    out: list[Utterance] = []
    for u in utterances:
        if out and out[-1].speaker == u.speaker:
            prev = out[-1]
            out[-1] = Utterance(u.speaker, prev.start, max(prev.end, u.end), prev.text + u.text, prev.words + u.words)
        else:
            out.append(u)
    return out
