"""Reference clips cut from recordings with known speakers, and how well a named output matches the truth.

Used by ``benchmarks/calibrate_naming.py`` and the known-speaker tests. A reference clip of a person is what a user
would send: that person speaking alone. It is cut from a recording's reference turns: the person's speech where
nobody else speaks, pieces of at least ``min_piece_s`` taken longest first until ``seconds`` are gathered, joined.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speakerscribe.records import SAMPLE_RATE, SpeakerTurn

STEP_S = 0.01  # scoring resolution


def exclusive_spans(turns: tuple[SpeakerTurn, ...], speaker: str) -> list[tuple[float, float]]:
    """Where ``speaker`` talks and nobody else does."""
    own = sorted((t.start, t.end) for t in turns if t.speaker == speaker)
    others = sorted((t.start, t.end) for t in turns if t.speaker != speaker)
    out = []
    for a, b in own:
        pieces = [(a, b)]
        for c, d in others:
            pieces = [q for p in pieces for q in _minus(p, (c, d))]
        out.extend(pieces)
    return out


def _minus(p: tuple[float, float], q: tuple[float, float]) -> list[tuple[float, float]]:
    (a, b), (c, d) = p, q
    if d <= a or c >= b:
        return [p]
    return [x for x in ((a, c), (d, b)) if x[1] > x[0]]


def reference_clip(
    samples: np.ndarray, turns: tuple[SpeakerTurn, ...], speaker: str, seconds: float = 10.0, min_piece_s: float = 0.5
) -> np.ndarray:
    """Up to ``seconds`` of ``speaker`` alone (see the module docstring); empty when they never speak alone."""
    spans = sorted(
        (s for s in exclusive_spans(turns, speaker) if s[1] - s[0] >= min_piece_s), key=lambda s: s[0] - s[1]
    )
    parts, total = [], 0.0
    for a, b in spans:
        take = min(b - a, seconds - total)
        if take < min_piece_s:
            break
        parts.append(samples[int(a * SAMPLE_RATE) : int((a + take) * SAMPLE_RATE)])
        total += take
    return np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)


@dataclass(frozen=True)
class NamingScore:
    """Seconds of single-speaker reference speech (inside ``uem``) of the people who were given a reference:
    ``right`` carry their own name, ``wrong`` another known name, ``unnamed`` a SPEAKER_NN label or none.
    ``intruded``: seconds on which a name of a person absent from the recording appears."""

    speech: float
    right: float
    wrong: float
    unnamed: float
    intruded: float

    @property
    def right_share(self) -> float:
        return self.right / self.speech if self.speech else 1.0

    @property
    def named_precision(self) -> float:
        named = self.right + self.wrong
        return self.right / named if named else 1.0


def _grid(turns, n: int, lo: float) -> list[set[str]]:
    grid: list[set[str]] = [set() for _ in range(n)]
    for t in turns:
        for i in range(max(0, int((t.start - lo) / STEP_S)), min(n, int((t.end - lo) / STEP_S))):
            grid[i].add(t.speaker)
    return grid


def score_naming(
    truth: tuple[SpeakerTurn, ...], output: tuple[SpeakerTurn, ...], names: set[str], uem: tuple[float, float]
) -> NamingScore:
    """Score ``output`` turns (labels are names or SPEAKER_NN) against ``truth`` for the known ``names``."""
    lo, hi = uem
    n = int((hi - lo) / STEP_S)
    ref, hyp = _grid(truth, n, lo), _grid(output, n, lo)
    present = {t.speaker for t in truth}
    speech = right = wrong = unnamed = intruded = 0
    for r, h in zip(ref, hyp):
        intruded += bool(h & (names - present))
        if len(r) != 1:
            continue
        (person,) = r
        if person not in names:
            continue
        speech += 1
        if person in h:
            right += 1
        elif h & names:
            wrong += 1
        else:
            unnamed += 1
    return NamingScore(*(x * STEP_S for x in (speech, right, wrong, unnamed, intruded)))
