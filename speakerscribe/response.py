"""The Endpoints wire schema: the original handler's ``{"speakers", "chunks", "text"}`` plus additive keys.

Times are seconds rounded to milliseconds; every value is a plain JSON type (no numpy scalars).
"""

from __future__ import annotations

from typing import Any

from .records import Chunk, Diarization, Result, SpeakerTurn, Transcript, Utterance, Word


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


def known_json(result: Result) -> list[dict[str, Any]]:
    """What became of each known speaker: found or not, the diarizer label the name replaced, the similarity."""
    known = result.diarization.known if result.diarization is not None else ()
    return [{"name": m.name, "found": m.found, "label": m.speaker, "similarity": m.similarity} for m in known]


def endpoint_response(result: Result, words: bool = False) -> dict[str, Any]:
    transcript = result.transcript
    lp = transcript.language_probability
    known = known_json(result)
    return {
        "speakers": [utterance_json(u, words) for u in result.utterances],
        "chunks": [chunk_json(c, words) for c in transcript.chunks],
        "text": transcript.text,
        "language": transcript.language,
        "language_probability": None if lp is None else round(float(lp), 4),
        "duration": _t(result.duration),
        "warnings": list(result.warnings),
        "timings": {k: round(float(v), 4) for k, v in result.timings.items()},
    } | ({"known_speakers": known} if known else {})


def result_from_response(data: dict[str, Any]) -> Result:
    """An endpoint's JSON answer back into a :class:`Result`, for rendering it in another format (the batch
    client). The diarization turns are the ``speakers`` entries (overlapping turns are not in the answer)."""

    def words(items) -> tuple[Word, ...]:
        return tuple(Word(" " + w["word"], float(w["start"]), float(w["end"]), speaker=w.get("speaker")) for w in items)

    def span(timestamp, fallback: float) -> tuple[float, float]:
        start = float(timestamp[0] or 0.0)
        end = float(timestamp[1]) if timestamp[1] is not None else max(start, fallback)
        return start, end

    duration = float(data.get("duration") or 0.0)
    chunks = tuple(
        Chunk(*span(c["timestamp"], duration), c["text"], words(c.get("words", ()))) for c in data.get("chunks", ())
    )
    utterances = tuple(
        Utterance(u["speaker"], *span(u["timestamp"], duration), u["text"], words(u.get("words", ())))
        for u in data.get("speakers", ())
    )
    turns = tuple(SpeakerTurn(u.start, u.end, u.speaker) for u in utterances)
    return Result(
        transcript=Transcript(chunks, data.get("language"), data.get("language_probability")),
        duration=duration,
        utterances=utterances,
        diarization=Diarization(turns, turns) if turns else None,
        warnings=tuple(data.get("warnings", ())),
        timings=dict(data.get("timings", {})),
    )
