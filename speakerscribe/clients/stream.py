"""Stream an audio file, or the microphone, to a live route and print what comes back as it arrives.

    python -m speakerscribe.stream meeting.wav [--url http://127.0.0.1:5000] [--protocol realtime|binary]
        [--fast] [--language en] [--final-diarization] [--json] [--token TOKEN]
    python -m speakerscribe.stream --mic [--device N|NAME] [--url ...] [--token TOKEN]
    python -m speakerscribe.stream --list-devices

A file is decoded locally (any format the server accepts) and sent as 16 kHz pcm16 at real-time pace, or with
``--fast`` as fast as the server takes it. ``--mic`` records from the default (or chosen) input device at its own
rate and sends it resampled to 16 kHz pcm16 (:mod:`.mic`; needs the ``sounddevice`` package and PortAudio).
``realtime`` speaks OpenAI's Realtime transcription protocol at ``/v1/realtime?intent=transcription``; ``binary``
the plain protocol at ``/ws``. Partials are printed as they grow (on a terminal, redrawn in place on one line),
finals as ``[start-end] SPEAKER: text``; ``--json`` prints every server message as one JSON line instead. Ctrl-C
stops sending, lets the server finish the session and prints its summary (a second Ctrl-C gives up). Exit status:
0, 2 for bad usage or input (no such file, no such device), 1 when the connection failed or the server sent an
error that ended the session, 130 when interrupted twice.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from ..records import SAMPLE_RATE

logger = logging.getLogger(__name__)

BLOCK = 1600  # samples per message: 100 ms


def websocket_url(url: str, path: str) -> str:
    url = url.rstrip("/")
    for http, ws in (("https://", "wss://"), ("http://", "ws://")):
        if url.startswith(http):
            return ws + url[len(http) :] + path
    return url + path


class Printer:
    """Shows server messages: on a terminal the growing partial is redrawn in place (``\\r`` + clear-line) and
    replaced by the final line; elsewhere only final lines and the summary, one per line."""

    def __init__(self, as_json: bool, out: TextIO | None = None):
        self.as_json = as_json
        self.out = out or sys.stdout
        self.tty = self.out.isatty()
        self.partial: dict[str, str] = {}

    def __call__(self, kind: str, message: dict) -> None:
        out = self.out
        if self.as_json:
            print(json.dumps(message, ensure_ascii=False), file=out, flush=True)
            return
        if kind == "partial":
            text = self.partial[message["id"]] = self.partial.get(message["id"], "") + message["delta"]
            if self.tty:
                out.write("\r\033[K... " + text.strip()[-150:])
                out.flush()
        elif kind == "final":
            self.partial.pop(message["id"], None)
            prefix = "\r\033[K" if self.tty else ""
            speaker = f"{message['speaker']}: " if message.get("speaker") else ""
            line = f"{prefix}[{message['start']:.2f}-{message['end']:.2f}] {speaker}{message['text'].strip()}"
            print(line, file=out, flush=True)
        elif kind == "summary":
            prefix = "\r\033[K" if self.tty and self.partial else ""
            labels = "re-diarized" if message.get("rediarized") else "live labels"
            segments = len(message.get("segments", []))
            line = f"{prefix}== summary ({labels}): {segments} segments, {message.get('duration')} s"
            print(line, file=out, flush=True)
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


@dataclass(frozen=True)
class StreamTarget:
    """Where and how to stream: the server, the protocol and the session's options."""

    url: str
    protocol: str = "realtime"
    token: str | None = None
    language: str | None = None
    prompt: str | None = None
    final_diarization: bool = False


def _configure_message(target: StreamTarget) -> dict[str, Any]:
    if target.protocol == "realtime":
        session = {
            "type": "transcription",
            "audio": {
                "input": {
                    "format": {"type": "audio/pcm", "rate": SAMPLE_RATE},
                    "transcription": {"language": target.language, "prompt": target.prompt},
                }
            },
            "final_diarization": target.final_diarization,
        }
        return {"type": "session.update", "session": session}
    config = {"type": "config", "language": target.language, "prompt": target.prompt}
    return {**config, "final_diarization": target.final_diarization}


def file_blocks(pcm: np.ndarray, fast: bool, stop: threading.Event) -> Iterator[bytes]:
    """16 kHz pcm16 blocks of a decoded file, at real-time pace unless ``fast``; ends early once ``stop`` is set."""
    start = time.perf_counter()
    for i in range(0, len(pcm), BLOCK):
        if stop.is_set():
            return
        yield pcm[i : i + BLOCK].tobytes()
        if not fast:
            ahead = (i + BLOCK) / SAMPLE_RATE - (time.perf_counter() - start)
            if ahead > 0:
                stop.wait(ahead)


