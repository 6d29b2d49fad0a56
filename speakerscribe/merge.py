"""Who said it: attribute transcript pieces (chunks or words) to diarized speakers, vectorised.

Rule: a piece goes to the speaker whose turns overlap it the most (ties: first label); a piece of zero length
goes to the speaker whose turn contains it; a piece that touches no turn goes to the speaker of the nearest turn
(gap distance; ties to the earlier turn). Overlapping speech is handled by the turns
given: the pipeline passes pyannote's *exclusive* diarization (one speaker at a time) when it exists, so a piece
spoken over someone else goes to whoever holds the floor there.

Cost: the turns become one sorted list of B breakpoints (every start and end), with, for each breakpoint and
speaker, whether the speaker talks until the next breakpoint and how much that speaker has said before it (a
B x K prefix table). The speech of every speaker inside [a, b] is then two binary searches and a few array
operations for all pieces at once. n pieces, m turns, K speakers: O(m log m + n (log m + K)) time, O((m + n) K)
memory, no per-piece Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .intervals import union_intervals
from .records import Chunk, SpeakerTurn, Utterance, Word


@dataclass(frozen=True)
class SpeakerTimeline:
    labels: tuple[str, ...]
    starts: tuple[np.ndarray, ...]  # per speaker, sorted disjoint interval starts (the union of its turns)
    ends: tuple[np.ndarray, ...]
    points: np.ndarray  # (B,) sorted breakpoints: every union start and end
    active: np.ndarray  # (B, K) 1.0 where the speaker talks in [points[j], points[j + 1])
    prefix: np.ndarray  # (B, K) seconds each speaker talked before points[j]
    turn_starts: np.ndarray  # all turns, sorted by (start, end, speaker)
    turn_start_speaker: np.ndarray
    turn_ends: np.ndarray  # all turns, sorted by (end, start, speaker)
    turn_end_speaker: np.ndarray

    @property
    def empty(self) -> bool:
        return len(self.labels) == 0


def build_timeline(turns: tuple[SpeakerTurn, ...] | list[SpeakerTurn]) -> SpeakerTimeline:
    """Turn records -> timeline (see :func:`timeline_from_arrays`)."""
    labels = tuple(sorted({t.speaker for t in turns if t.end > t.start}))
    index = {label: k for k, label in enumerate(labels)}
    s = np.fromiter((t.start for t in turns), dtype=np.float64, count=len(turns))
    e = np.fromiter((t.end for t in turns), dtype=np.float64, count=len(turns))
    spk = np.fromiter((index.get(t.speaker, -1) for t in turns), dtype=np.int64, count=len(turns))
    return timeline_from_arrays(s, e, spk, labels)


def timeline_from_arrays(s: np.ndarray, e: np.ndarray, spk: np.ndarray, labels: tuple[str, ...]) -> SpeakerTimeline:
    """Turns as arrays (start, end, speaker index into ``labels``); zero-length turns are ignored."""
    valid = e > s
    s, e, spk = s[valid], e[valid], spk[valid]
    k_count = len(labels)
    starts, ends = [], []
    for k in range(k_count):
        ks, ke = union_intervals(s[spk == k], e[spk == k])
        starts.append(ks)
        ends.append(ke)
    points = np.unique(np.concatenate(starts + ends)) if k_count else np.zeros(0)
    n_points = points.size
    change = (
        np.stack(
            [
                np.bincount(np.searchsorted(points, starts[k]), minlength=n_points + 1)
                - np.bincount(np.searchsorted(points, ends[k]), minlength=n_points + 1)
                for k in range(k_count)
            ],
            axis=1,
        )
        if k_count
        else np.zeros((1, 0))
    )
    active = np.cumsum(change, axis=0)[:n_points].astype(np.float64)
    widths = np.diff(points, append=points[-1] if points.size else 0.0)
    prefix = (
        np.vstack([np.zeros((1, k_count)), np.cumsum(active * widths[:, None], axis=0)[:-1]])
        if points.size
        else np.zeros((0, k_count))
    )
    # full sort keys (not input order) break ties, so the result never depends on the order turns came in
    by_start = np.lexsort((spk, e, s))
    by_end = np.lexsort((spk, s, e))
    return SpeakerTimeline(
        labels, tuple(starts), tuple(ends), points, active, prefix, s[by_start], spk[by_start], e[by_end], spk[by_end]
    )


def _covered(timeline: SpeakerTimeline, t: np.ndarray) -> np.ndarray:
    """(n, K): seconds each speaker talked before each time t."""
    j = np.searchsorted(timeline.points, t, side="right") - 1
    jc = np.clip(j, 0, None)
    value = timeline.prefix[jc] + (t - timeline.points[jc])[:, None] * timeline.active[jc]
    return np.where((j >= 0)[:, None], value, 0.0)


def overlap_matrix(timeline: SpeakerTimeline, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n pieces, K speakers): seconds of each speaker's speech inside each piece [a, b]."""
    if timeline.empty or timeline.points.size == 0:
        return np.zeros((len(a), len(timeline.labels)))
    return _covered(timeline, b) - _covered(timeline, a)


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
    n = len(chunks)
    starts = np.fromiter((c.start for c in chunks), dtype=np.float64, count=n)
    ends = np.fromiter((c.end for c in chunks), dtype=np.float64, count=n)
    speakers = [timeline.labels[k] for k in assign(timeline, starts, ends).tolist()]
    return [
        Utterance(who, c.start, c.end, c.text, tuple(_with_speaker(w, who) for w in c.words) if c.words else ())
        for c, who in zip(chunks, speakers)
    ]


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
    # in the order things were said: the words of a chunk decoded on a second look may come before those of an
    # earlier-starting chunk whose words begin late
    out.sort(key=lambda u: (u.start, u.end))
    return out


