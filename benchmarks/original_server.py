"""Serve the original handler's approach (benchmarks/baseline.py) on the same route as ours, for k6 comparisons.

python benchmarks/original_server.py --port 5001   # models from ASR_MODEL, ASSISTANT_MODEL, DIARIZATION_MODEL
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def create_app():
    import anyio
    from baseline import OriginalApproach
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, PlainTextResponse
    from starlette.routing import Route

    handler = OriginalApproach(
        os.environ["ASR_MODEL"], os.environ.get("DIARIZATION_MODEL") or None, os.environ.get("ASSISTANT_MODEL") or None
    )
    lock = anyio.Lock()  # one request at a time, like the Endpoints runtime

    async def predict(request: Request):
        body = await request.json()
        audio = base64.b64decode(body["inputs"])
        params = body.get("parameters", {})
        async with lock:
            out, _ = await anyio.to_thread.run_sync(
                lambda: handler(
                    audio, assisted=bool(params.get("assisted")), batch_size=int(params.get("batch_size", 24))
                )
            )
        return JSONResponse(out)

    async def health(request: Request):
        return PlainTextResponse("Ok")

    return Starlette(routes=[Route("/health", health), Route("/predict", predict, methods=["POST"])])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=5001)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(create_app(), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
