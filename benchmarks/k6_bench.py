"""The original handler's published benchmark, re-run here: k6 against the local server, short (~8 s) and long
(~60 s) clips, assisted (batch 1) and not (batch 24), one virtual user; ours and the original approach served the
same way (benchmarks/original_server.py) in the same run.

    .venv/bin/python benchmarks/k6_bench.py --model whisper-base [--iterations 5] [--no-original]

Prints avg / median / p90 / p95 request latency per scenario and the ratio of the originals' median to ours.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(cmd: list[str], env: dict, port: int, log: Path, cwd: Path = REPO):
    import requests

    proc = subprocess.Popen(cmd, cwd=cwd, env={**os.environ, **env}, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    for _ in range(1800):
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-2000:])
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except requests.ConnectionError:
            pass
        time.sleep(0.2)
    raise TimeoutError(log.read_text()[-2000:])


def clips(out: Path) -> dict[str, Path]:
    import soundfile as sf

    from speakerscribe_dev.conversation import MEETING, long_conversation, synthesize

    meeting = synthesize(MEETING, REPO / ".cache" / "speech", "meeting")
    longer = synthesize(long_conversation(16, seed=31), REPO / ".cache" / "speech", "k6_long")
    a, rate = sf.read(str(meeting.wav), dtype="float32")
    b, _ = sf.read(str(longer.wav), dtype="float32")
    files = {"short": out / "short.wav", "long": out / "long.wav"}
    sf.write(files["short"], a[: int(8.0 * rate)], rate)
    sf.write(files["long"], np.concatenate([b, a])[: int(60.0 * rate)], rate)
    return files


def k6(url: str, audio: Path, params: dict, iterations: int, out: Path) -> dict:
    binary = shutil.which("k6") or str(Path(sys.executable).parent / "k6")
    summary = out / "summary.json"
    subprocess.run(
        [
            binary,
            "run",
            "--quiet",
            "-e",
            f"BASE_URL={url}",
            "-e",
            f"AUDIO={audio}",
            "-e",
            f"PARAMS={json.dumps(params)}",
            "-e",
            f"ITERATIONS={iterations}",
            "--summary-export",
            str(summary),
            str(REPO / "benchmarks" / "k6" / "transcribe.js"),
        ],
        check=True,
        capture_output=True,
    )
    d = json.loads(summary.read_text())["metrics"]["http_req_duration"]
    return {k: d[k] for k in ("avg", "med", "p(90)", "p(95)")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument("--no-original", action="store_true")
    parser.add_argument("--no-diarization", action="store_true")
    args = parser.parse_args()
    env = {
        "ASR_MODEL": str(args.models / args.model),
        "ASSISTANT_MODEL": str(args.models / f"{args.model}-draft"),
        "DIARIZATION_MODEL": "" if args.no_diarization else str(args.models / "diarization"),
        "PYANNOTE_METRICS_ENABLED": "false",
        "HF_HUB_OFFLINE": "1",
    }
    scenarios = [
        ("short 8 s, assisted", "short", {"assisted": True}),
        ("short 8 s, not assisted", "short", {"batch_size": 24}),
        ("long 60 s, assisted", "long", {"assisted": True}),
        ("long 60 s, not assisted", "long", {"batch_size": 24}),
    ]
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        files = clips(tmp)
        systems = [("ours", [sys.executable, "-m", "speakerscribe.server"])]
        if not args.no_original:
            systems.append(("original", [sys.executable, str(REPO / "benchmarks" / "original_server.py")]))
        for name, cmd in systems:
            port = free_port()
            proc = start(cmd + ["--port", str(port)], env, port, tmp / f"{name}.log")
            try:
                url = f"http://127.0.0.1:{port}"
                for label, clip, params in scenarios:
                    k6(url, files[clip], params, 1, tmp)  # warm-up
                    results[f"{name}|{label}"] = k6(url, files[clip], params, args.iterations, tmp)
            finally:
                proc.terminate()
                proc.wait(30)
    print(
        f"k6, 1 VU, {args.iterations} iterations per scenario after 1 warm-up; model {args.model} + draft; "
        f"diarization {'off' if args.no_diarization else 'on'}; latency in ms"
    )
    print("| scenario | system | avg | med | p90 | p95 | original med / ours med |")
    print("|---|---|---|---|---|---|---|")
    for label, _, _ in scenarios:
        ours = results[f"ours|{label}"]
        original = results.get(f"original|{label}")
        for name, r in (("original", original), ("ours", ours)):
            if r is None:
                continue
            ratio = f"{original['med'] / ours['med']:.2f}x" if (original and name == "ours") else ""
            cells = " | ".join(f"{r[k]:.0f}" for k in ("avg", "med", "p(90)", "p(95)"))
            print(f"| {label} | {name} | {cells} | {ratio} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
