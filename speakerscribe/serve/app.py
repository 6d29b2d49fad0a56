"""The ASGI app: routes, start-up (models load in a thread) and graceful shutdown.

Routes
------
* ``GET /``, ``GET /health``: 200 ``Ok`` once the models are loaded, 503 while loading or shutting down, 500 if
  loading failed (the reason goes to the log, not the answer).
* ``GET /metrics``: Prometheus text format (see :mod:`speakerscribe.serve.metrics`).
* ``POST /``, ``POST /predict``: the Endpoints contract (:mod:`.endpoints`).
* ``POST /v1/audio/transcriptions``, ``POST /api/v1/audio/transcriptions``: OpenAI's API (:mod:`.openai`).
* WebSocket ``/v1/realtime?intent=transcription``: OpenAI's Realtime transcription protocol (:mod:`.realtime`);
  WebSocket ``/ws``: binary audio in, JSON out (:mod:`.ws`). Both: :mod:`.streaming` (limits, admission).
* ``GET /ui/``: the page (live microphone and file transcription, :mod:`.ui`); public, its API calls carry the token.

Statuses: 400 bad input (every parse failure), 401 missing/wrong bearer token (when ``API_TOKEN`` is set), 408
body not received within ``BODY_TIMEOUT_S``, 413 body or audio too large, 415 unsupported body type, 503 not
ready / queue full / shutting down / out of accelerator memory (with ``Retry-After``), 504 past
``REQUEST_TIMEOUT_S``, 500 our failure (traceback in the log, request id in the answer). A client that
disconnects gets nothing and is logged as 499. One JSON log line per request, with timings; never the audio,
never a token. SIGTERM: stop accepting, answer 503 to what is queued, let running work finish within
``GRACEFUL_TIMEOUT_S``.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route, WebSocketRoute

from . import endpoints, openai, realtime, ui, ws
from .service import ServerSettings, ServerState, server_state


async def health(request: Request) -> Response:
    state = server_state(request)
    if state.admission.draining:
        return JSONResponse({"error": "shutting down"}, status_code=503, headers={"Retry-After": "5"})
    if state.handler is not None:
        return PlainTextResponse("Ok")
    if state.failed:
        return JSONResponse({"error": "the models failed to load; the server log has the reason"}, status_code=500)
    return JSONResponse({"error": "loading"}, status_code=503, headers={"Retry-After": "5"})


async def metrics(request: Request) -> Response:
    body, content_type = server_state(request).metrics.exposition()
    return Response(body, media_type=content_type)


ROUTES = [
    Route("/", health, methods=["GET"]),
    Route("/health", health, methods=["GET"]),
    Route("/metrics", metrics, methods=["GET"]),
    Route("/", endpoints.predict, methods=["POST"]),
    Route("/predict", endpoints.predict, methods=["POST"]),
    Route("/v1/audio/transcriptions", openai.transcriptions, methods=["POST"]),
    Route("/api/v1/audio/transcriptions", openai.transcriptions, methods=["POST"]),
    WebSocketRoute("/v1/realtime", realtime.realtime),
    WebSocketRoute("/ws", ws.binary),
    Route("/ui", ui.ui_redirect, methods=["GET"]),
]


def create_app(load_handler: Callable[[], Any], settings: ServerSettings | None = None) -> Starlette:
    """The ASGI app. ``load_handler`` builds the EndpointHandler; it runs in a thread after start-up.

    ``app.state.server`` is the :class:`~.service.ServerState`; ``app.state.server.shutdown()`` starts a graceful
    shutdown (what SIGTERM does under ``python -m speakerscribe.server``)."""
    state = ServerState(settings or ServerSettings())

    @asynccontextmanager
    async def lifespan(app):
        state.loop = asyncio.get_running_loop()
        threading.Thread(target=state.load, args=(load_handler,), name="load-models", daemon=True).start()
        yield

    app = Starlette(routes=[*ROUTES, Mount("/ui", app=ui.ui_files(), name="ui")], lifespan=lifespan)
    app.state.server = state
    return app


def graceful_server(config, app: Starlette):
    """A uvicorn server whose SIGTERM/SIGINT first drains the app (in its event loop), then stops as usual."""
    import uvicorn

    class GracefulServer(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            state: ServerState = app.state.server
            if state.loop is not None:
                state.loop.call_soon_threadsafe(state.shutdown)
            super().handle_exit(sig, frame)

    return GracefulServer(config)
