"""Names for diarized speakers, from short reference clips of people known to be in the recording.

A request names up to :data:`MAX_KNOWN_SPEAKERS` people, each with a clip of that person speaking alone. The
diarizer embeds every clip with its own speaker-embedding model (one batch per request) and every diarized speaker
from the same model; :func:`match_speakers` then gives each name to at most one speaker and each speaker at most one
name (the one-to-one assignment of largest total cosine similarity), keeping only pairs at or above the
threshold. A speaker left without a name keeps its ``SPEAKER_NN`` label; a name left without a speaker is reported
as not found. :func:`rename` applies the names to the diarization, so they appear wherever labels appear.

The default threshold is calibrated on real meeting speech (``benchmarks/calibrate_naming.py``, README
"Known speakers").
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

from .errors import InputError, quote
from .records import Diarization, Span, SpeakerMatch, SpeakerTurn, Waveform

MAX_KNOWN_SPEAKERS = 8
MAX_NAME_CHARS = 64
MIN_REFERENCE_SPEECH_S = 1.0  # speech in a clip; shorter gives no usable voice print
MAX_REFERENCE_SECONDS = 60.0  # decoding stops past this
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
