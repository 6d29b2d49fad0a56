"""Our handler from another checkout (a baseline commit's code), driven over stdin/stdout by benchmarks/peers.py
with the same protocol as ``peer_worker.py``:

    {"op": "load", "model": "<Whisper folder>", "diarization": "<pipeline folder>" | null, "dtype": "auto"}
                                                         -> {"ok": true, "seconds": <load time>}
    {"op": "transcribe", "audio": "<wav path>", "language": "en" | null}
                                                         -> {"text": "...", "seconds": <wall time>, "chunks": [...]}

    python benchmarks/ours_worker.py <checkout>

The checkout's ``speakerscribe`` is imported (first on ``sys.path``); this file itself only needs
``EndpointHandler(path, settings)`` and ``ModelSettings.given(...)``, which every commit since the pipeline split has.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path


def main() -> int:
    code = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(code))
    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings

    handler = None
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "load":
            started = time.perf_counter()
            settings = ModelSettings.given(
                asr_model=request["model"],
                diarization_model=request.get("diarization"),
                torch_dtype=request.get("dtype", "auto"),
            )
            handler = EndpointHandler("", settings)
            reply = {"ok": True, "seconds": time.perf_counter() - started}
        elif request["op"] == "transcribe":
            started = time.perf_counter()
            # no parameters: the defaults, as peers.py runs ours in its own process ("language" is not used)
            response = handler({"inputs": Path(request["audio"]).read_bytes()})
            reply = {"text": response["text"], "seconds": time.perf_counter() - started, "chunks": response["chunks"]}
        else:
            reply = {"error": f"unknown op {request['op']!r}"}
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
