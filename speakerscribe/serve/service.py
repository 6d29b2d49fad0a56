"""The life of a request, shared by every route: id, auth, readiness, body, checks, admission, run, errors, log.

1. a request id (``X-Request-ID`` when it is sane, else a new one) and the bearer token (``API_TOKEN``);
2. readiness: 503 while the models load, after loading failed, or while shutting down;
3. a place in the queue is taken (``MAX_QUEUE``) *before* the body is read, so bodies in memory are bounded;
4. the body is read in full (``MAX_BODY_MB`` on every route and encoding, ``BODY_TIMEOUT_S``), parsed and its
   parameters checked by the route's parser, which returns a :class:`Job`;
5. the job waits for a processing slot (``MAX_CONCURRENCY``, ``QUEUE_TIMEOUT_S``) and runs in a thread under a
   deadline (``REQUEST_TIMEOUT_S``) while a watcher stops it if the client disconnects;
6. failures become statuses (:func:`.errors.http_error`); one JSON access-log line and the metrics are written.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..cancel import CancelToken
from ..errors import RequestCancelled
from ..options import RequestOptions
from .admission import Admission, Refused
from .errors import CLIENT_GONE, ClientGone, HttpError, http_error, refusal
from .metrics import ServerMetrics

logger = logging.getLogger("speakerscribe.server")
access_log = logging.getLogger("speakerscribe.access")

_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")


class ServerSettings(BaseSettings):
    """Server options from the environment (or the command line)."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False, hide_input_in_errors=True)

    host: str = "127.0.0.1"
    port: int = Field(5000, ge=1, le=65535)
    api_token: SecretStr | None = Field(None, description="require `Authorization: Bearer <token>` on POST routes")
    max_body_mb: float = Field(100.0, gt=0, description="largest accepted request body, every route and encoding")
    max_concurrency: int = Field(1, ge=1, description="requests processed at once")
    max_queue: int = Field(8, ge=0, description="requests waiting beyond those; more get 503")
    queue_timeout_s: float = Field(600.0, gt=0, description="longest wait for a processing slot")
    body_timeout_s: float = Field(120.0, gt=0, description="longest time the request body may take to arrive (408)")
    request_timeout_s: float = Field(
        3600.0, gt=0, description="deadline of a request's work, queueing included (504); stops at the next window"
    )
    graceful_timeout_s: float = Field(
        30.0, ge=0, description="on SIGTERM, how long running requests may go on before they are stopped"
    )
    max_streams: int = Field(4, ge=0, description="live WebSocket sessions at once; more are refused (close 1013)")
    stream_idle_timeout_s: float = Field(
        30.0, gt=0, description="a live session with no message for this long is finished and closed"
    )
    max_stream_seconds: float = Field(3600.0, gt=0, description="audio one live session may send")
    max_message_mb: float = Field(16.0, gt=0, description="largest WebSocket message (OpenAI allows 15 MiB appends)")


@dataclass
class Job:
    """A request read and checked, ready to queue: the handler's input and how to render its result."""

    data: dict[str, Any] | None
    render: Callable[[Any, RequestOptions], Response]


Parser = Callable[[Request, bytes, Any], Awaitable[Job]]  # (request, body, handler) -> Job
ErrorShape = Callable[[int, str], Response]  # (status, message) -> the API's error response


class ServerState:
    """What the routes share: settings, admission, metrics and the handler (None until loaded)."""

    def __init__(self, settings: ServerSettings):
        self.settings = settings
        self.admission = Admission(settings.max_concurrency, settings.max_queue, settings.queue_timeout_s)
        self.metrics = ServerMetrics.create(lambda: self.admission.queued, lambda: self.admission.in_flight)
        self.max_body_bytes = int(settings.max_body_mb * 1024 * 1024)
        self.token = settings.api_token.get_secret_value() if settings.api_token else None
        self.handler: Any = None
        self.failed = False  # loading failed (the reason is in the log)
        self.streams = 0  # live WebSocket sessions open
        self.loop: asyncio.AbstractEventLoop | None = None

    def load(self, load_handler: Callable[[], Any]) -> None:
        """Build the handler (in a thread, after start-up)."""
        try:
            self.handler = load_handler()
            logger.info("models loaded; ready")
        except Exception:  # the reason goes to the log; /health and requests say only that loading failed
            self.failed = True
            logger.exception("model loading failed")

    def shutdown(self) -> None:
        """Graceful shutdown, in the event loop: refuse queued and new work, stop running work after the grace."""
        if self.admission.draining:
            return
        logger.info("shutting down: %d running, %d queued", self.admission.in_flight, self.admission.queued)
        self.admission.drain()
        asyncio.get_running_loop().call_later(self.settings.graceful_timeout_s, self.admission.stop_running)

    def ready_handler(self):
        if self.admission.draining:
            raise refusal("shutdown")
        if self.handler is not None:
            return self.handler
        if self.failed:
            raise HttpError(503, "the models failed to load; the server log has the reason")
        raise HttpError(503, "the models are still loading; retry shortly", {"Retry-After": "5"})

    def check_auth(self, request: Request, given: str | None = None) -> None:
        """401 unless the request carries ``API_TOKEN`` (when one is set): ``given`` when the caller found it
        elsewhere (a browser's WebSocket subprotocol), else the ``Authorization: Bearer`` header."""
        if self.token is None:
            return
        scheme = "bearer"
        if given is None:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), self.token.encode()):
            raise HttpError(
                401, "missing or wrong bearer token (Authorization: Bearer <API_TOKEN>)", {"WWW-Authenticate": "Bearer"}
            )