def widen_to_turns(utterances: list[Utterance], turns) -> list[Utterance]:
    """Each entry's span widened to the diarized turn of its own speaker that holds its first (last) word, but
    never into its neighbours: ``turns`` are exclusive (no overlaps), so widened entries never overlap either.

    Word alignment from cross-attention lands words within a few tenths of a second, and a word Whisper did not
    catch at a turn's edge leaves the entry short; the diarizer's turn boundaries are frame-accurate (17 ms). Only
    times move: words and text are unchanged, and an entry is never shortened.
    """
    if not utterances:
        return utterances
    timeline = build_timeline(turns)
    index = {label: k for k, label in enumerate(timeline.labels)}
    n = len(utterances)
    a = np.array([u.start for u in utterances])
    b = np.array([u.end for u in utterances])
    spk = np.array([index.get(u.speaker, -1) for u in utterances])
    new_a, new_b = a.copy(), b.copy()
    for k in range(len(timeline.labels)):
        mine = np.flatnonzero(spk == k)
        starts, ends = timeline.starts[k], timeline.ends[k]
        if mine.size == 0 or starts.size == 0:
            continue
        i = np.searchsorted(starts, a[mine], side="right") - 1  # this speaker's turn holding the entry's start
        ok = (i >= 0) & (a[mine] <= ends[np.clip(i, 0, None)])
        new_a[mine[ok]] = np.minimum(a[mine[ok]], starts[i[ok]])
        j = np.searchsorted(starts, b[mine], side="left") - 1  # the turn holding the entry's end
        ok = (j >= 0) & (b[mine] <= ends[np.clip(j, 0, None)]) & (b[mine] > starts[np.clip(j, 0, None)])
        new_b[mine[ok]] = np.maximum(b[mine[ok]], ends[j[ok]])
    # never into a neighbour: an end stops at the next entry's start, a start at the previous entry's new end
    order = np.argsort(a, kind="stable")
    hi = np.empty(n)
    hi[order] = np.concatenate([a[order][1:], [np.inf]])
    new_b = np.minimum(new_b, np.maximum(hi, b))
    lo = np.empty(n)
    lo[order] = np.concatenate([[-np.inf], new_b[order][:-1]])
    new_a = np.maximum(new_a, np.minimum(lo, a))
    return [
        Utterance(u.speaker, round(float(s), 3), round(float(e), 3), u.text, u.words)
        for u, s, e in zip(utterances, new_a, new_b)
    ]


