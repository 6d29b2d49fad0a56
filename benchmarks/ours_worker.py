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

import sys
from pathlib import Path

from peer_worker import serve  # the same protocol loop (this script's folder is first on sys.path)


def main() -> int:
    code = Path(sys.argv[1]).resolve()
    sys.path.insert(0, str(code))
    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings

    loaded = {}

    def load(request: dict) -> dict:
        settings = ModelSettings.given(
            asr_model=request["model"],
            diarization_model=request.get("diarization"),
            torch_dtype=request.get("dtype", "auto"),
        )
        loaded["handler"] = EndpointHandler("", settings)
        return {"ok": True}

    def transcribe(request: dict) -> dict:
        # the request's parameters as peers.py gives them (the defaults when none; "language" is not used)
        body = {"inputs": Path(request["audio"]).read_bytes(), "parameters": request.get("parameters") or {}}
        response = loaded["handler"](body)
        return {"text": response["text"], "chunks": response["chunks"]}

    return serve(load, transcribe)


if __name__ == "__main__":
    sys.exit(main())
