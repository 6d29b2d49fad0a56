"""The server command: the HTTP app (:mod:`speakerscribe.serve`) over one EndpointHandler, under uvicorn.

    python -m speakerscribe.server --host 127.0.0.1 --port 5000

Models come from the handler's environment variables (ASR_MODEL, DIARIZATION_MODEL, ...); the server's own
options (HOST, PORT, API_TOKEN, MAX_BODY_MB, MAX_CONCURRENCY, MAX_QUEUE, QUEUE_TIMEOUT_S, BODY_TIMEOUT_S,
REQUEST_TIMEOUT_S, GRACEFUL_TIMEOUT_S, MAX_STREAMS, STREAM_IDLE_TIMEOUT_S, MAX_STREAM_SECONDS, MAX_MESSAGE_MB)
from :class:`~speakerscribe.serve.service.ServerSettings`. Routes and
statuses: :mod:`speakerscribe.serve.app`.
"""

from __future__ import annotations

import argparse
import logging

from ..runtime import configure_logging
from .app import create_app, graceful_server
from .service import ServerSettings

__all__ = ["ServerSettings", "create_app", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve speakerscribe over HTTP (Endpoints contract + OpenAI API)")
    parser.add_argument("--host", default=None, help="bind address (HOST; default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=None, help="port (PORT; default 5000)")
    parser.add_argument("--model-dir", default="", help="repository/model folder passed to EndpointHandler")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    args = parser.parse_args(argv)
    configure_logging(getattr(logging, args.log_level.upper()), "%(asctime)s %(name)s %(message)s")
    settings = ServerSettings()
    host = args.host or settings.host
    port = args.port or settings.port

    def load():
        from ..endpoint import EndpointHandler

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
        ws_max_size=int(settings.max_message_mb * 1024 * 1024),  # larger WebSocket messages close with 1009
    )
    graceful_server(config, app).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
