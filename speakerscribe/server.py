"""HTTP server: the Inference Endpoints contract and an OpenAI-compatible transcription API, on one handler.

    python -m speakerscribe.server --host 127.0.0.1 --port 5000

Routes
------
* ``GET /``, ``GET /health``: 200 ``Ok`` once the models are loaded, 503 while loading or shutting down, 500 if
  loading failed (the reason goes to the log, not the answer).
* ``GET /metrics``: Prometheus text format (see :mod:`speakerscribe.metrics`).
* ``POST /``, ``POST /predict``: ``{"inputs": <base64>, "parameters": {...}}`` as JSON, or a raw ``audio/*`` body
  with parameters in the query string (digits become numbers, ``true``/``false`` booleans), as the Endpoints
  runtime does. Answers the handler's JSON.
* ``POST /v1/audio/transcriptions``: OpenAI's multipart API (``file``, ``model``, ``language``, ``prompt``,
  ``temperature``, ``response_format``, ``timestamp_granularities[]``, plus our parameters as extra fields).

A request's life: auth and readiness; the body is read in full (``MAX_BODY_MB``, ``BODY_TIMEOUT_S``) and its
parameters checked *before* it queues for a processing slot (``MAX_CONCURRENCY``, ``MAX_QUEUE``,
``QUEUE_TIMEOUT_S``); the work runs in a thread under a deadline (``REQUEST_TIMEOUT_S``) and stops at its next
checkpoint when the deadline passes, the client disconnects, or shutdown's grace period (``GRACEFUL_TIMEOUT_S``)
ends. SIGTERM: stop accepting, answer 503 to what is queued, let running work finish within the grace period.

Statuses: 400 bad input (every parse failure), 401 missing/wrong bearer token (when ``API_TOKEN`` is set), 408
body not received within ``BODY_TIMEOUT_S``, 413 body or audio too large, 415 unsupported body type, 503 not
ready / queue full / shutting down / out of accelerator memory (with ``Retry-After``), 504 past
``REQUEST_TIMEOUT_S``, 500 our failure (traceback in the log, request id in the answer). A client that
disconnects gets nothing and is logged as 499. One JSON log line per request, with timings; never the audio,
never a token.
"""

from __future__ import annotations

import argparse
import asyncio
import hmac
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .admission import Admission, Refused
from .cancel import CancelToken
from .errors import AudioTooLongError, CapacityError, InputError, ModelLoadError, RequestCancelled, short_message
from .formats import to_openai_diarized, to_openai_json, to_openai_verbose, to_srt, to_vtt
from .metrics import ServerMetrics
from .options import RequestOptions
from .settings import InferenceConfig

logger = logging.getLogger("speakerscribe.server")
access_log = logging.getLogger("speakerscribe.access")

OPENAI_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")
CLIENT_GONE = 499  # logged (nginx's convention) when the client disconnected before its answer


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


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def _parse_json(body: bytes) -> Any:
    return json.loads(body.removeprefix(b"\xef\xbb\xbf"))


def _process(handler, data: dict, cancel: CancelToken):
    return handler.process(data, cancel, consume=True)


class ClientGone(Exception):
    """The client disconnected; there is nobody to answer."""


_REFUSALS = {
    "busy": ("the server is busy: the queue is full; retry later", "5"),
    "timeout": ("timed out waiting for a processing slot; retry later", "10"),
    "shutdown": ("the server is shutting down; retry on another replica", "5"),
}


def refusal(reason: str) -> HttpError:
    """A new 503 for a refused request (a new instance each time: a re-raised one would grow its traceback)."""
    message, retry = _REFUSALS[reason]
    return HttpError(503, message, {"Retry-After": retry})


@dataclass
class Job:
    """A request read and checked, ready to queue: the handler's input and how to render its result."""

    data: dict[str, Any]
    render: Callable[[Any, RequestOptions], Any]


def query_parameters(items) -> dict[str, Any]:
    """Query-string values as the Endpoints runtime converts them: digits -> int, true/false -> bool.
    Digit strings longer than 18 characters stay strings (and fail validation with a 400)."""
    out: dict[str, Any] = {}
    for key, value in items:
        if re.fullmatch(r"-?\d{1,18}", value):
            out[key] = int(value)
        elif value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
        else:
            out[key] = value
    return out