@contextmanager
def stop_on_interrupt(stop: threading.Event):
    """While inside, the first Ctrl-C (SIGINT) sets ``stop`` (the session is finished cleanly: its summary still
    comes); a second raises KeyboardInterrupt. Outside the main thread signals cannot be caught: nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("\n(stopping: the server finishes the session; Ctrl-C again to give up)", file=sys.stderr, flush=True)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def stream_blocks(target: StreamTarget, blocks: Iterable[bytes], show: Printer) -> int:
    """Stream 16 kHz pcm16 ``blocks`` over ``target``'s protocol, showing what comes back, until the summary.
    When the blocks end (a source ends them on Ctrl-C) the session is finished. Returns the exit status (0, or 1
    when the connection failed or the server reported an error)."""
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    path = "/v1/realtime?intent=transcription" if target.protocol == "realtime" else "/ws"
    realtime = target.protocol == "realtime"
    failed = False

    def sender(ws) -> None:
        try:
            for block in blocks:
                if realtime:
                    audio = base64.b64encode(block).decode()
                    ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
                else:
                    ws.send(block)
            ws.send(json.dumps({"type": "session.finish"}) if realtime else "END_OF_AUDIO")
        except WebSocketException:
            pass  # the receiver reports why the connection ended

    try:
        url = websocket_url(target.url, path)
        with connect(url, additional_headers=headers, max_size=None, open_timeout=30) as ws:
            ws.send(json.dumps(_configure_message(target)))
            threading.Thread(target=sender, args=(ws,), name="stream-sender", daemon=True).start()
            for raw in ws:
                kind, message = _normalise(target.protocol, json.loads(raw))
                show(kind, message)
                failed |= kind == "error"
                if kind == "summary":
                    break
    except (OSError, WebSocketException) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 1 if failed else 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m speakerscribe.stream", description=__doc__.split("\n\n")[0])
    parser.add_argument("file", type=Path, nargs="?", help="the audio file to stream (or --mic)")
    parser.add_argument("--mic", action="store_true", help="stream the microphone instead of a file")
    parser.add_argument("--device", default=None, help="input device index or name part (see --list-devices)")
    parser.add_argument("--list-devices", action="store_true", help="list the audio input devices and exit")
    parser.add_argument("--url", default="http://127.0.0.1:5000", help="the server (http(s):// or ws(s)://)")
    parser.add_argument("--protocol", choices=("realtime", "binary"), default="realtime")
    parser.add_argument("--fast", action="store_true", help="send a file as fast as the server takes it")
    parser.add_argument("--language", default=None)
    parser.add_argument("--prompt", default=None)
    parser.add_argument("--final-diarization", action="store_true", help="diarize the whole session at the end")
    parser.add_argument("--json", action="store_true", help="print every server message as a JSON line")
    parser.add_argument("--token", default=None, help="bearer token (default: SPEAKERSCRIBE_TOKEN, then HF_TOKEN)")
    return parser


def _file_source(path: Path, fast: bool, stop: threading.Event) -> Iterator[bytes] | None:
    from ..audio.decode import decode_audio
    from ..errors import InputError

    if not path.is_file():
        print(f"error: no such file: {path}", file=sys.stderr)
        return None
    try:
        samples = decode_audio(path.read_bytes()).waveform.samples
    except InputError as exc:
        print(f"error: {path}: {exc}", file=sys.stderr)
        return None
    return file_blocks((np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2"), fast, stop)


def main(argv: list[str] | None = None, audio_backend: Any = None) -> int:
    """The command line. ``audio_backend`` replaces the ``sounddevice`` module (tests inject a virtual one)."""
    parser = _parser()
    args = parser.parse_args(argv)
    stop = threading.Event()
    with ExitStack() as opened:
        source: Any
        if args.list_devices or args.mic:
            from . import mic

            try:
                backend = audio_backend or mic.load_sounddevice()
                devices = mic.input_devices(backend)
                if args.list_devices:
                    print(mic.describe_devices(devices) if devices else "no audio input devices")
                    return 0
                # opened before connecting, so a device that cannot record is reported first
                source = opened.enter_context(mic.MicSource(backend, mic.choose_device(devices, args.device), stop))
            except mic.MicrophoneError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
        elif args.file is None:
            parser.print_usage(sys.stderr)
            print("error: give an audio file, or --mic (or --list-devices)", file=sys.stderr)
            return 2
        else:
            source = _file_source(args.file, args.fast, stop)
            if source is None:
                return 2
        token = args.token or os.environ.get("SPEAKERSCRIBE_TOKEN") or os.environ.get("HF_TOKEN")
        target = StreamTarget(args.url, args.protocol, token, args.language, args.prompt, args.final_diarization)
        try:
            with stop_on_interrupt(stop):
                status = stream_blocks(target, source, Printer(args.json))
        except KeyboardInterrupt:
            print("error: interrupted before the session's summary", file=sys.stderr)
            return 130
    dropped = getattr(source, "dropped_seconds", 0.0)
    if dropped:
        print(f"warning: {dropped:.1f} s of microphone audio dropped (the connection fell behind)", file=sys.stderr)
    return status
