"""HTTP server: the Inference Endpoints contract and an OpenAI-compatible transcription API, on one handler.

    python -m speakerscribe.server --host 127.0.0.1 --port 5000

Routes
------
* ``GET /``, ``GET /health``: 200 ``Ok`` once the models are loaded, 503 while loading (500 if loading failed).
* ``POST /``, ``POST /predict``: ``{"inputs": <base64>, "parameters": {...}}`` as JSON, or a raw ``audio/*`` body
  with parameters in the query string (digits become numbers, ``true``/``false`` booleans), as the Endpoints
  runtime does. Answers the handler's JSON.
* ``POST /v1/audio/transcriptions``: OpenAI's multipart API (``file``, ``model``, ``language``, ``prompt``,
  ``temperature``, ``response_format``, ``timestamp_granularities[]``, plus our parameters as extra fields).

Statuses: 400 bad input, 401 missing/wrong bearer token (when ``API_TOKEN`` is set), 413 body too large,
415 unsupported body type, 503 not ready / queue full / out of accelerator memory (with ``Retry-After``),
500 our failure (traceback in the log, request id in the answer). One JSON log line per request, with timings;
never the audio, never a token.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from .errors import CapacityError, InputError, ModelLoadError, short_message
from .formats import to_openai_diarized, to_openai_json, to_openai_verbose, to_srt, to_vtt
from .settings import InferenceConfig

logger = logging.getLogger("speakerscribe.server")
access_log = logging.getLogger("speakerscribe.access")

OPENAI_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._\-]{1,64}$")


class ServerSettings(BaseSettings):
    """Server options from the environment (or the command line)."""

    model_config = SettingsConfigDict(extra="ignore", case_sensitive=False, hide_input_in_errors=True)

    host: str = "127.0.0.1"
    port: int = Field(5000, ge=1, le=65535)
    api_token: SecretStr | None = Field(None, description="require `Authorization: Bearer <token>` on POST routes")
    max_body_mb: float = Field(100.0, gt=0, description="largest accepted request body")
    max_concurrency: int = Field(1, ge=1, description="requests processed at once")
    max_queue: int = Field(8, ge=0, description="requests waiting beyond those; more get 503")
    queue_timeout_s: float = Field(600.0, gt=0, description="longest wait for a processing slot")


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class Admission:
    """At most ``concurrency`` requests run; at most ``queue`` more wait; the rest are turned away at once."""

    def __init__(self, concurrency: int, queue: int, timeout_s: float):
        import anyio

        self._slots = anyio.Semaphore(concurrency)
        self._limit = concurrency + queue
        self._inside = 0
        self._timeout = timeout_s

    async def __aenter__(self):
        import anyio

        if self._inside >= self._limit:
            raise HttpError(503, "the server is busy: the queue is full; retry later", {"Retry-After": "5"})
        self._inside += 1
        try:
            with anyio.fail_after(self._timeout):
                await self._slots.acquire()
        except TimeoutError:
            self._inside -= 1
            raise HttpError(
                503, "timed out waiting for a processing slot; retry later", {"Retry-After": "10"}
            ) from None
        except BaseException:
            self._inside -= 1
            raise
        return self

    async def __aexit__(self, *exc):
        self._slots.release()
        self._inside -= 1


def query_parameters(items) -> dict[str, Any]:
    """Query-string values as the Endpoints runtime converts them: digits -> int, true/false -> bool."""
    out: dict[str, Any] = {}
    for key, value in items:
        if re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        elif value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
        else:
            out[key] = value
    return out


def create_app(load_handler: Callable[[], Any], settings: ServerSettings | None = None):
    """The ASGI app. ``load_handler`` builds the EndpointHandler; it runs in a thread after start-up."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route

    settings = settings or ServerSettings()
    state: dict[str, Any] = {"handler": None, "error": None}
    admission = Admission(settings.max_concurrency, settings.max_queue, settings.queue_timeout_s)
    max_bytes = int(settings.max_body_mb * 1024 * 1024)
    token = settings.api_token.get_secret_value() if settings.api_token else None

    def load() -> None:
        try:
            state["handler"] = load_handler()
            logger.info("models loaded; ready")
        except Exception as exc:  # reported by /health and every request
            state["error"] = f"{type(exc).__name__}: {short_message(exc)}"
            logger.exception("model loading failed")

    @asynccontextmanager
    async def lifespan(app):
        threading.Thread(target=load, name="load-models", daemon=True).start()
        yield

    def ready_handler():
        if state["handler"] is not None:
            return state["handler"]
        if state["error"]:
            raise HttpError(503, f"the models failed to load: {state['error']}")
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
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise HttpError(413, f"the body is {int(declared)} bytes; the limit is {max_bytes} (MAX_BODY_MB)")
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > max_bytes:
                raise HttpError(413, f"the body is larger than {max_bytes} bytes (MAX_BODY_MB)")
            chunks.append(chunk)
        return b"".join(chunks)

    async def run_in_thread(fn, *args):
        import anyio

        return await anyio.to_thread.run_sync(fn, *args)

    async def serve(request: Request, work, error_shape: Callable[[int, str, str], Response]) -> Response:
        """Common request life: id, auth, readiness, admission, run, map errors, one log line."""
        rid = request.headers.get("x-request-id", "")
        rid = rid if _REQUEST_ID.match(rid) else uuid.uuid4().hex
        t0 = time.perf_counter()
        info: dict[str, Any] = {}
        try:
            check_auth(request)
            handler = ready_handler()
            async with admission:
                info["queue_ms"] = round((time.perf_counter() - t0) * 1000, 1)
                response = await work(request, handler, info)
            status = response.status_code
        except HttpError as exc:
            status, response = exc.status, error_shape(exc.status, exc.message, rid)
            response.headers.update(exc.headers)
            info["error"] = exc.message
        except InputError as exc:
            status, response = 400, error_shape(400, str(exc), rid)
            info["error"] = str(exc)
        except (CapacityError, ModelLoadError) as exc:
            status, response = 503, error_shape(503, str(exc), rid)
            response.headers["Retry-After"] = "10"
            info["error"] = str(exc)
        except Exception as exc:
            logger.exception("request %s failed", rid)
            status = 500
            response = error_shape(500, f"internal error ({type(exc).__name__}); request id {rid}", rid)
            info["error"] = type(exc).__name__
        response.headers["X-Request-ID"] = rid
        access_log.info(
            json.dumps(
                {
                    "request_id": rid,
                    "method": request.method,
                    "path": request.url.path,
                    "status": status,
                    "ms": round((time.perf_counter() - t0) * 1000, 1),
                    **info,
                }
            )
        )
        return response

    def endpoint_error(status: int, message: str, rid: str) -> Response:
        return JSONResponse({"error": message}, status_code=status)

    def openai_error(status: int, message: str, rid: str) -> Response:
        kind = {
            400: "invalid_request_error",
            401: "authentication_error",
            413: "invalid_request_error",
            415: "invalid_request_error",
            503: "server_error",
        }.get(status, "server_error")
        return JSONResponse(
            {"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status
        )

    # ------------------------------------------------------------------------------------------ Endpoints
    async def health(request: Request) -> Response:
        if state["handler"] is not None:
            return PlainTextResponse("Ok")
        if state["error"]:
            return JSONResponse({"error": f"the models failed to load: {state['error']}"}, status_code=500)
        return JSONResponse({"error": "loading"}, status_code=503, headers={"Retry-After": "5"})

    async def predict_work(request: Request, handler, info) -> Response:
        body = await read_body(request)
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype in ("application/json", "") and body[:1] in (b"{", b"["):
            try:
                data = json.loads(body)
            except ValueError as exc:
                raise InputError(f"the body is not valid JSON: {exc}") from None
        elif ctype.startswith("audio/") or ctype in ("application/octet-stream", "video/webm", "video/mp4"):
            data = {"inputs": body, "parameters": query_parameters(request.query_params.multi_items())}
        elif ctype == "application/json":
            raise InputError('the body is not a JSON object: send {"inputs": <base64 audio>, "parameters": {...}}')
        else:
            raise HttpError(
                415,
                f"unsupported Content-Type {ctype!r}: send application/json "
                '({"inputs": <base64>, "parameters": {...}}) or the audio file as audio/*',
            )
        result, cfg = await run_in_thread(handler.process, data)
        info.update(audio_s=round(result.duration, 3), timings=result.timings)
        from .response import endpoint_response

        return JSONResponse(endpoint_response(result, words=cfg.word_timestamps))

    async def predict(request: Request) -> Response:
        return await serve(request, predict_work, endpoint_error)

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

    async def openai_work(request: Request, handler, info) -> Response:
        ctype = request.headers.get("content-type", "")
        if not ctype.startswith("multipart/form-data"):
            raise HttpError(415, "send multipart/form-data with a `file` field, as the OpenAI API does")
        declared = request.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > max_bytes:
            raise HttpError(413, f"the body is {int(declared)} bytes; the limit is {max_bytes} (MAX_BODY_MB)")
        try:
            form = await request.form(max_files=1, max_fields=64, max_part_size=max_bytes)
        except Exception as exc:
            raise InputError(f"could not read the multipart form: {short_message(exc)}") from None
        try:
            return await openai_transcribe(form, handler, info)
        finally:
            await form.close()

    async def openai_transcribe(form, handler, info) -> Response:
        unknown = sorted(set(form.keys()) - openai_fields - extra_fields)
        if unknown:
            raise InputError(
                f"unknown field(s) {', '.join(map(repr, unknown))}; accepted: "
                f"{', '.join(sorted(openai_fields | extra_fields))}"
            )
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise InputError("the `file` field (the audio file) is missing")
        audio = await upload.read()
        if len(audio) > max_bytes:
            raise HttpError(413, f"the file is larger than {max_bytes} bytes (MAX_BODY_MB)")
        fmt = (form.get("response_format") or "json").strip()
        if fmt not in OPENAI_FORMATS:
            raise InputError(f"response_format {fmt!r} is not supported; use one of {', '.join(OPENAI_FORMATS)}")
        if str(form.get("stream", "false")).lower() not in ("false", "0", ""):
            raise InputError("stream=true is not supported; send stream=false or omit it")
        strategy = str(form.get("chunking_strategy", "auto") or "auto")
        if strategy != "auto":
            raise InputError("chunking_strategy must be 'auto' (audio is always cut at speech pauses)")
        granularities = set(form.getlist("timestamp_granularities[]")) | set(form.getlist("timestamp_granularities"))
        bad = granularities - {"word", "segment"}
        if bad:
            raise InputError(f"timestamp_granularities {sorted(bad)} not supported; use word and/or segment")
        params: dict[str, Any] = {k: form[k] for k in extra_fields if k in form}
        for key in ("language", "prompt", "temperature"):
            if form.get(key) not in (None, ""):
                params[key] = form[key]
        if "word" in granularities:
            params["return_timestamps"] = "word"
        if fmt == "diarized_json" and handler.transcriber.models.diarizer is None:
            raise InputError("response_format diarized_json needs a diarization model (DIARIZATION_MODEL)")
        info["model"] = str(form.get("model", ""))[:100]
        result, cfg = await run_in_thread(handler.process, {"inputs": audio, "parameters": params})
        info.update(audio_s=round(result.duration, 3), timings=result.timings, format=fmt)
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
                    words=cfg.word_timestamps,
                    segments="segment" in granularities or not granularities,
                    temperature=cfg.temperature,
                )
            )
        return JSONResponse(to_openai_diarized(result))

    async def openai(request: Request) -> Response:
        return await serve(request, openai_work, openai_error)

    routes = [
        Route("/", health, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/", predict, methods=["POST"]),
        Route("/predict", predict, methods=["POST"]),
        Route("/v1/audio/transcriptions", openai, methods=["POST"]),
        Route("/api/v1/audio/transcriptions", openai, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    app.state.server = state
    return app


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

    uvicorn.run(create_app(load, settings), host=host, port=port, log_level=args.log_level, access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
