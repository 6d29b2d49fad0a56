"""What the two WebSocket routes share: admission, limits, and the loop that feeds a :class:`StreamSession`.

A connection is accepted, then refused with an error message and a close code when the bearer token is wrong
(1008; the token comes in the ``Authorization`` header, or from a browser as the subprotocol
``openai-insecure-api-key.<token>`` beside ``realtime``, which the server picks), the models are not loaded or
the server is draining (1013), or ``MAX_STREAMS`` sessions are open (1013).
Then two tasks run: the receiver parses client messages (the protocol's ``parse``) into commands on a queue, and the
processor runs each command in a worker thread and sends the events. The receiver keeps reading (so the WebSocket
layer keeps answering pings) until ``QUEUED_AUDIO_S`` of audio wait unprocessed; past that it stops reading (TCP
back-pressure) until the processor catches up: a client may send a whole file at once. When the queue is empty and
a turn is being spoken, the processor runs :meth:`StreamSession.idle` (a partial decode, or the final decode ahead of
time while the speaker pauses); audio that arrives meanwhile is visible to that decode (``StreamSession.pending``),
which stops early when the audio makes it useless. A bad message gets an error event and the session goes
on; a session that is idle past ``STREAM_IDLE_TIMEOUT_S`` or reaches ``MAX_STREAM_SECONDS`` of audio is finished
(its summary sent) and closed. Messages over ``MAX_MESSAGE_MB`` are refused by the WebSocket layer (close 1009).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from starlette.websockets import WebSocket, WebSocketDisconnect

from ..audio.decode import soxr_stream
from ..errors import InputError, short_message
from ..live.session import StreamLimit, StreamOptions, StreamSession
from ..records import SAMPLE_RATE
from .errors import HttpError
from .service import ServerState

logger = logging.getLogger("speakerscribe.stream")

QUEUED_AUDIO_S = 600.0  # audio waiting for the processor (38 MB at 16 kHz float32) before the receiver stops reading


@dataclass(frozen=True)
class Append:
    samples: np.ndarray


@dataclass(frozen=True)
class Commit:
    event_id: str | None = None


@dataclass(frozen=True)
class Clear:
    event_id: str | None = None


@dataclass(frozen=True)
class Configure:
    options: StreamOptions
    reply: Any  # what the protocol sends back once applied


@dataclass(frozen=True)
class Finish:
    pass


class ProtocolError(InputError):
    """A client message the protocol cannot take; ``code`` names the kind, ``event_id`` the client's event."""

    def __init__(self, message: str, code: str = "invalid_request", event_id: str | None = None):
        super().__init__(message)
        self.code = code
        self.event_id = event_id


class Protocol:
    """One wire protocol: messages -> commands, session events -> messages."""

    name = "stream"

    def opening(self, options: StreamOptions) -> list[dict | bytes]:
        return []

    def parse(self, message: dict) -> list:
        raise NotImplementedError

    def encode(self, event) -> list[dict]:
        raise NotImplementedError

    def error(self, message: str, code: str, event_id: str | None = None) -> dict:
        raise NotImplementedError


class Resampler:
    """pcm16 little-endian at ``rate`` -> 16 kHz float32, streamed (soxr keeps the filter state across pieces)."""

    def __init__(self, rate: int):
        self.rate = rate
        self._stream = None if rate == SAMPLE_RATE else soxr_stream(rate)

    def __call__(self, data: bytes) -> np.ndarray:
        if len(data) % 2:
            raise ProtocolError(
                f"audio of {len(data)} bytes is not whole 16-bit samples (pcm16 little-endian, mono)", "invalid_audio"
            )
        samples = np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
        if self._stream is None:
            return samples
        return np.asarray(self._stream.resample_chunk(samples), dtype=np.float32)


KEY_SUBPROTOCOL = "openai-insecure-api-key."  # a browser cannot set headers on a WebSocket: the token comes here
REALTIME_SUBPROTOCOL = "realtime"


def subprotocol_token(websocket: WebSocket) -> str | None:
    """The token a browser client offers as the subprotocol ``openai-insecure-api-key.<token>`` (as OpenAI's
    browser clients do), else None."""
    for offered in websocket.scope.get("subprotocols") or ():
        if isinstance(offered, str) and offered.startswith(KEY_SUBPROTOCOL):
            return offered[len(KEY_SUBPROTOCOL) :]
    return None


def chosen_subprotocol(websocket: WebSocket) -> str | None:
    """``realtime`` when the client offers it (a browser that offers subprotocols fails the connection unless the
    server picks one of them); the token subprotocol is never echoed back."""
    return REALTIME_SUBPROTOCOL if REALTIME_SUBPROTOCOL in (websocket.scope.get("subprotocols") or ()) else None


