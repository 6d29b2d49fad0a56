"""The plain live protocol at ``/ws``: binary audio in, JSON results out (in the spirit of speech-to-speech's server).

Client -> server:

* binary messages: raw pcm16 little-endian mono audio at 16 kHz (or the ``sample_rate`` configured), any length
  (512-sample blocks are typical);
* optionally, before any audio, a JSON text message ``{"type": "config", "language", "prompt", "sample_rate",
  "turn_detection": {"threshold", "prefix_padding_ms", "silence_duration_ms"} | null, "final_diarization"}``;
* ``{"type": "commit"}`` ends the current turn now (the only way with ``turn_detection: null``);
* ``END_OF_AUDIO`` (text) or ``{"type": "end"}``: complete what is pending, send the summary, close.

Server -> client (JSON text): ``{"type": "ready", "config": {...}}`` on connect and after a config;
``{"type": "speech_started", "id", "start"}``, ``{"type": "speech_stopped", "id", "end"}``, ``{"type": "partial",
"id", "delta"}`` (words confirmed so far in the turn, never retracted), ``{"type": "final", "id", "start", "end",
"text", "speaker", "speaker_similarity", "words"}``, ``{"type": "summary", ...diarized_json, "rediarized"}``,
``{"type": "error", "code", "message"}``. A bad message gets an error and the session goes on.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.websockets import WebSocket

from ..formats import to_openai_diarized
from ..live.session import Completed, Delta, SpeechStarted, SpeechStopped, StreamOptions, Summary
from ..response import word_json
from .realtime import updated_options
from .streaming import Append, Commit, Configure, Finish, Protocol, ProtocolError, Resampler, serve_stream

END = "END_OF_AUDIO"


class BinaryProtocol(Protocol):
    name = "binary"

    def __init__(self):
        self.rate = 16000
        self.resample = Resampler(self.rate)
        self.options = StreamOptions()

    def config(self) -> dict[str, Any]:
        o = self.options
        td = o.turn_detection
        return {
            "sample_rate": self.rate,
            "language": o.language,
            "prompt": o.prompt,
            "turn_detection": None
            if td is None
            else {
                "threshold": td.threshold,
                "prefix_padding_ms": td.prefix_padding_ms,
                "silence_duration_ms": td.silence_duration_ms,
            },
            "final_diarization": o.final_diarization,
        }

    def opening(self, options: StreamOptions) -> list[dict]:
        return [{"type": "ready", "config": self.config()}]

    def parse(self, message: dict) -> list:
        data = message.get("bytes")
        if data is not None:
            return [Append(self.resample(data))] if data else []
        text = (message.get("text") or "").strip()
        if text == END:
            return [Finish()]
        try:
            event = json.loads(text)
        except (ValueError, RecursionError):
            raise ProtocolError(f'text messages are JSON ({{"type": "config" | "commit" | "end"}}) or {END}') from None
        kind = event.get("type") if isinstance(event, dict) else None
        if kind == "end":
            return [Finish()]
        if kind == "commit":
            return [Commit()]
        if kind == "config":
            return [self._configure(event)]
        raise ProtocolError(f"unknown message type {str(kind)[:60]!r}; use config, commit or end", "unsupported_event")

    def _configure(self, event: dict) -> Configure:
        rate = event.get("sample_rate", self.rate)
        if not isinstance(rate, int) or isinstance(rate, bool) or not 8000 <= rate <= 48000:
            raise ProtocolError("`sample_rate` must be an integer from 8000 to 48000", "invalid_config")
        # the same checks and defaults as the realtime protocol's session.update
        transcription = {k: event[k] for k in ("language", "prompt") if k in event}
        try:
            self.options = updated_options(
                self.options, transcription, event.get("turn_detection", "keep"), event, None
            )
        except ProtocolError as exc:
            raise ProtocolError(str(exc), "invalid_config") from None
        if rate != self.rate:
            self.rate, self.resample = rate, Resampler(rate)
        return Configure(self.options, {"type": "ready", "config": self.config()})

    def encode(self, event) -> list[dict]:
        if isinstance(event, SpeechStarted):
            return [{"type": "speech_started", "id": event.item_id, "start": round(event.start, 3)}]
        if isinstance(event, SpeechStopped):
            return [{"type": "speech_stopped", "id": event.item_id, "end": round(event.end, 3)}]
        if isinstance(event, Delta):
            return [{"type": "partial", "id": event.item_id, "delta": event.text}]
        if isinstance(event, Completed):
            return [
                {
                    "type": "final",
                    "id": event.item_id,
                    "start": round(event.start, 3),
                    "end": round(event.end, 3),
                    "text": event.text,
                    "speaker": event.speaker,
                    "speaker_similarity": None
                    if event.speaker_similarity is None
                    else round(event.speaker_similarity, 4),
                    "words": [word_json(w) for w in event.words],
                }
            ]
        if isinstance(event, Summary):
            return [{"type": "summary", **to_openai_diarized(event.result), "rediarized": event.rediarized}]
        return []

    def error(self, message: str, code: str, event_id: str | None = None) -> dict:
        return {"type": "error", "code": code, "message": message}


async def binary(websocket: WebSocket) -> None:
    protocol = BinaryProtocol()
    await serve_stream(websocket, protocol, protocol.options)