def trim_to_speech(utterances: list[Utterance], starts: np.ndarray, ends: np.ndarray) -> list[Utterance]:
    """Entries cut down to the time where somebody is heard: ``starts``/``ends`` are sorted disjoint spans of
    speech (the diarizer's turns, overlapped ones included, united with the speech detector's regions).

    Cross-attention alignment leaves no gaps between words: a word before a pause ends where the next one starts,
    so an entry spans its speaker's pauses and the silence before the next person. Each word's span is cut to the
    span of speech it overlaps most (a word that overlaps none keeps its own: Whisper heard what the detectors
    missed), an
    entry starts and ends with its words' cut spans, and it is split between two of its words wherever no single
    span of speech joins them. Words and text are never dropped, changed or moved to another entry: the pieces of
    an entry hold its words in order. Entries without word times are returned as they are. Vectorised over words.
    """
    if not utterances or starts.size == 0 or not any(u.words for u in utterances):
        return utterances
    words = [w for u in utterances for w in u.words]
    owner = np.repeat(np.arange(len(utterances)), [len(u.words) for u in utterances])
    a = np.fromiter((w.start for w in words), dtype=np.float64, count=len(words))
    b = np.maximum(np.fromiter((w.end for w in words), dtype=np.float64, count=len(words)), a)
    # the speech spans a word overlaps are first..last (none when last < first)
    first = np.searchsorted(ends, a, side="right")
    last = np.searchsorted(starts, b, side="left") - 1
    heard = last >= first
    lo = np.where(heard, np.maximum(a, starts[np.clip(first, 0, starts.size - 1)]), a)
    hi = np.where(heard, np.minimum(b, ends[np.clip(last, 0, None)]), b)
    # a word over a pause (it overlaps several spans) keeps the span it overlaps most: the aligner stretches a word
    # over the silence after it, or starts it early, rather than saying it in two parts
    multi = np.flatnonzero(last > first)
    if multi.size:
        counts = last[multi] - first[multi] + 1
        group = np.cumsum(counts) - counts
        word = np.repeat(multi, counts)
        span = first[word] + np.arange(counts.sum()) - np.repeat(group, counts)
        overlap = np.minimum(b[word], ends[span]) - np.maximum(a[word], starts[span])
        best = span[np.lexsort((-overlap, word))[group]]
        lo[multi] = np.maximum(a[multi], starts[best])
        hi[multi] = np.minimum(b[multi], ends[best])
    # a word stays with the previous word of its entry when they touch or one span of speech covers the time
    # between them (the spans are disjoint, so only the span that starts last before the gap can)
    gap_lo, gap_hi = np.concatenate([[0.0], hi[:-1]]), lo
    k = np.clip(np.searchsorted(starts, gap_lo, side="right") - 1, 0, None)
    joined = (gap_hi <= gap_lo) | ((starts[k] <= gap_lo) & (ends[k] >= gap_hi))
    new_entry = np.concatenate([[True], owner[1:] != owner[:-1]]) | ~joined
    bounds = np.flatnonzero(new_entry).tolist() + [len(words)]
    pieces: dict[int, list[tuple[int, int]]] = {}
    for i, j in zip(bounds[:-1], bounds[1:]):
        pieces.setdefault(int(owner[i]), []).append((i, j))
    out: list[Utterance] = []
    for n, u in enumerate(utterances):
        for i, j in pieces.get(n, ()):
            mine = tuple(words[i:j]) if len(pieces[n]) > 1 else u.words
            text = "".join(w.text for w in mine) if len(pieces[n]) > 1 else u.text
            out.append(Utterance(u.speaker, round(float(lo[i:j].min()), 3), round(float(hi[i:j].max()), 3), text, mine))
        if not u.words:
            out.append(u)
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