def check_admission(websocket: WebSocket, state: ServerState) -> tuple[int, str] | None:
    """(close code, reason) when the connection cannot have a session, else None."""
    try:
        state.check_auth(websocket, subprotocol_token(websocket))
    except HttpError as exc:
        return 1008, exc.message
    if state.admission.draining:
        return 1013, "the server is shutting down; retry on another replica"
    if state.handler is None:
        return 1013, "the models failed to load" if state.failed else "the models are still loading; retry shortly"
    if state.streams >= state.settings.max_streams:
        return 1013, f"all {state.settings.max_streams} live sessions are in use (MAX_STREAMS); retry later"
    return None


async def serve_stream(websocket: WebSocket, protocol: Protocol, options: StreamOptions, subprotocol=None) -> None:
    state: ServerState = websocket.app.state.server
    await websocket.accept(subprotocol=subprotocol or chosen_subprotocol(websocket))
    refused = check_admission(websocket, state)
    if refused is not None:
        code, reason = refused
        await websocket.send_json(protocol.error(reason, "unauthorized" if code == 1008 else "unavailable"))
        await websocket.close(code=code, reason=reason[:120])
        return
    state.streams += 1
    try:
        await _run(websocket, protocol, options, state)
    finally:
        state.streams -= 1


class _Connection:
    """One live connection: its receive loop and its processing loop, and what the two share. Both run on the event
    loop, so the shared fields need no lock; the session's work runs in worker threads."""

    def __init__(self, websocket: WebSocket, protocol: Protocol, state: ServerState):
        self.websocket, self.protocol, self.state = websocket, protocol, state
        self.settings = state.settings
        self.session: StreamSession | None = None
        self.closed = False  # the client is gone or the socket was closed: nothing more is sent
        self.busy = False  # the processor is working on a command
        self.active = time.monotonic()  # when the session last did anything (the idle clock)
        self.queued_samples = 0  # audio of the Append commands received and not processed yet
        self.send_lock = asyncio.Lock()
        self.queue: asyncio.Queue = asyncio.Queue()
        # the audio of the Append commands queued and not processed yet, oldest first: decodes ahead look at it to
        # stop early (a partial when the speaker pauses, a turn decoded ahead when speech resumes; see
        # StreamSession.pending)
        self.waiting: collections.deque = collections.deque()
        self.drained = asyncio.Event()
        self.drained.set()
        self.info: dict[str, Any] = {"protocol": protocol.name, "audio_s": 0.0, "turns": 0, "errors": 0}
        self.started = time.perf_counter()

    async def send(self, messages: list) -> None:
        async with self.send_lock:
            for m in messages:
                if self.closed:
                    return
                try:
                    await self.websocket.send_json(m)
                except (WebSocketDisconnect, RuntimeError, OSError):  # the client is gone
                    self.closed = True
                    return

    async def send_events(self, events: list) -> None:
        await self.send([m for e in events for m in self.protocol.encode(e)])

    def new_session(self, opts: StreamOptions) -> StreamSession:
        transcriber = self.state.handler.transcriber
        session = StreamSession(
            transcriber, opts, self.settings.max_stream_seconds, id_prefix=f"item_{id(self.websocket):x}"
        )
        session.pending = lambda: list(self.waiting)  # list() of a deque copies it at once, safe from another thread
        return session

    async def in_thread(self, fn, *args):
        import anyio

        return await anyio.to_thread.run_sync(fn, *args)

    async def open(self, options: StreamOptions) -> bool:
        """Start the session and greet the client; False (the socket closed) when the options are refused."""
        try:
            self.session = await self.in_thread(self.new_session, options)
        except InputError as exc:
            await self.send([self.protocol.error(str(exc), "invalid_session")])
            await self.websocket.close(code=1008)
            return False
        await self.send(self.protocol.opening(options))
        return True

    async def receive_loop(self) -> None:
        """Messages in -> commands on the queue, until the client leaves, finishes, idles out or the server drains;
        waits while too much audio is queued (back-pressure: the client's sends block)."""
        while True:
            try:
                message = await asyncio.wait_for(self.websocket.receive(), self.settings.stream_idle_timeout_s)
            except asyncio.TimeoutError:
                if self.waiting_for_results():
                    continue
                timeout = self.settings.stream_idle_timeout_s
                idle = f"no message for {timeout:g} s (STREAM_IDLE_TIMEOUT_S); session finished"
                await self.send([self.protocol.error(idle, "idle_timeout")])
                await self.queue.put(Finish())
                return
            if message["type"] == "websocket.disconnect":
                self.closed = True
                await self.queue.put(None)
                return
            if self.state.admission.draining:
                await self.send(
                    [self.protocol.error("the server is shutting down; the session is finished", "shutdown")]
                )
                await self.queue.put(Finish())
                return
            if await self.enqueue(message):
                return
            await self.drained.wait()

    def waiting_for_results(self) -> bool:
        """A client waiting for results of audio it sent is not idle."""
        quiet = time.monotonic() - self.active
        return self.busy or not self.queue.empty() or quiet < self.settings.stream_idle_timeout_s

    async def enqueue(self, message: dict) -> bool:
        """The message's commands onto the queue; True after a Finish (nothing more is read)."""
        try:
            commands = self.protocol.parse(message)
        except ProtocolError as exc:
            self.info["errors"] += 1
            await self.send([self.protocol.error(str(exc), exc.code, exc.event_id)])
            return False
        for command in commands:
            if isinstance(command, Append):
                self.waiting.append(command.samples)
                self.queued_samples += len(command.samples)
                if self.queued_samples > QUEUED_AUDIO_S * SAMPLE_RATE:
                    self.drained.clear()
            await self.queue.put(command)
            if isinstance(command, Finish):
                return True
        return False

    async def process_loop(self) -> None:
        """Commands off the queue -> the session -> events out, until Finish, a limit, or the client leaves; while
        the queue is empty the session gets an idle tick (a partial, a turn's end)."""
        while True:
            if self.queue.empty() and not self.closed:
                self.busy = True
                try:
                    await self.send_events(await self.in_thread(self.session.idle))
                except InputError:
                    pass
                finally:
                    self.busy, self.active = False, time.monotonic()
            command = await self.queue.get()
            if command is None or await self.process(command):
                return

    async def process(self, command) -> bool:
        """One command through the session, its events sent; True when the session is over."""
        self.busy = True
        try:
            events = await self.run_command(command)
        except StreamLimit as exc:
            await self.send([self.protocol.error(str(exc), "session_limit")])
            await self.send_events(await self.in_thread(self.session.finish))
            return True
        except InputError as exc:
            self.info["errors"] += 1
            code = exc.code if isinstance(exc, ProtocolError) else "invalid_request"
            await self.send([self.protocol.error(str(exc), code, getattr(command, "event_id", None))])
            return False
        finally:
            self.busy, self.active = False, time.monotonic()
        if events is None:
            return isinstance(command, Finish)
        self.info["turns"] += sum(type(e).__name__ == "Completed" for e in events)
        await self.send_events(events)
        return False

    async def run_command(self, command) -> list | None:
        """The session's events for one command; None when the command sent its own reply (Configure, Finish)."""
        session = self.session
        if isinstance(command, Append):
            self.waiting.popleft()
            self.info["audio_s"] += len(command.samples) / SAMPLE_RATE
            self.queued_samples -= len(command.samples)
            if self.queued_samples <= QUEUED_AUDIO_S * SAMPLE_RATE / 2:
                self.drained.set()
            return await self.in_thread(session.append, command.samples)
        if isinstance(command, Commit):
            return await self.in_thread(session.commit)
        if isinstance(command, Clear):
            return await self.in_thread(session.clear)
        if isinstance(command, Configure):
            if session.received:
                raise ProtocolError("the session can be configured only before audio is sent", "too_late")
            self.session = await self.in_thread(self.new_session, command.options)
            await self.send([command.reply])
            return None
        await self.send_events(await self.in_thread(session.finish))  # Finish
        return None

    async def run(self) -> None:
        """Both loops until the processor ends; then the socket is closed and the session logged."""
        import anyio

        try:
            async with anyio.create_task_group() as group:

                async def run_processor() -> None:
                    await self.process_loop()
                    group.cancel_scope.cancel()  # the receiver may be waiting for a message that never comes

                group.start_soon(self.receive_loop)
                group.start_soon(run_processor)
        except Exception as exc:  # our failure: the client gets an error event, the log the traceback
            logger.exception("live session failed")
            try:
                await self.send([self.protocol.error(f"internal error: {short_message(exc, 200)}", "server_error")])
            except Exception:
                pass
        finally:
            await self.close()

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            try:
                await self.websocket.close(code=1000)
            except Exception:
                pass
        self.info["wall_s"] = round(time.perf_counter() - self.started, 2)
        self.info["audio_s"] = round(self.info["audio_s"], 2)
        logger.info("live session %s", self.info)


async def _run(websocket: WebSocket, protocol: Protocol, options: StreamOptions, state: ServerState) -> None:
    conn = _Connection(websocket, protocol, state)
    if await conn.open(options):
        await conn.run()
