"""Throughput of the batch client (python -m speakerscribe.cli --endpoint ...) over a folder of
conversations, with
one server and with two, measured in the same run (these machines are noisy: compare the ratio, not the numbers).

    .venv/bin/python benchmarks/batch_throughput.py [--files 8] [--lines 12] [--model whisper-tiny.en]

Servers: ``python -m speakerscribe.server`` on 127.0.0.1 with the offline default models (Whisper + diarization).
Configurations: one server using every core; two servers splitting the cores (torch threads = cores / 2 each) -
on one machine a second server only helps as far as one server leaves cores idle; across machines (Endpoints
replicas) each server brings its own.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from k6_bench import free_port, start  # noqa: E402


def conversations(folder: Path, files: int, lines: int) -> float:
    """``files`` synthesized two-person conversations in ``folder``; returns their total seconds."""
    import soundfile as sf

    from speakerscribe_dev.conversation import long_conversation, synthesize

    folder.mkdir(parents=True, exist_ok=True)
    total = 0.0
    for i in range(files):
        conv = synthesize(long_conversation(lines, seed=100 + i), REPO / ".cache" / "speech", f"batch_{lines}_{i}")
        target = folder / f"conversation{i:02d}.wav"
        shutil.copy(conv.wav, target)
        total += sf.info(str(target)).duration
    return total


def run(urls: list[str], folder: Path, out: Path, concurrency: int) -> tuple[float, str]:
    shutil.rmtree(out, ignore_errors=True)
    args = [sys.executable, "-m", "speakerscribe.cli", "--format", "json", "--output-dir", str(out)]
    for url in urls:
        args += ["--endpoint", url]
    args += ["--concurrency", str(concurrency), "--no-progress", str(folder)]
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return wall, proc.stderr.strip().splitlines()[-1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--lines", type=int, default=12, help="turns per conversation (12: about a minute)")
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    args = parser.parse_args()
    work = REPO / ".cache" / "batch_throughput"
    folder = work / "in"
    audio_s = conversations(folder, args.files, args.lines)
    cores = os.cpu_count() or 2
    base_env = {
        "ASR_MODEL": str(args.models / args.model),
        "DIARIZATION_MODEL": str(args.models / "diarization"),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
        "MAX_QUEUE": "8",
    }
    print(f"{args.files} conversations, {audio_s / 60:.1f} min of audio; {args.model} + diarization; {cores} cores")
    print("| servers | torch threads each | client concurrency | wall s | x real time | vs 1 server |")
    print("|---|---|---|---|---|---|")
    results = {}
    for servers, threads in ((1, cores), (2, max(1, cores // 2))):
        procs, urls = [], []
        try:
            for i in range(servers):
                port = free_port()
                env = {**base_env, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
                command = [
                    sys.executable,
                    "-m",
                    "speakerscribe.server",
                    "--port",
                    str(port),
                    "--log-level",
                    "warning",
                ]
                procs.append(start(command, env, port, work / f"server{servers}_{i}.log"))
                urls.append(f"http://127.0.0.1:{port}")
            concurrency = 2 * servers
            wall, summary = run(urls, folder, work / f"out{servers}", concurrency)
        finally:
            for p in procs:
                p.terminate()
                p.wait(timeout=60)
        done = re.search(r"(\d+)/(\d+) files \((\d+) skipped, (\d+) failed\)", summary)
        assert done and done.group(4) == "0", summary
        results[servers] = wall
        ratio = results[1] / wall
        print(f"| {servers} | {threads} | {concurrency} | {wall:.1f} | {audio_s / wall:.1f} | {ratio:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
