"""Stream an audio file to a live route and print what comes back as it arrives.

    python -m speakerscribe.stream meeting.wav [--url http://127.0.0.1:5000] [--protocol realtime|binary]
        [--fast] [--language en] [--final-diarization] [--json] [--token TOKEN]

The file is decoded locally (any format the server accepts) and sent as 16 kHz pcm16 at real-time pace, or with
``--fast`` as fast as the server takes it. ``realtime`` speaks OpenAI's Realtime transcription protocol at
``/v1/realtime?intent=transcription``; ``binary`` the plain protocol at ``/ws``. Partials are printed as they grow
(on a terminal, on one line), finals as ``[start-end] SPEAKER: text``; ``--json`` prints every server message as
one JSON line instead. Ends with the session summary. Exit status: 0, 2 for bad usage or input, 1 when the
connection failed or the server sent an error that ended the session.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

from ..records import SAMPLE_RATE

BLOCK = 1600  # samples per message: 100 ms


def websocket_url(url: str, path: str) -> str:
    url = url.rstrip("/")
    for http, ws in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(http):
            return ws + url[len(http) :] + path
    return url + path


class Printer:
    def __init__(self, as_json: bool):
        self.as_json = as_json
        self.tty = sys.stdout.isatty()
        self.partial: dict[str, str] = {}

    def __call__(self, kind: str, message: dict) -> None:
        if self.as_json:
            print(json.dumps(message, ensure_ascii=False), flush=True)
            return
        if kind == "partial":
            text = self.partial[message["id"]] = self.partial.get(message["id"], "") + message["delta"]
            if self.tty:
                sys.stdout.write("\r\033[K... " + text[-150:])
                sys.stdout.flush()
        elif kind == "final":
            self.partial.pop(message["id"], None)
            prefix = "\r\033[K" if self.tty else ""
            speaker = f"{message['speaker']}: " if message.get("speaker") else ""
            print(
                f"{prefix}[{message['start']:.2f}-{message['end']:.2f}] {speaker}{message['text'].strip()}", flush=True
            )
        elif kind == "summary":
            print(f"== summary ({'re-diarized' if message.get('rediarized') else 'live labels'}): "
                  f"{len(message.get('segments', []))} segments, {message.get('duration')} s")  # fmt: skip
        elif kind == "error":
            print(f"error: {message.get('message')}", file=sys.stderr, flush=True)


def _normalise(protocol: str, message: dict) -> tuple[str, dict]:
    """A server message -> (kind, fields) in the binary protocol's terms."""
    if protocol == "binary":
        return message.get("type", ""), message
    kind = message.get("type", "")
    if kind == "conversation.item.input_audio_transcription.delta":
        return "partial", {"id": message["item_id"], "delta": message["delta"]}
    if kind == "conversation.item.input_audio_transcription.completed":
        return "final", {**message, "id": message["item_id"], "text": message["transcript"]}
    if kind == "transcription.summary":
        return "summary", message
    if kind == "error":
        return "error", message.get("error", {})
    return kind, message


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m speakerscribe.stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--url", default="http://127.0.0.1:5000", help="the server (http(s):// or ws(s)://)")
    parser.add_argument("--protocol", choices=("realtime", "binary"), default="realtime")
    parser.add_argument("--fast", action="store_true", help="send as fast as the server takes it")
    parser.add_argument("--language", default=None)
    parser.add_argument("--prompt", default=None)
    parser.add_argument("--final-diarization", action="store_true", help="diarize the whole session at the end")
    parser.add_argument("--json", action="store_true", help="print every server message as a JSON line")
    parser.add_argument("--token", default=None, help="bearer token (default: SPEAKERSCRIBE_TOKEN, then HF_TOKEN)")
    args = parser.parse_args(argv)
    if not args.file.is_file():
        print(f"error: no such file: {args.file}", file=sys.stderr)
        return 2

    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    from ..audio import decode_audio
    from ..errors import InputError

    try:
        samples = decode_audio(args.file.read_bytes()).waveform.samples
    except InputError as exc:
        print(f"error: {args.file}: {exc}", file=sys.stderr)
        return 2
    pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
    token = args.token or os.environ.get("SPEAKERSCRIBE_TOKEN") or os.environ.get("HF_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    path = "/v1/realtime?intent=transcription" if args.protocol == "realtime" else "/ws"
    show = Printer(args.json)
    failed = {"error": False}

    def configure(ws) -> None:
        if args.protocol == "realtime":
            session = {
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": SAMPLE_RATE},
                        "transcription": {"language": args.language, "prompt": args.prompt},
                    }
                },
                "final_diarization": args.final_diarization,
            }
            ws.send(json.dumps({"type": "session.update", "session": session}))
        else:
            config = {"type": "config", "language": args.language, "prompt": args.prompt}
            ws.send(json.dumps({**config, "final_diarization": args.final_diarization}))

    def sender(ws) -> None:
        start = time.perf_counter()
        try:
            for i in range(0, len(pcm), BLOCK):
                block = pcm[i : i + BLOCK].tobytes()
                if args.protocol == "realtime":
                    ws.send(
                        json.dumps({"type": "input_audio_buffer.append", "audio": base64.b64encode(block).decode()})
                    )
                else:
                    ws.send(block)
                if not args.fast:
                    ahead = (i + BLOCK) / SAMPLE_RATE - (time.perf_counter() - start)
                    if ahead > 0:
                        time.sleep(ahead)
            ws.send(json.dumps({"type": "session.finish"}) if args.protocol == "realtime" else "END_OF_AUDIO")
        except WebSocketException:
            pass  # the receiver reports why the connection ended

    try:
        with connect(websocket_url(args.url, path), additional_headers=headers, max_size=None, open_timeout=30) as ws:
            configure(ws)
            thread = threading.Thread(target=sender, args=(ws,), daemon=True)
            thread.start()
            for raw in ws:
                kind, message = _normalise(args.protocol, json.loads(raw))
                show(kind, message)
                if kind == "error":
                    failed["error"] = True
                if kind == "summary":
                    break
    except (OSError, WebSocketException) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 1 if failed["error"] else 0
