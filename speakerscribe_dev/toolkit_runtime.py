"""A stand-in for the Inference Endpoints default container, to test this repository as that runtime serves it.

Written by us from the observed behaviour of huggingface-inference-toolkit 0.5.6 (its source read on 2026-11-30,
newest commit of 2025-08-25; the image Inference Endpoints runs may lag it). What it reproduces:

* start-up: exactly one of ``HF_MODEL_DIR`` / ``HF_MODEL_ID`` must be set (else exit 1); ``requirements.txt`` in the
  model directory is installed with ``pip install -r ... --no-cache-dir`` (no ``--upgrade``, no constraints; here
  ``--dry-run`` by default, so the test machine's environment is not changed, and what pip *would* install is
  printed); ``handler.py`` is imported from the model directory under the module name ``"handler.EndpointHandler"``
  with that directory first on ``sys.path``, and ``EndpointHandler(model_dir)`` is built once with the directory as
  one positional string; a failure there stops the process before the port opens;
* routes: ``GET /`` and ``GET /health`` answer 200 ``Ok`` (nothing listens while the handler loads); ``POST /`` and
  ``POST /predict`` run the handler; ``GET /metrics`` answers ``inf_batch_current_size`` and ``inf_queue_size``;
* request decoding: the ``Content-Type`` header must equal one of a fixed list (``application/json``,
  ``application/json; charset=UTF-8``, some ``audio/*`` spellings); JSON is parsed, audio becomes
  ``{"inputs": <the body's bytes>}``; a body without ``inputs`` (or ``instances``) is refused; when ``HF_TASK`` is
  ``automatic-speech-recognition`` or ``audio-classification`` and the body has ``parameters``, ``inputs`` is
  base64-decoded (strictly) before the handler sees it; query parameters become ``parameters`` only when the body
  has none, with all-digit values turned into ints and exactly ``true``/``false`` into booleans (``-1``, ``0.5``,
  ``True`` stay strings);
* one request at a time, the handler in a worker thread;
* answers: ``Accept`` missing or ``*/*`` means JSON; any other value must be in the same list (checked after the
  handler ran); EVERY failure (decoding, the handler's exceptions of any kind, encoding) is a 400 with
  ``{"error": str(exception)}``.

    HF_MODEL_DIR=/repository python speakerscribe_dev/toolkit_runtime.py --port 5000

Run it as a file (as above), not as a module of this repository: it must not import ``speakerscribe`` itself, so
that the handler's own imports are tested the way the container makes them work.
"""

from __future__ import annotations

import argparse
import base64
import importlib.util
import json
import logging
import os
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

logger = logging.getLogger("toolkit_runtime")

JSON_TYPES = ("application/json", "application/json; charset=UTF-8")
AUDIO_TYPES = (
    "audio/x-flac",
    "audio/flac",
    "audio/mpeg",
    "audio/x-mpeg-3",
    "audio/wave",
    "audio/wav",
    "audio/x-wav",
    "audio/ogg",
    "audio/x-audio",
    "audio/webm",
    "audio/webm;codecs=opus",
    "audio/AMR",
    "audio/amr",
    "audio/AMR-WB",
    "audio/AMR-WB+",
    "audio/m4a",
    "audio/x-m4a",
)
BASE64_TASKS = ("automatic-speech-recognition", "audio-classification")
MODULE_NAME = "handler.EndpointHandler"


def convert_query(params: dict[str, str]) -> dict[str, object]:
    """The toolkit's query conversion: ``str.isnumeric()`` -> int, exactly "true"/"false" -> bool."""
    out: dict[str, object] = {}
    for key, value in params.items():
        if value.isnumeric():
            out[key] = int(value)
        elif value in ("true", "false"):
            out[key] = value == "true"
        else:
            out[key] = value
    return out


def install_requirements(model_dir: Path, dry_run: bool = True) -> str:
    """``pip install -r <model_dir>/requirements.txt --no-cache-dir`` (``--dry-run`` unless told otherwise); returns
    pip's output. Like the container's entry script, a failure is reported, not fatal."""
    requirements = model_dir / "requirements.txt"
    if not requirements.is_file():
        return ""
    command = [sys.executable, "-m", "pip", "install", "-r", str(requirements), "--no-cache-dir"]
    if dry_run:
        command.append("--dry-run")
    proc = subprocess.run(command, capture_output=True, text=True)
    return proc.stdout + proc.stderr


