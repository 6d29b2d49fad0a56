"""Names for diarized speakers, from short reference clips of people known to be in the recording.

A request names up to :data:`MAX_KNOWN_SPEAKERS` people, each with a clip of that person speaking alone. The
diarizer embeds every clip with its own speaker-embedding model (one batch per request) and every diarized speaker
from the same model; :func:`match_speakers` then gives each name to at most one speaker and each speaker at most one
name (the one-to-one assignment of largest total cosine similarity), keeping only pairs at or above the
threshold. A speaker left without a name keeps its ``SPEAKER_NN`` label; a name left without a speaker is reported
as not found. :func:`rename` applies the names to the diarization, so they appear wherever labels appear.

A diarized speaker is not always one person: the diarizer can put two people in one cluster, or part of a person's
speech in another's. :func:`name_pieces` therefore goes on to name the speech piece by piece: every exclusive turn is
cut into pieces of :data:`PIECE_S` seconds, and a piece whose voice is most similar to some person's clip, at or above
the same threshold, carries that person's name, whichever speaker it was diarized into; other pieces keep the
speaker's label (named or not). Names and ``SPEAKER_NN`` labels then appear as far as the voice allows, not only as
far as the clustering does.

The default threshold and the piece length are calibrated on real meeting speech (``benchmarks/calibrate_naming.py``,
README "Known speakers").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from ..errors import InputError, quote
from ..records import Diarization, Span, SpeakerMatch, SpeakerTurn, Waveform
from . import pieces as turn_pieces

MAX_KNOWN_SPEAKERS = 8
MAX_NAME_CHARS = 64
MIN_REFERENCE_SPEECH_S = 1.0  # speech in a clip; shorter gives no usable voice print
MAX_REFERENCE_SECONDS = 60.0  # decoding stops past this
PIECE_S = 1.0  # speech named piece by piece in pieces this long (calibrated: benchmarks/calibrate_naming.py)
MIN_PIECE_S = 0.5  # shorter pieces (a turn's remainder) are too short to embed: they keep their speaker's label
MAX_PIECES = 6000  # pieces grow on long audio to stay under this (4 hours of speech: 2.4 s pieces)
_DIARIZER_LABEL = re.compile(r"^SPEAKER_\d+$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reference:
    """A decoded reference clip: the person's name, the 16 kHz audio and where in it they speak."""

    name: str
    waveform: Waveform
    speech: tuple[Span, ...]


def check_name(name: object, where: str) -> str:
    """A person's name as given, stripped; InputError naming ``where`` when it is unusable."""
    if not isinstance(name, str):
        raise InputError(f"{where}: a speaker name must be a string, got {type(name).__name__}")
    text = name.strip()
    if not text:
        raise InputError(f"{where}: a speaker name is empty")
    if len(text) > MAX_NAME_CHARS:
        raise InputError(f"{where}: the speaker name {quote(text, 80)} is longer than {MAX_NAME_CHARS} characters")
    if any(unicodedata.category(c).startswith("C") for c in text):
        raise InputError(f"{where}: the speaker name {quote(text, 80)} contains control characters")
    if _DIARIZER_LABEL.match(text):
        raise InputError(
            f"{where}: {quote(text, 80)} looks like a diarizer label (SPEAKER_NN), which unnamed speakers keep; "
            "choose another name"
        )
    return text


def check_names(names: list[object], where: str) -> tuple[str, ...]:
    """Checked names: at most MAX_KNOWN_SPEAKERS, no two the same (ignoring case)."""
    if len(names) > MAX_KNOWN_SPEAKERS:
        raise InputError(f"{where}: at most {MAX_KNOWN_SPEAKERS} known speakers per request, got {len(names)}")
    checked = tuple(check_name(n, where) for n in names)
    seen: set[str] = set()
    for name in checked:
        if name.casefold() in seen:
            raise InputError(f"{where}: the name {quote(name, 80)} is given twice")
        seen.add(name.casefold())
    return checked


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    matrix = np.asarray(matrix, dtype=np.float64)
    return matrix / np.maximum(np.linalg.norm(matrix, axis=-1, keepdims=True), 1e-12)


