"""faster-whisper, driven over stdin/stdout by benchmarks/peers.py. Runs in the peers' own virtual environment
(``.venv-peers``, made by peers.py): faster-whisper is never a dependency of the project.

One JSON object per line in, one per line out:

    {"op": "load", "model": "<CTranslate2 folder>", "mode": "sequential" | "batched", "compute_type": "int8",
     "threads": 2, "batch_size": 8, "word_timestamps": false}
                                                         -> {"ok": true, "seconds": <load time>}
    {"op": "transcribe", "audio": "<wav path>", "language": "en" | null}
                                                         -> {"text": "...", "seconds": <wall time>, "segments": N}

Greedy (``beam_size=1``), speech detection on (faster-whisper's Silero VAD), word times when asked, everything
else at the library's defaults. The wall time covers decoding the file, as the handler's covers decoding the
request's bytes.
"""

from __future__ import annotations

import json
import sys
import time


def serve(load, transcribe) -> int:
    """The protocol: one JSON request per line of stdin, one JSON reply per line of stdout. ``load(request)`` and
    ``transcribe(request)`` give the reply's fields; its ``seconds`` (their wall time) is added here. Also serves
    ``ours_worker.py``."""
    for line in sys.stdin:
        request = json.loads(line)
        handle = {"load": load, "transcribe": transcribe}.get(request["op"])
        if handle is None:
            reply = {"error": f"unknown op {request['op']!r}"}
        else:
            started = time.perf_counter()
            reply = handle(request)
            reply["seconds"] = time.perf_counter() - started
        print(json.dumps(reply), flush=True)
    return 0


def main() -> int:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    loaded = {}

    def load(request: dict) -> dict:
        model = WhisperModel(
            request["model"],
            device="cpu",
            compute_type=request.get("compute_type", "default"),
            cpu_threads=int(request.get("threads", 2)),
        )
        loaded.update(
            model=model,
            pipeline=BatchedInferencePipeline(model) if request.get("mode") == "batched" else None,
            batch_size=int(request.get("batch_size", 8)),
            word_timestamps=bool(request.get("word_timestamps", False)),
        )
        return {"ok": True}

    def transcribe(request: dict) -> dict:
        kwargs = dict(beam_size=1, language=request.get("language"), vad_filter=True)
        if loaded["word_timestamps"]:
            kwargs["word_timestamps"] = True
        if loaded["pipeline"] is not None:
            segments, _ = loaded["pipeline"].transcribe(request["audio"], batch_size=loaded["batch_size"], **kwargs)
        else:
            segments, _ = loaded["model"].transcribe(request["audio"], **kwargs)
        segments = list(segments)  # the generator does the work
        return {"text": "".join(s.text for s in segments), "segments": len(segments)}

    return serve(load, transcribe)


if __name__ == "__main__":
    sys.exit(main())
