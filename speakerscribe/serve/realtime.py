"""OpenAI's Realtime transcription protocol at ``/v1/realtime?intent=transcription`` (WebSocket, JSON events).

Client events: ``session.update`` (GA: ``session.type: "transcription"``, ``session.audio.input.format``
``{type: "audio/pcm", rate: 24000 | 16000}``, ``.transcription {model, language, prompt}``, ``.turn_detection``
``{type: "server_vad", threshold, prefix_padding_ms, silence_duration_ms}`` or null for manual commits) or the beta
``transcription_session.update`` (flat ``input_audio_format: "pcm16"``, ``input_audio_transcription``,
``turn_detection``); ``input_audio_buffer.append {audio: base64 pcm16}``, ``.commit``, ``.clear``; and ours,
``session.finish`` (complete what is pending, send ``transcription.summary``, close).

Server events: ``session.created`` / ``session.updated`` (``transcription_session.*`` for the beta form),
``input_audio_buffer.speech_started`` / ``speech_stopped`` / ``committed`` / ``cleared``,
``conversation.item.input_audio_transcription.delta`` and ``.completed``, ``error``. ``completed`` carries ours
beside OpenAI's fields: ``start``, ``end`` (seconds of the session), ``words`` (with times and speaker),
``speaker`` (a label that holds for the whole session) and ``speaker_similarity``. ``transcription.summary`` has
the ``diarized_json`` shape plus ``rediarized``.

Our extensions to the session object: ``final_diarization`` (bool: diarize the whole session again at the end)
and ``speaker_threshold``.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import uuid
from typing import Any

from starlette.websockets import WebSocket

from ..formats import to_openai_diarized
from ..live.session import (
    Cleared,
    Committed,
    Completed,
    Delta,
    SpeechStarted,
    SpeechStopped,
    StreamOptions,
    Summary,
    TurnDetection,
)
from ..response import word_json
from .streaming import Append, Clear, Commit, Configure, Finish, Protocol, ProtocolError, Resampler, serve_stream

RATES = (24000, 16000)
MODEL = "speakerscribe"


def _event_id() -> str:
    return "event_" + uuid.uuid4().hex[:20]


class RealtimeProtocol(Protocol):
    name = "realtime"

    def __init__(self):
        self.rate = 24000
        self.resample = Resampler(self.rate)
        self.beta = False
        self.options = StreamOptions()
        self.session_id = "sess_" + uuid.uuid4().hex[:20]
        self._ids = itertools.count()

    # ------------------------------------------------------------------------------------------ session
    def session_object(self) -> dict[str, Any]:
        o = self.options
        td = o.turn_detection
        turn = (
            None
            if td is None
            else {
                "type": "server_vad",
                "threshold": td.threshold,
                "prefix_padding_ms": td.prefix_padding_ms,
                "silence_duration_ms": td.silence_duration_ms,
            }
        )
        transcription = {"model": MODEL, "language": o.language, "prompt": o.prompt or ""}
        ours = {"final_diarization": o.final_diarization, "speaker_threshold": o.speaker_threshold}
        if self.beta:
            return {
                "id": self.session_id,
                "object": "realtime.transcription_session",
                "input_audio_format": "pcm16",
                "input_audio_transcription": transcription,
                "turn_detection": turn,
                **ours,
            }
        return {
            "type": "transcription",
            "id": self.session_id,
            "object": "realtime.transcription_session",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": self.rate},
                    "transcription": transcription,
                    "turn_detection": turn,
                    "noise_reduction": None,
                }
            },
            **ours,
        }

    def opening(self, options: StreamOptions) -> list[dict]:
        return [{"type": "session.created", "event_id": _event_id(), "session": self.session_object()}]

    # ------------------------------------------------------------------------------------------- parsing
    def parse(self, message: dict) -> list:
        if message.get("text") is None:
            raise ProtocolError("events are JSON text messages; audio goes base64 in input_audio_buffer.append")
        try:
            event = json.loads(message["text"])
        except (ValueError, RecursionError):
            raise ProtocolError("the message is not valid JSON", "invalid_json") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            raise ProtocolError('an event is a JSON object with a "type"', "invalid_event")
        kind, event_id = event["type"], event.get("event_id")
        event_id = event_id if isinstance(event_id, str) else None
        if kind == "input_audio_buffer.append":
            audio = event.get("audio")
            if not isinstance(audio, str):
                raise ProtocolError("`audio` must be base64-encoded pcm16", "invalid_audio", event_id)
            try:
                data = base64.b64decode(audio, validate=True)
            except (binascii.Error, ValueError):
                raise ProtocolError("`audio` is not valid base64", "invalid_audio", event_id) from None
            try:
                return [Append(self.resample(data))] if data else []
            except ProtocolError as exc:
                raise ProtocolError(str(exc), exc.code, event_id) from None
        if kind == "input_audio_buffer.commit":
            return [Commit(event_id)]
        if kind == "input_audio_buffer.clear":
            return [Clear(event_id)]
        if kind in ("session.update", "transcription_session.update"):
            return [self._configure(event.get("session"), kind == "transcription_session.update", event_id)]
        if kind == "session.finish":
            return [Finish()]
        raise ProtocolError(
            f"unsupported event type {kind[:80]!r}; a transcription session takes session.update, "
            "input_audio_buffer.append / commit / clear, and session.finish",
            "unsupported_event",
            event_id,
        )

    def _configure(self, session: Any, beta: bool, event_id: str | None) -> Configure:
        if not isinstance(session, dict):
            raise ProtocolError("`session` must be an object", "invalid_session", event_id)
        o = self.options
        rate = self.rate
        if beta:
            fmt = session.get("input_audio_format", "pcm16")
            if fmt != "pcm16":
                raise ProtocolError(f"input_audio_format {str(fmt)[:40]!r}: only pcm16", "invalid_format", event_id)
            rate = 24000
            transcription = session.get("input_audio_transcription") or {}
            turn = session.get("turn_detection", "keep")
        else:
            kind = session.get("type", "transcription")
            if kind != "transcription":
                raise ProtocolError(
                    f"session type {str(kind)[:40]!r}: this server only transcribes (connect with "
                    "?intent=transcription and send type 'transcription')",
                    "invalid_session",
                    event_id,
                )
            audio_in = (session.get("audio") or {}).get("input") or {}
            fmt = audio_in.get("format") or {}
            if fmt:
                if fmt.get("type", "audio/pcm") != "audio/pcm" or fmt.get("rate", 24000) not in RATES:
                    raise ProtocolError(
                        f"audio format {json.dumps(fmt)[:100]}: use audio/pcm at 24000 or 16000 Hz",
                        "invalid_format",
                        event_id,
                    )
                rate = int(fmt.get("rate", 24000))
            transcription = audio_in.get("transcription") or {}
            turn = audio_in.get("turn_detection", "keep")
        self.options = updated_options(o, transcription, turn, session, event_id)
        self.beta = beta
        if rate != self.rate:
            self.rate, self.resample = rate, Resampler(rate)
        reply = {
            "type": "transcription_session.updated" if beta else "session.updated",
            "event_id": _event_id(),
            "session": self.session_object(),
        }
        return Configure(self.options, reply)

    # ------------------------------------------------------------------------------------------ encoding
    def encode(self, event) -> list[dict]:
        e: dict[str, Any]
        if isinstance(event, SpeechStarted):
            e = {
                "type": "input_audio_buffer.speech_started",
                "audio_start_ms": round(event.start * 1000),
                "item_id": event.item_id,
            }
        elif isinstance(event, SpeechStopped):
            e = {
                "type": "input_audio_buffer.speech_stopped",
                "audio_end_ms": round(event.end * 1000),
                "item_id": event.item_id,
            }
        elif isinstance(event, Committed):
            e = {
                "type": "input_audio_buffer.committed",
                "item_id": event.item_id,
                "previous_item_id": event.previous_item_id,
            }
        elif isinstance(event, Cleared):
            e = {"type": "input_audio_buffer.cleared"}
        elif isinstance(event, Delta):
            e = {
                "type": "conversation.item.input_audio_transcription.delta",
                "item_id": event.item_id,
                "content_index": 0,
                "delta": event.text,
            }
        elif isinstance(event, Completed):
            e = {
                "type": "conversation.item.input_audio_transcription.completed",
                "item_id": event.item_id,
                "content_index": 0,
                "transcript": event.text,
                "usage": {"type": "duration", "seconds": round(event.end - event.start, 3)},
                "start": round(event.start, 3),
                "end": round(event.end, 3),
                "words": [word_json(w) for w in event.words],
                "speaker": event.speaker,
                "speaker_similarity": None if event.speaker_similarity is None else round(event.speaker_similarity, 4),
            }
        elif isinstance(event, Summary):
            e = {"type": "transcription.summary", **to_openai_diarized(event.result), "rediarized": event.rediarized}
        else:
            return []
        return [{"event_id": _event_id(), **e}]

    def error(self, message: str, code: str, event_id: str | None = None) -> dict:
        return {
            "type": "error",
            "event_id": _event_id(),
            "error": {
                "type": "invalid_request_error",
                "code": code,
                "message": message,
                "param": None,
                "event_id": event_id,
            },
        }


async def realtime(websocket: WebSocket) -> None:
    intent = websocket.query_params.get("intent")
    protocol = RealtimeProtocol()
    if intent not in (None, "transcription"):
        await websocket.accept()
        await websocket.send_json(
            protocol.error(
                f"intent {intent[:40]!r}: this server only transcribes (intent=transcription)", "invalid_intent"
            )
        )
        await websocket.close(code=1008)
        return
    await serve_stream(websocket, protocol, protocol.options)


def updated_options(
    current: StreamOptions, transcription: Any, turn: Any, session: dict, event_id: str | None
) -> StreamOptions:
    """The session options after an update, each value checked; what the update does not name stays as in
    ``current``: ``transcription`` ({language, prompt}), ``turn`` (``"keep"``, or a ``turn_detection`` object or
    None) and ``session``'s ``final_diarization`` / ``speaker_threshold``. Both WebSocket protocols take it."""
    language, prompt, detection = current.language, current.prompt, current.turn_detection
    if not isinstance(transcription, dict):
        raise ProtocolError("`transcription` must be an object", "invalid_session", event_id)
    if "language" in transcription:
        language = transcription["language"] or None
    if "prompt" in transcription:
        prompt = transcription["prompt"] or None
    for name, value in (("language", language), ("prompt", prompt)):
        if value is not None and (not isinstance(value, str) or len(value) > (40 if name == "language" else 4000)):
            raise ProtocolError(
                f"`{name}` must be a string (at most 40 / 4000 characters)", "invalid_session", event_id
            )
    if turn != "keep":
        detection = turn_detection(turn, event_id)
    final = session.get("final_diarization", current.final_diarization)
    threshold = session.get("speaker_threshold", current.speaker_threshold)
    if not isinstance(final, bool):
        raise ProtocolError("`final_diarization` must be true or false", "invalid_session", event_id)
    if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not -1 <= threshold <= 1:
        raise ProtocolError("`speaker_threshold` must be a number from -1 to 1", "invalid_session", event_id)
    return StreamOptions(
        language=language,
        prompt=prompt,
        turn_detection=detection,
        final_diarization=final,
        speaker_threshold=float(threshold),
    )


