"""Output formats shared by the server and the CLI: readable text, SRT, WebVTT, RTTM, and the OpenAI JSON shapes.

Timestamps are formatted from integer milliseconds, so hours past 99 and rounding at x.9995 s stay correct.
"""

from __future__ import annotations

from typing import Any

from .asr.tokens import compression_ratio
from .records import Result, Utterance
from .response import endpoint_response, known_json


def _ms(seconds: float) -> int:
    return max(0, int(round(seconds * 1000)))


def clock(seconds: float, sep: str = ".", always_hours: bool = True) -> str:
    """``3725.5`` -> ``01:02:05.500`` (``sep=','`` for SRT)."""
    ms = _ms(seconds)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    if always_hours or h:
        return f"{h:02d}:{m:02d}:{s:02d}{sep}{ms:03d}"
    return f"{m:02d}:{s:02d}{sep}{ms:03d}"


def entries(result: Result) -> list[Utterance]:
    """Speaker-attributed utterances when diarized, else one speaker-less entry per transcript chunk."""
    if result.utterances:
        return list(result.utterances)
    return [Utterance("", c.start, c.end, c.text, c.words) for c in result.transcript.chunks]


def to_text(result: Result) -> str:
    lines = []
    for u in entries(result):
        who = f"{u.speaker}: " if u.speaker else ""
        lines.append(f"[{clock(u.start)} --> {clock(u.end)}] {who}{u.text.strip()}")
    return "\n".join(lines) + ("\n" if lines else "")


def to_srt(result: Result) -> str:
    blocks = []
    for i, u in enumerate(entries(result), start=1):
        who = f"{u.speaker}: " if u.speaker else ""
        blocks.append(f"{i}\n{clock(u.start, ',')} --> {clock(u.end, ',')}\n{who}{u.text.strip()}\n")
    return "\n".join(blocks)


def _vtt_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def to_vtt(result: Result) -> str:
    out = ["WEBVTT", ""]
    for u in entries(result):
        body = _vtt_escape(u.text.strip())
        if u.speaker:
            body = f"<v {_vtt_escape(u.speaker)}>{body}"
        out += [f"{clock(u.start)} --> {clock(u.end)}", body, ""]
    return "\n".join(out)


def _rttm_field(text: str) -> str:
    """RTTM fields are separated by spaces: a name's spaces become underscores ("Ada Lovelace" -> Ada_Lovelace)."""
    return "".join(ch if not ch.isspace() else "_" for ch in text)


def to_rttm(result: Result, uri: str = "audio") -> str:
    """NIST RTTM of the diarization turns (overlaps included); empty when nothing was diarized."""
    uri = _rttm_field(uri) or "audio"
    if result.diarization is None:
        return ""
    return "".join(
        f"SPEAKER {uri} 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> {_rttm_field(t.speaker)} <NA> <NA>\n"
        for t in result.diarization.turns
    )


def to_openai_json(result: Result) -> dict[str, Any]:
    return {"text": result.transcript.text.strip()}


def to_openai_verbose(result: Result, words: bool, segments: bool = True, temperature: float = 0.0) -> dict[str, Any]:

    transcript = result.transcript
    out: dict[str, Any] = {
        "task": "transcribe",
        "language": transcript.language,
        "duration": round(result.duration, 3),
        "text": transcript.text.strip(),
    }
    if segments:
        out["segments"] = [
            {
                "id": i,
                "seek": 0,
                "start": round(c.start, 3),
                "end": round(c.end, 3),
                "text": c.text,
                "tokens": [],
                "temperature": temperature,
                "avg_logprob": c.avg_logprob if c.avg_logprob is not None else 0.0,
                "compression_ratio": round(compression_ratio(c.text), 3),
                "no_speech_prob": c.no_speech_prob if c.no_speech_prob is not None else 0.0,
            }
            for i, c in enumerate(transcript.chunks)
        ]
    if words:
        speaker_of = {(w.start, w.end, w.text): w.speaker for u in result.utterances for w in u.words}
        out["words"] = []
        for c in transcript.chunks:
            for w in c.words:
                item: dict[str, Any] = {"word": w.text.strip(), "start": round(w.start, 3), "end": round(w.end, 3)}
                speaker = speaker_of.get((w.start, w.end, w.text))
                if speaker:
                    item["speaker"] = speaker
                out["words"].append(item)
    return out


def to_openai_diarized(result: Result) -> dict[str, Any]:
    """OpenAI's diarized_json; ``known_speakers`` (ours) when the request named people."""
    known = known_json(result)
    return {
        "task": "transcribe",
        "duration": round(result.duration, 3),
        "text": result.transcript.text.strip(),
        "segments": [
            {
                "type": "transcript.text.segment",
                "id": f"seg_{i}",
                "start": round(u.start, 3),
                "end": round(u.end, 3),
                "speaker": u.speaker or None,
                "text": u.text.strip(),
            }
            for i, u in enumerate(entries(result))
        ],
    } | ({"known_speakers": known} if known else {})


FILE_FORMATS = ("json", "txt", "srt", "vtt", "rttm")


def render(result: Result, fmt: str, words: bool = False, uri: str = "audio") -> str:
    """One of :data:`FILE_FORMATS` as text."""
    import json

    if fmt == "json":
        return json.dumps(endpoint_response(result, words=words), ensure_ascii=False, indent=1) + "\n"
    if fmt == "txt":
        return to_text(result)
    if fmt == "srt":
        return to_srt(result)
    if fmt == "vtt":
        return to_vtt(result)
    if fmt == "rttm":
        return to_rttm(result, uri)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FILE_FORMATS)}")
