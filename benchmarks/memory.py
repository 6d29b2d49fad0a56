"""Peak memory and time of one long request, per audio length, each length in a fresh process.

    .venv/bin/python benchmarks/memory.py --minutes 5 60 240 [--model whisper-tiny.en] [--no-diarization]

For every length: the input is made first (in this process); then a new Python process loads the models
(``models/<model>`` + ``models/diarization``) with the default settings, runs a 10 s warm-up request, measures its
RSS ("loaded"), reads the input file and runs one request of that length through
``EndpointHandler.process`` (a FLAC body, decoded as a request's would be, and freed once decoded as the server
frees it). A thread samples the process's RSS every
20 ms. Printed per length: RSS of the loaded process, the request's peak RSS above it, the decoded audio's size
for scale, wall time, real-time factor, and the peak above the loaded process during each stage (decode, VAD,
ASR, diarization - which run at the same time by default - and merge).

The audio is a festival two-speaker conversation (about 5 minutes) repeated to the length asked.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class Sampler:
    """RSS every ``period`` seconds on a thread: the timeline, for per-stage peaks."""

    def __init__(self, period: float = 0.02):
        self.period = period
        self.timeline: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.timeline.append((time.perf_counter(), rss_mb()))
            time.sleep(self.period)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def peak(self, start: float = 0.0, end: float = float("inf")) -> float:
        inside = [r for t, r in self.timeline if start <= t <= end]
        return max(inside) if inside else float("nan")


def flac_body(minutes: float) -> tuple[bytes, float]:
    import numpy as np
    import soundfile as sf
    from throughput import conversation

    wav, _, _, duration = conversation(minutes, REPO / ".cache" / "speech")
    samples, rate = sf.read(io.BytesIO(wav), dtype="int16")
    buf = io.BytesIO()
    sf.write(buf, np.ascontiguousarray(samples), rate, format="FLAC")
    return buf.getvalue(), duration


def measure(body_file: Path, duration: float, model: str, diarization: bool) -> dict:
    """One request, in this process: load, warm up, measure the loaded RSS, then read the body and process it."""
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["ASR_MODEL"] = str(REPO / "models" / model)
    if diarization:
        os.environ["DIARIZATION_MODEL"] = str(REPO / "models" / "diarization")
    warm = body_file.with_suffix(".warm.flac").read_bytes()

    from speakerscribe.endpoint import EndpointHandler

    handler = EndpointHandler("")
    handler.process({"inputs": warm})
    del warm
    loaded = rss_mb()
    body = body_file.read_bytes()  # arrives after the process is loaded, as a request's body does
    marks: list[tuple[str, float]] = []
    transcriber = handler.transcriber
    run = transcriber.run

    def run_with_marks(waveform, options, hook=None, progress=None, cancel=None):
        marks.append(("decode", time.perf_counter()))
        return run(waveform, options, lambda name, s: marks.append((name, time.perf_counter())), progress, cancel)

    transcriber.run = run_with_marks
    body_mb = len(body) / 2**20
    data = {"inputs": body}
    del body  # as the server does: the request's bytes are freed once decoded
    t0 = time.perf_counter()
    with Sampler() as sampler:
        handler.process(data, consume=True)
    wall = time.perf_counter() - t0
    stages: dict[str, float] = {}
    previous = t0
    for name, end in marks:
        # ASR and diarization overlap: the diarization wait ends after ASR; both are attributed their own span
        start = t0 if name == "decode" else previous
        stages[name] = round(sampler.peak(start, end) - loaded, 1)
        previous = end
    return {
        "minutes": round(duration / 60, 1),
        "loaded_mb": round(loaded, 1),
        "peak_above_loaded_mb": round(sampler.peak() - loaded, 1),
        "decoded_audio_mb": round(duration * 16000 * 4 / 2**20, 1),
        "body_mb": round(body_mb, 1),
        "wall_s": round(wall, 1),
        "rtf": round(duration / wall, 1),
        "stage_peaks_mb": stages,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, nargs="+", default=[5, 60, 240])
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--no-diarization", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child mode: one request, JSON out
    parser.add_argument("--body", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--duration", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.body, args.duration, args.model, not args.no_diarization)))
        return 0
    results = []
    work = Path(tempfile.mkdtemp(prefix="memory-"))
    for minutes in args.minutes:
        # the input is made here, so the measured process holds none of the work of making it
        body, duration = flac_body(minutes)
        body_file = work / f"{minutes:g}.flac"
        body_file.write_bytes(body)
        body_file.with_suffix(".warm.flac").write_bytes(flac_body(10 / 60)[0])
        del body
        cmd = [sys.executable, __file__, "--one", "--body", str(body_file), "--duration", str(duration)]
        cmd += ["--model", args.model] + (["--no-diarization"] if args.no_diarization else [])
        out = subprocess.run(cmd, capture_output=True, text=True, check=True)
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), file=sys.stderr, flush=True)
    shutil.rmtree(work, ignore_errors=True)  # the FLAC bodies: tens of MB each for long audio
    print(f"model {args.model}, diarization {'off' if args.no_diarization else 'on'}, CPU, default settings")
    print("| audio | body (FLAC) | decoded 16 kHz | loaded RSS | peak above loaded | wall | x real time | stages |")
    print("|---|---|---|---|---|---|---|---|")
    for r in results:
        stages = ", ".join(f"{k} {v:.0f}" for k, v in r["stage_peaks_mb"].items())
        print(
            f"| {r['minutes']:.0f} min | {r['body_mb']:.0f} MB | {r['decoded_audio_mb']:.0f} MB | "
            f"{r['loaded_mb']:.0f} MB | **{r['peak_above_loaded_mb']:.0f} MB** | {r['wall_s']:.0f} s | "
            f"{r['rtf']:.1f} | {stages} |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
