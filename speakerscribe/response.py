"""The Endpoints wire schema: the original handler's ``{"speakers", "chunks", "text"}`` plus additive keys.

Times are seconds rounded to milliseconds; every value is a plain JSON type (no numpy scalars).
"""

from __future__ import annotations

from typing import Any

from .records import Chunk, Result, Utterance, Word


def _t(x: float) -> float:
    return round(float(x), 3)


def word_json(w: Word) -> dict[str, Any]:
    out: dict[str, Any] = {"word": w.text.strip(), "start": _t(w.start), "end": _t(w.end)}
    if w.speaker is not None:
        out["speaker"] = w.speaker
    return out


def chunk_json(c: Chunk, words: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"timestamp": [_t(c.start), _t(c.end)], "text": c.text}
    if words:
        out["words"] = [word_json(w) for w in c.words]
    return out


def utterance_json(u: Utterance, words: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"speaker": u.speaker, "timestamp": [_t(u.start), _t(u.end)], "text": u.text}
    if words:
        out["words"] = [word_json(w) for w in u.words]
    return out


def endpoint_response(result: Result, words: bool = False) -> dict[str, Any]:
    transcript = result.transcript
    lp = transcript.language_probability
    return {
        "speakers": [utterance_json(u, words) for u in result.utterances],
        "chunks": [chunk_json(c, words) for c in transcript.chunks],
        "text": transcript.text,
        "language": transcript.language,
        "language_probability": None if lp is None else round(float(lp), 4),
        "duration": _t(result.duration),
        "warnings": list(result.warnings),
        "timings": {k: round(float(v), 4) for k, v in result.timings.items()},
    }