def turn_detection(turn: Any, event_id: str | None) -> TurnDetection | None:
    """A ``turn_detection`` object checked: None (manual commits) or server VAD with its bounds."""
    if turn is None:
        return None
    if not isinstance(turn, dict) or turn.get("type", "server_vad") != "server_vad":
        raise ProtocolError(
            "turn_detection must be null (manual commits) or {type: 'server_vad', threshold, prefix_padding_ms, "
            "silence_duration_ms}",
            "invalid_turn_detection",
            event_id,
        )
    d = TurnDetection()
    values = {
        "threshold": turn.get("threshold", d.threshold),
        "prefix_padding_ms": turn.get("prefix_padding_ms", d.prefix_padding_ms),
        "silence_duration_ms": turn.get("silence_duration_ms", d.silence_duration_ms),
    }
    bounds = {"threshold": (0.0, 1.0), "prefix_padding_ms": (0, 5000), "silence_duration_ms": (100, 10000)}
    for key, value in values.items():
        lo, hi = bounds[key]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not lo <= value <= hi:
            raise ProtocolError(
                f"turn_detection.{key} must be a number from {lo} to {hi}", "invalid_turn_detection", event_id
            )
    return TurnDetection(
        float(values["threshold"]), int(values["prefix_padding_ms"]), int(values["silence_duration_ms"])
    )
