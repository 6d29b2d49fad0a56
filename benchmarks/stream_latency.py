"""Live latency and capacity: festival conversations streamed at real-time pace over OpenAI's Realtime protocol.

    .venv/bin/python benchmarks/stream_latency.py [--model whisper-tiny.en] [--streams 1 2 3 4] [--lines 24]
        [--baseline GIT_REF --repeats 2]

A server (``python -m speakerscribe.server``, the offline default models, CPU) is started on 127.0.0.1. For each
count N, N clients stream the same ~1.5-minute synthesized conversation at real-time pace (100 ms blocks, 24 kHz
pcm16 as OpenAI clients send) with server turn detection at OpenAI's defaults, all at once.

* completed latency: for every true utterance (its end is known exactly: the conversation is placed clip by clip),
  the time from its end to the ``completed`` event of the turn that holds it;
* partial lag: for every word sent in a delta, the time from the end of that word (its time in the turn's final
  word list) to the delta's arrival;
* keeping up: how far behind real time the sender fell (the server reads audio only as fast as it processes it).

A count is held when every stream keeps up (under 1 s behind) and the completed latency's p95 is at most 2 s.

With ``--baseline REF`` the code of that commit (``git archive``) is served too, from a second server on the same
models, and every count runs on both, alternating, ``--repeats`` times (these machines drift: compare the two in
the same run, not against numbers from another day). Latencies are pooled over the repeats; the last lines give
the ratios ours / baseline.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from k6_bench import free_port, start  # noqa: E402

from speakerscribe_dev.baseline import baseline_tree  # noqa: E402

BLOCK_S = 0.1


def read_pcm16_wav(path: Path) -> np.ndarray:
    """A wav this benchmark made (16 kHz, 16-bit) without PyAV, which a GPU machine may lack."""
    import soundfile as sf

    samples, rate = sf.read(str(path), dtype="float32")
    assert rate == 16000, f"{path}: {rate} Hz"
    return samples


def percentile(values, q: float) -> float:
    return float(np.percentile(values, q)) if values else float("nan")


def stream_once(url: str, pcm24: bytes, results: dict, barrier: threading.Barrier) -> None:
    from websockets.sync.client import connect

    messages: list[tuple[float, dict]] = []
    with connect(url, max_size=None, open_timeout=60) as ws:
        json.loads(ws.recv())  # session.created
        session = {"type": "transcription", "audio": {"input": {"format": {"type": "audio/pcm", "rate": 24000}}}}
        ws.send(json.dumps({"type": "session.update", "session": session}))
        json.loads(ws.recv())  # session.updated
        barrier.wait()
        t0 = time.perf_counter()
        step = int(24000 * BLOCK_S) * 2

        def sender() -> None:
            for i in range(0, len(pcm24), step):
                due = t0 + (i // step) * BLOCK_S
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                audio = base64.b64encode(pcm24[i : i + step]).decode()
                ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": audio}))
            results["behind_s"] = time.perf_counter() - t0 - len(pcm24) / 2 / 24000
            ws.send(json.dumps({"type": "session.finish"}))

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        for raw in ws:
            message = json.loads(raw)
            messages.append((time.perf_counter() - t0, message))
            if message["type"] == "transcription.summary":
                break
        thread.join()
    results["messages"] = messages


def measure(messages, conversation) -> tuple[list[float], list[float]]:
    finals = [(t, m) for t, m in messages if m["type"].endswith("input_audio_transcription.completed")]
    completed = []
    for turn in conversation.turns:
        holding = [(t, m) for t, m in finals if m["start"] - 0.3 <= turn.end <= m["end"] + 0.6]
        if holding:
            completed.append(holding[0][0] - turn.end)
    lags = []
    for item_id in {m["item_id"] for _, m in finals}:
        final = next(m for _, m in finals if m["item_id"] == item_id)
        words = final["words"]
        sent = 0
        for t, m in messages:
            if m["type"].endswith("transcription.delta") and m["item_id"] == item_id:
                count = len(m["delta"].split())
                for k in range(sent, min(sent + count, len(words))):
                    lags.append(t - words[k]["end"])
                sent += count
    return completed, lags


def run_streams(url: str, pcm24: bytes, n: int, conversation) -> dict:
    barrier = threading.Barrier(n)
    results = [{} for _ in range(n)]
    threads = [threading.Thread(target=stream_once, args=(url, pcm24, r, barrier)) for r in results]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    completed, lags, behind = [], [], []
    for r in results:
        c, lag = measure(r["messages"], conversation)
        completed += c
        lags += lag
        behind.append(r["behind_s"])
    return {"completed": completed, "lags": lags, "behind": behind}


def summary(n: int, runs: list[dict], label: str | None) -> dict:
    completed = [c for r in runs for c in r["completed"]]
    lags = [g for r in runs for g in r["lags"]]
    behind = max(b for r in runs for b in r["behind"])
    out = {"code": label} if label else {}
    out.update(
        {
            "streams": n,
            "completed_p50_s": round(percentile(completed, 50), 3),
            "completed_p95_s": round(percentile(completed, 95), 3),
            "utterances": len(completed),
            "partial_lag_p50_s": round(percentile(lags, 50), 3),
            "partial_lag_p95_s": round(percentile(lags, 95), 3),
            "words_in_partials": len(lags),
            "sender_behind_max_s": round(behind, 2),
            "held": behind < 1.0 and percentile(completed, 95) <= 2.0,
        }
    )
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--streams", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--lines", type=int, default=24)
    parser.add_argument("--baseline", help="a git commit to compare with in the same run")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--audio", type=Path, help="a folder holding live_<lines>.wav/.json already made (a machine without festival)"
    )
    args = parser.parse_args(argv)

    from speakerscribe.audio.decode import resample
    from speakerscribe_dev.conversation import long_conversation, synthesize

    speech = args.audio or REPO / ".cache" / "speech"
    conversation = synthesize(long_conversation(args.lines, seed=11), speech, f"live_{args.lines}")
    samples = read_pcm16_wav(conversation.wav)
    pcm24 = (np.clip(resample(samples, 16000, 24000), -1, 1) * 32767).astype("<i2").tobytes()
    env = {
        "ASR_MODEL": str(args.models.resolve() / args.model),
        "DIARIZATION_MODEL": str(args.models.resolve() / "diarization"),
        "MAX_STREAMS": str(max(args.streams)),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
    }
    command = [sys.executable, "-m", "speakerscribe.server", "--log-level", "warning"]
    print(f"conversation {conversation.duration:.1f} s, {len(conversation.turns)} utterances; model {args.model}")
    servers, urls = [], {}
    with tempfile.TemporaryDirectory(prefix="stream-baseline-") as tmp:
        codes = [("ours", REPO)]
        if args.baseline:
            codes.insert(0, (f"baseline {args.baseline}", baseline_tree(args.baseline, Path(tmp))))
        try:
            for label, tree in codes:
                port = free_port()
                log = REPO / ".cache" / f"stream_latency_server{'_baseline' if tree != REPO else ''}.log"
                servers.append(start(command, {**env, "PORT": str(port)}, port, log, cwd=tree))
                urls[label] = f"ws://127.0.0.1:{port}/v1/realtime?intent=transcription"
            for n in args.streams:
                runs: dict[str, list[dict]] = {label: [] for label in urls}
                for _ in range(args.repeats):
                    for label, url in urls.items():
                        runs[label].append(run_streams(url, pcm24, n, conversation))
                rows = {label: summary(n, r, label if args.baseline else None) for label, r in runs.items()}
                for row in rows.values():
                    print(json.dumps(row), flush=True)
                if args.baseline:
                    ours, base = rows["ours"], rows[codes[0][0]]
                    ratios = {
                        k: round(ours[k] / base[k], 3)
                        for k in ("completed_p50_s", "completed_p95_s", "partial_lag_p50_s")
                        if base[k]
                    }
                    print(json.dumps({"streams": n, "ours_over_baseline": ratios}), flush=True)
        finally:
            for server in servers:
                server.terminate()
                server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