def server_state(request: Request) -> ServerState:
    return request.app.state.server


def _process(handler, data: dict, cancel: CancelToken):
    return handler.process(data, cancel, consume=True)


async def read_body(request: Request, max_bytes: int, timeout_s: float) -> bytes:
    """The whole body, whatever its encoding (length-delimited or chunked), within the size and time limits."""
    import anyio

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and len(declared) < 20 and int(declared) > max_bytes:
        raise HttpError(413, f"the body is {int(declared)} bytes; the limit is {max_bytes} (MAX_BODY_MB)")
    chunks, size = [], 0
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > max_bytes:
                    raise HttpError(413, f"the body is larger than {max_bytes} bytes (MAX_BODY_MB)")
                chunks.append(chunk)
    except TimeoutError:
        raise HttpError(408, f"the body did not arrive within {timeout_s:g} s (BODY_TIMEOUT_S)") from None
    except ClientDisconnect:
        raise ClientGone() from None
    return b"".join(chunks)


async def run_job(request: Request, state: ServerState, handler, job: Job, cancel: CancelToken, info: dict) -> Any:
    """Queue for a slot and run the handler in a thread, while watching for the client to disconnect."""
    import anyio

    outcome: dict[str, Any] = {}
    t_queue = time.perf_counter()

    async def watch_disconnect(scope) -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                cancel.cancel("disconnected")
                scope.cancel()
                return

    async with anyio.create_task_group() as group:
        group.start_soon(watch_disconnect, group.cancel_scope)
        try:
            async with state.admission.slot(cancel):
                info["queue_ms"] = round((time.perf_counter() - t_queue) * 1000, 1)
                data, job.data = job.data, None  # the handler consumes the audio: freed once decoded
                outcome["result"] = await anyio.to_thread.run_sync(_process, handler, data, cancel)
        except Exception as exc:  # re-raised below, outside the task group (no exception groups)
            outcome["error"] = exc
        group.cancel_scope.cancel()
    if "error" in outcome:
        raise outcome["error"]
    if "result" not in outcome:  # the watcher cancelled the wait or the work: the client is gone
        raise ClientGone()
    return outcome["result"]


async def serve(request: Request, route: str, parse: Parser, error_shape: ErrorShape) -> Response:
    """One request's whole life (see the module docstring); ``parse`` is the route's own part."""
    state = server_state(request)
    rid = request.headers.get("x-request-id", "")
    rid = rid if _REQUEST_ID.match(rid) else uuid.uuid4().hex
    t0 = time.perf_counter()
    info: dict[str, Any] = {}
    response: Response | None = None
    error: HttpError | None = None
    try:
        state.check_auth(request)
        handler = state.ready_handler()
        with state.admission.admit():  # a place is taken before the body is read: bodies in memory are bounded
            body = await read_body(request, state.max_body_bytes, state.settings.body_timeout_s)
            job = await parse(request, body, handler)
            del body  # the job holds what it needs; the raw body is not kept through processing
            cancel = CancelToken(state.settings.request_timeout_s)
            result, options = await run_job(request, state, handler, job, cancel, info)
        info.update(audio_s=round(result.duration, 3), timings=result.timings)
        response = job.render(result, options)
    except ClientGone:
        pass
    except Refused as exc:
        error = refusal(exc.reason)
    except Exception as exc:
        error = http_error(exc)
        gone = isinstance(exc, RequestCancelled) and exc.reason == "disconnected"
        if error is None and not gone:
            logger.exception("request %s failed", rid)
            error = HttpError(500, f"internal error ({type(exc).__name__}); request id {rid}")
            info["error"] = type(exc).__name__
    if error is not None:
        response = error_shape(error.status, error.message)
        response.headers.update(error.headers)
        info.setdefault("error", error.message[:300])
    status = response.status_code if response is not None else CLIENT_GONE
    seconds = time.perf_counter() - t0
    state.metrics.observe(route, status, seconds, info.get("audio_s"))
    access_log.info(
        json.dumps(
            {
                "request_id": rid,
                "method": request.method,
                "path": request.url.path,
                "status": status,
                "ms": round(seconds * 1000, 1),
                **info,
            }
        )
    )
    if response is None:  # nobody to answer; the server drops the connection
        response = Response(status_code=400)
    response.headers["X-Request-ID"] = rid
    return response