def match_speakers(
    labels: list[str], speaker_embeddings: np.ndarray, names: tuple[str, ...], reference_embeddings: np.ndarray,
    threshold: float,
) -> tuple[dict[str, str], tuple[SpeakerMatch, ...]]:  # fmt: skip
    """(label -> name for the matched speakers, one :class:`SpeakerMatch` per name in the order given)."""
    from scipy.optimize import linear_sum_assignment

    if not labels or not names:
        return {}, tuple(SpeakerMatch(n, None, None) for n in names)
    similarity = unit_rows(speaker_embeddings) @ unit_rows(reference_embeddings).T  # (speakers, names)
    rows, cols = linear_sum_assignment(similarity, maximize=True)
    mapping: dict[str, str] = {}
    assigned: dict[int, tuple[str, float]] = {}
    for r, c in zip(rows, cols):
        if similarity[r, c] >= threshold:
            mapping[labels[r]] = names[c]
            assigned[c] = (labels[r], float(similarity[r, c]))
    matches = []
    for c, name in enumerate(names):
        if c in assigned:
            label, value = assigned[c]
            matches.append(SpeakerMatch(name, label, round(value, 4)))
        else:
            matches.append(SpeakerMatch(name, None, round(float(similarity[:, c].max()), 4)))
    return mapping, tuple(matches)


def rename(diarization: Diarization, mapping: dict[str, str]) -> Diarization:
    """The same turns with the matched labels replaced by names."""

    def relabel(turns: tuple[SpeakerTurn, ...]) -> tuple[SpeakerTurn, ...]:
        return tuple(SpeakerTurn(t.start, t.end, mapping.get(t.speaker, t.speaker)) for t in turns)

    return Diarization(relabel(diarization.turns), relabel(diarization.exclusive), diarization.known)


def piece_length(exclusive: tuple[SpeakerTurn, ...], piece_s: float = PIECE_S) -> float:
    """The piece length for ``exclusive`` turns: ``piece_s``, longer when there would be over MAX_PIECES."""
    return max(piece_s, sum(t.end - t.start for t in exclusive) / MAX_PIECES)


def name_pieces(
    diarization: Diarization,
    mapping: dict[str, str],
    matches: tuple[SpeakerMatch, ...],
    pieces: list[SpeakerTurn],
    embeddings: np.ndarray,
    reference_embeddings: np.ndarray,
    threshold: float,
) -> Diarization:
    """The diarization named piece by piece (see the module docstring).

    ``diarization`` carries the diarizer's labels; ``mapping`` and ``matches`` are :func:`match_speakers`' answer
    for its speakers; ``pieces`` are its exclusive turns cut by :func:`speakerscribe.speakers.pieces.cut`, and
    ``embeddings``
    hold one row per piece of at least :data:`MIN_PIECE_S` seconds, in order. A name that only pieces carry is
    reported found, with the label most of its pieces were diarized under and their mean similarity (weighted by
    time); a name that no speech carries any more is reported not found."""
    names = tuple(m.name for m in matches)
    new = [mapping.get(p.speaker, p.speaker) for p in pieces]
    long = np.flatnonzero([p.end - p.start >= MIN_PIECE_S for p in pieces])
    taken: dict[str, dict[str, float]] = {}  # name -> diarizer label -> seconds of pieces it took from that label
    weighted: dict[str, float] = {}  # name -> sum of similarity x seconds over those pieces
    if len(long) and names:
        similarity = unit_rows(embeddings) @ unit_rows(reference_embeddings).T  # (long pieces, names)
        best = similarity.argmax(axis=1)
        for row, (i, b) in enumerate(zip(long.tolist(), best.tolist())):
            if similarity[row, b] < threshold or new[i] == names[b]:
                continue
            seconds = pieces[i].end - pieces[i].start
            new[i] = names[b]
            by_label = taken.setdefault(names[b], {})
            by_label[pieces[i].speaker] = by_label.get(pieces[i].speaker, 0.0) + seconds
            weighted[names[b]] = weighted.get(names[b], 0.0) + float(similarity[row, b]) * seconds
    exclusive = turn_pieces.join([SpeakerTurn(p.start, p.end, label) for p, label in zip(pieces, new)])
    turns = turn_pieces.relabel_overlapping(diarization.turns, pieces, new, mapping)
    present = {t.speaker for t in turns} | {t.speaker for t in exclusive}
    known = []
    for m in matches:
        if m.name not in present:
            known.append(SpeakerMatch(m.name, None, m.similarity))
        elif m.speaker is None:
            by_label = taken[m.name]
            label = max(by_label, key=by_label.get)
            known.append(SpeakerMatch(m.name, label, round(weighted[m.name] / sum(by_label.values()), 4)))
        else:
            known.append(m)
    return Diarization(turns, exclusive, tuple(known))