def create_app(load_handler: Callable[[], Any], settings: ServerSettings | None = None):
    """The ASGI app. ``load_handler`` builds the EndpointHandler; it runs in a thread after start-up.

    ``app.state.shutdown()`` starts a graceful shutdown (what SIGTERM does under :func:`main`)."""
    from starlette.applications import Starlette
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    settings = settings or ServerSettings()
    state: dict[str, Any] = {"handler": None, "failed": False, "loop": None}
    admission = Admission(settings.max_concurrency, settings.max_queue, settings.queue_timeout_s)
    metrics = ServerMetrics.create(lambda: admission.queued, lambda: admission.in_flight)
    max_bytes = int(settings.max_body_mb * 1024 * 1024)
    token = settings.api_token.get_secret_value() if settings.api_token else None

    def load() -> None:
        try:
            state["handler"] = load_handler()
            logger.info("models loaded; ready")
        except Exception:  # the reason goes to the log; /health and requests say only that loading failed
            state["failed"] = True
            logger.exception("model loading failed")

    def shutdown() -> None:
        """Graceful shutdown, in the event loop: refuse queued and new work, stop running work after the grace."""
        if admission.draining:
            return
        logger.info("shutting down: %d running, %d queued", admission.in_flight, admission.queued)
        admission.drain()
        asyncio.get_running_loop().call_later(settings.graceful_timeout_s, admission.stop_running)

    @asynccontextmanager
    async def lifespan(app):
        state["loop"] = asyncio.get_running_loop()
        threading.Thread(target=load, name="load-models", daemon=True).start()
        yield

    def ready_handler():
        if admission.draining:
            raise refusal("shutdown")
        if state["handler"] is not None:
            return state["handler"]
        if state["failed"]:
            raise HttpError(503, "the models failed to load; the server log has the reason")
        raise HttpError(503, "the models are still loading; retry shortly", {"Retry-After": "5"})

    def check_auth(request: Request) -> None:
        if token is None:
            return
        header = request.headers.get("authorization", "")
        scheme, _, given = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), token.encode()):
            raise HttpError(
                401, "missing or wrong bearer token (Authorization: Bearer <API_TOKEN>)", {"WWW-Authenticate": "Bearer"}
            )

    async def read_body(request: Request) -> bytes:
        """The whole body, whatever its encoding (length-delimited or chunked), within the size and time limits."""
        import anyio

        declared = request.headers.get("content-length", "")
        if declared.isdigit() and len(declared) < 20 and int(declared) > max_bytes:
            raise HttpError(413, f"the body is {int(declared)} bytes; the limit is {max_bytes} (MAX_BODY_MB)")
        chunks, size = [], 0
        try:
            with anyio.fail_after(settings.body_timeout_s):
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > max_bytes:
                        raise HttpError(413, f"the body is larger than {max_bytes} bytes (MAX_BODY_MB)")
                    chunks.append(chunk)
        except TimeoutError:
            raise HttpError(
                408, f"the body did not arrive within {settings.body_timeout_s:g} s (BODY_TIMEOUT_S)"
            ) from None
        except ClientDisconnect:
            raise ClientGone() from None
        return b"".join(chunks)

    async def run_job(request: Request, handler, job: Job, cancel: CancelToken, info: dict) -> Any:
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
                async with admission.slot(cancel):
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

    async def serve(
        request: Request, route: str, parse: Callable[[Request, bytes, Any], Awaitable[Job]], error_shape
    ) -> Response:
        """Common request life: id, auth, readiness, body, checks, admission, run, map errors, log, metrics."""
        rid = request.headers.get("x-request-id", "")
        rid = rid if _REQUEST_ID.match(rid) else uuid.uuid4().hex
        t0 = time.perf_counter()
        info: dict[str, Any] = {}
        response: Response | None = None
        try:
            check_auth(request)
            handler = ready_handler()
            with admission.admit():  # a place is taken before the body is read: bodies in memory are bounded
                body = await read_body(request)
                job = await parse(request, body, handler)
                del body  # the job holds what it needs; the raw body is not kept through processing
                cancel = CancelToken(settings.request_timeout_s)
                result, options = await run_job(request, handler, job, cancel, info)
            info.update(audio_s=round(result.duration, 3), timings=result.timings)
            response = job.render(result, options)
            status = response.status_code
        except ClientGone:
            status = CLIENT_GONE
        except Refused as exc:
            status, response = _error(refusal(exc.reason), error_shape, rid, info)
        except HttpError as exc:
            status, response = _error(exc, error_shape, rid, info)
        except RequestCancelled as exc:
            if exc.reason == "disconnected":
                status = CLIENT_GONE
            elif exc.reason == "deadline":
                status, response = _error(HttpError(504, str(exc)), error_shape, rid, info)
            else:
                status, response = _error(HttpError(503, str(exc), {"Retry-After": "5"}), error_shape, rid, info)
        except AudioTooLongError as exc:
            status, response = _error(HttpError(413, str(exc)), error_shape, rid, info)
        except InputError as exc:
            status, response = _error(HttpError(400, str(exc)), error_shape, rid, info)
        except (CapacityError, ModelLoadError) as exc:
            status, response = _error(HttpError(503, str(exc), {"Retry-After": "10"}), error_shape, rid, info)
        except Exception as exc:
            logger.exception("request %s failed", rid)
            message = f"internal error ({type(exc).__name__}); request id {rid}"
            status, response = _error(HttpError(500, message), error_shape, rid, info)
            info["error"] = type(exc).__name__
        seconds = time.perf_counter() - t0
        metrics.observe(route, status, seconds, info.get("audio_s"))
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

    def _error(exc: HttpError, error_shape, rid: str, info: dict) -> tuple[int, Response]:
        response = error_shape(exc.status, exc.message, rid)
        response.headers.update(exc.headers)
        info["error"] = exc.message[:300]
        return exc.status, response

    def endpoint_error(status: int, message: str, rid: str) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    def openai_error(status: int, message: str, rid: str) -> Response:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            408: "invalid_request_error",
            413: "invalid_request_error",
            415: "invalid_request_error",
        }.get(status, "server_error")
        return JSONResponse(
            {"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status
        )

    # ------------------------------------------------------------------------------------- health, metrics
    async def health(request: Request) -> Response:
        if admission.draining:
            return JSONResponse({"error": "shutting down"}, status_code=503, headers={"Retry-After": "5"})
        if state["handler"] is not None:
            return PlainTextResponse("Ok")
        if state["failed"]:
            return JSONResponse({"error": "the models failed to load; the server log has the reason"}, status_code=500)
        return JSONResponse({"error": "loading"}, status_code=503, headers={"Retry-After": "5"})

    async def metrics_route(request: Request) -> Response:
        body, content_type = metrics.exposition()
        return Response(body, media_type=content_type)

    # ------------------------------------------------------------------------------------------ Endpoints
    async def predict_job(request: Request, body: bytes, handler) -> Job:
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype in ("application/json", "") and body.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"["):
            import anyio

            try:  # in a worker thread: parsing 100 MB of JSON must not stall the event loop
                data = await anyio.to_thread.run_sync(_parse_json, body)
            except (ValueError, RecursionError) as exc:
                raise InputError(f"the body is not valid JSON: {short_message(exc, 200)}") from None
        elif ctype.startswith("audio/") or ctype in ("application/octet-stream", "video/webm", "video/mp4"):
            data = {"inputs": body, "parameters": query_parameters(request.query_params.multi_items())}
        elif ctype == "application/json":
            raise InputError('the body is not a JSON object: send {"inputs": <base64 audio>, "parameters": {...}}')
        else:
            raise HttpError(
                415,
                f"unsupported Content-Type {ctype[:100]!r}: send application/json "
                '({"inputs": <base64>, "parameters": {...}}) or the audio file as audio/*',
            )
        if isinstance(data, dict):
            handler.check_parameters(data.get("parameters"))
        from .response import endpoint_response

        return Job(
            data, lambda result, options: JSONResponse(endpoint_response(result, words=options.attribution.show_words))
        )

    async def predict(request: Request) -> Response:
        return await serve(request, "predict", predict_job, endpoint_error)

    # -------------------------------------------------------------------------------------------- OpenAI
    openai_fields = {
        "file",
        "model",
        "language",
        "prompt",
        "temperature",
        "response_format",
        "timestamp_granularities[]",
        "timestamp_granularities",
        "stream",
        "chunking_strategy",
    }
    extra_fields = set(InferenceConfig.model_fields) - {"language", "prompt", "temperature", "sampling_rate"}

    async def openai_job(request: Request, body: bytes, handler) -> Job:
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            raise HttpError(415, "send multipart/form-data with a `file` field, as the OpenAI API does")
        form = await _parse_form(request, body)
        try:
            return await openai_form_job(form, handler)
        finally:
            await form.close()

    async def _parse_form(request: Request, body: bytes):
        """The multipart form from the body already read (so its size and time limits held for every part)."""
        sent = False

        async def replay() -> dict:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        try:
            return await Request(request.scope, replay).form(max_files=1, max_fields=64, max_part_size=max_bytes)
        except Exception as exc:  # any parse failure of a stranger's form is their error
            raise InputError(f"could not read the multipart form: {short_message(exc, 200)}") from None

    async def openai_form_job(form, handler) -> Job:
        unknown = sorted(set(form.keys()) - openai_fields - extra_fields)
        if unknown:
            raise InputError(
                f"unknown field(s) {', '.join(repr(u[:60]) for u in unknown[:5])}; accepted: "
                f"{', '.join(sorted(openai_fields | extra_fields))}"
            )
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise InputError("the `file` field (the audio file) is missing")
        audio = await upload.read()
        fmt = str(form.get("response_format") or "json").strip()
        if fmt not in OPENAI_FORMATS:
            raise InputError(f"response_format {fmt[:60]!r} is not supported; use one of {', '.join(OPENAI_FORMATS)}")
        if str(form.get("stream", "false")).lower() not in ("false", "0", ""):
            raise InputError("stream=true is not supported; send stream=false or omit it")
        strategy = str(form.get("chunking_strategy", "auto") or "auto")
        if strategy != "auto":
            raise InputError("chunking_strategy must be 'auto' (audio is always cut at speech pauses)")
        granularities = set(form.getlist("timestamp_granularities[]")) | set(form.getlist("timestamp_granularities"))
        bad = granularities - {"word", "segment"}
        if bad:
            raise InputError(
                f"timestamp_granularities {sorted(str(b)[:40] for b in bad)[:5]} not supported; use word and/or segment"
            )
        params: dict[str, Any] = {k: form[k] for k in extra_fields if k in form}
        for key in ("language", "prompt", "temperature"):
            if form.get(key) not in (None, ""):
                params[key] = form[key]
        if "word" in granularities:
            params["return_timestamps"] = "word"
        if fmt == "diarized_json" and not handler.has_diarizer:
            raise InputError("response_format diarized_json needs a diarization model (DIARIZATION_MODEL)")
        handler.check_parameters(params)

        def render(result, options) -> Response:
            if fmt == "json":
                return JSONResponse(to_openai_json(result))
            if fmt == "text":
                return PlainTextResponse(result.transcript.text.strip() + "\n" if result.transcript.text else "")
            if fmt == "srt":
                return PlainTextResponse(to_srt(result))
            if fmt == "vtt":
                return PlainTextResponse(to_vtt(result), media_type="text/vtt")
            if fmt == "verbose_json":
                return JSONResponse(
                    to_openai_verbose(
                        result,
                        words=options.attribution.show_words,
                        segments="segment" in granularities or not granularities,
                        temperature=options.asr.temperature,
                    )
                )
            return JSONResponse(to_openai_diarized(result))

        return Job({"inputs": audio, "parameters": params}, render)

    async def openai(request: Request) -> Response:
        return await serve(request, "openai", openai_job, openai_error)

    routes = [
        Route("/", health, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics_route, methods=["GET"]),
        Route("/", predict, methods=["POST"]),
        Route("/predict", predict, methods=["POST"]),
        Route("/v1/audio/transcriptions", openai, methods=["POST"]),
        Route("/api/v1/audio/transcriptions", openai, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = state
    app.state.shutdown = shutdown
    return app


def _graceful_server(config, app):
    """A uvicorn server whose SIGTERM/SIGINT first drains the app (in its event loop), then stops as usual."""
    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            loop = app.state.server.get("loop")
            if loop is not None:
                loop.call_soon_threadsafe(app.state.shutdown)
            super().handle_exit(sig, frame)

    return GracefulServer(config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve speakerscribe over HTTP (Endpoints contract + OpenAI API)")
    parser.add_argument("--host", default=None, help="bind address (HOST; default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (PORT; default 5000)")
    parser.add_argument("--model-dir", default="", help="repository/model folder passed to EndpointHandler")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=getattr(logging, args.log_level.upper()), format="%(asctime)s %(name)s %(message)s")
    settings = ServerSettings()
    host = args.host or settings.host
    port = args.port or settings.port

    def load():
        from .endpoint import EndpointHandler

        return EndpointHandler(args.model_dir)

    import uvicorn

    app = create_app(load, settings)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=args.log_level,
        access_log=False,
        # uvicorn's own limit: past the grace period and the last window's worth of work, connections are closed
        timeout_graceful_shutdown=int(settings.graceful_timeout_s + 30),
        # a request line or header block up to 1 MB reaches the app (which answers a clear 400) instead of h11's
        # 16 kB default, past which the connection is dropped mid-upload
        h11_max_incomplete_event_size=1 << 20,
    )
    _graceful_server(config, app).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