def load_handler(model_dir: Path):
    """Import ``handler.py`` as the toolkit does and build ``EndpointHandler(model_dir)``."""
    path = model_dir / "handler.py"
    if not path.is_file():
        raise RuntimeError(f"No custom pipeline found at {path}")
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    sys.path.insert(0, str(model_dir))
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module.EndpointHandler(str(model_dir))


def _json_default(value):
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is always there with this repository
        np = None
    if np is not None and isinstance(value, np.generic | np.ndarray):
        return value.tolist()
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def create_app(model_dir: Path):
    import anyio
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse, Response
    from starlette.routing import Route

    state: dict[str, object] = {"handler": None, "queued": 0, "running": 0}
    guard = anyio.Semaphore(1)  # the toolkit's MAX_CONCURRENT_THREADS = 1

    @asynccontextmanager
    async def lifespan(app):
        state["handler"] = load_handler(model_dir)  # before the port opens; an exception stops the process
        yield

    async def health(request):
        return PlainTextResponse("Ok")

    async def metrics(request):
        return PlainTextResponse(f"inf_batch_current_size {state['running']}\ninf_queue_size {state['queued']}\n")

    def error(exc: BaseException) -> Response:
        logger.error(exc)
        return Response(json.dumps({"error": str(exc)}), status_code=400, media_type="application/json")

    async def predict(request):
        try:
            content_type = request.headers.get("content-type")
            body = await request.body()
            if content_type in JSON_TYPES:
                data = json.loads(body)
            elif content_type in AUDIO_TYPES:
                data = {"inputs": bytes(body)}
            else:
                raise ValueError(
                    f'Content type "{content_type}" not supported. Supported content types are: '
                    + ", ".join((*JSON_TYPES, *AUDIO_TYPES))
                )
            if not isinstance(data, dict) or ("inputs" not in data and "instances" not in data):
                raise ValueError(f"Body needs to provide a inputs key, received: {body[:200]!r}")
            if os.environ.get("HF_TASK") in BASE64_TASKS and "parameters" in data:
                data["inputs"] = base64.b64decode(data["inputs"], validate=True)
            if request.query_params and "parameters" not in data:
                data["parameters"] = convert_query(dict(request.query_params))
            state["queued"] += 1
            async with guard:
                state["queued"] -= 1
                state["running"] += 1
                try:
                    prediction = await anyio.to_thread.run_sync(state["handler"], data)
                finally:
                    state["running"] -= 1
            accept = request.headers.get("accept")
            if accept in (None, "*/*"):
                accept = "application/json"
            if accept not in JSON_TYPES:
                raise ValueError(f'Accept type "{accept}" not supported.')
            return Response(json.dumps(prediction, default=_json_default), media_type=accept)
        except Exception as exc:  # the toolkit answers every failure this way
            return error(exc)

    routes = [
        Route("/", health, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route("/", predict, methods=["POST"]),
        Route("/predict", predict, methods=["POST"]),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5000)
    parser.add_argument(
        "--install-requirements",
        choices=("dry-run", "yes", "no"),
        default="dry-run",
        help="install the model directory's requirements.txt first (the container always does; default: dry run)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s - %(name)s - %(levelname)s - %(message)s")
    model_dir, model_id = os.environ.get("HF_MODEL_DIR"), os.environ.get("HF_MODEL_ID")
    if bool(model_dir) == bool(model_id):
        print("Error: set exactly one of HF_MODEL_DIR and HF_MODEL_ID", file=sys.stderr)
        return 1
    if model_id:
        print("Error: HF_MODEL_ID needs the Hub, which this stand-in does not reach", file=sys.stderr)
        return 1
    if args.install_requirements != "no":
        output = install_requirements(Path(model_dir), dry_run=args.install_requirements == "dry-run")
        print("== pip install -r requirements.txt\n" + output, flush=True)
    import uvicorn

    uvicorn.run(create_app(Path(model_dir)), host=args.host, port=args.port, log_level="info", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
