"""Soak: about ten minutes of mixed short, long and invalid requests against a live server, plus a burst past its
queue (k6, benchmarks/k6/soak.js); the server's RSS sampled all along.

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--vus 3] [--model whisper-tiny.en]

The server runs with the offline models (``models/<model>`` + ``models/diarization``) and its default settings
(one request at a time, a queue of 8). Prints latency per kind of request (median, p95), the server's own count of
answers by status (from /metrics), the burst's refusals, and RSS: at the second minute, at the end, the growth
between them, and the peak. The run passes when k6's checks all pass (valid audio: 200; invalid: 4xx; burst: 200 or
503 with Retry-After) and no other 5xx was answered.
"""

from __future__ import annotations

import argparse
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

from k6_bench import free_port, start  # noqa: E402


def write_inputs(folder: Path) -> None:
    import io

    import soundfile as sf
    from throughput import conversation

    wav, _, _, _ = conversation(1.0, REPO / ".cache" / "speech")
    samples, rate = sf.read(io.BytesIO(wav), dtype="int16")
    for name, seconds in (("short", 8), ("long", 60)):
        buf = io.BytesIO()
        sf.write(buf, samples[: seconds * rate], rate, format="WAV", subtype="PCM_16")
        (folder / f"{name}.wav").write_bytes(buf.getvalue())
    (folder / "ffconcat.txt").write_text("ffconcat version 1.0\nfile README.md\n")
    (folder / "junk.bin").write_bytes(os.urandom(50_000))
    sdp = "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio 5004 RTP/AVP 0\n"
    (folder / "sdp.txt").write_text(sdp)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--vus", type=int, default=3)
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    k6 = shutil.which("k6") or str(Path(sys.executable).parent / "k6")
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    write_inputs(work)
    port = free_port()
    env = {
        "ASR_MODEL": str(REPO / "models" / args.model),
        "DIARIZATION_MODEL": str(REPO / "models" / "diarization"),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
    }
    server = start(
        [sys.executable, "-m", "speakerscribe.server", "--port", str(port), "--log-level", "warning"],
        env,
        port,
        work / "server.log",
    )
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    t0 = time.time()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.time() - t0, rss_mb(server.pid)))
            stop.wait(5)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    summary = work / "summary.json"
    burst_at = f"{args.minutes / 2:.2f}m"
    proc = subprocess.run(
        [k6, "run", "--quiet", "-e", f"BASE_URL=http://127.0.0.1:{port}", "-e", f"DIR={work}",
         "-e", f"DURATION={args.minutes}m", "-e", f"VUS={args.vus}", "-e", f"BURST={args.burst}",
         "-e", f"BURST_AT={burst_at}", "--summary-export", str(summary), str(REPO / "benchmarks" / "k6" / "soak.js")],
        capture_output=True, text=True,
    )  # fmt: skip
    import requests
    from prometheus_client.parser import text_string_to_metric_families

    metrics = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    stop.set()
    sampler.join()
    server.terminate()
    server.wait(60)
    statuses: dict[str, float] = {}
    for family in text_string_to_metric_families(metrics):
        for s in family.samples:
            if s.name == "speakerscribe_requests_total":
                statuses[s.labels["status"]] = statuses.get(s.labels["status"], 0) + s.value
    k6_metrics = json.loads(summary.read_text())["metrics"]
    at2 = next(r for t, r in samples if t >= 120)
    end = samples[-1][1]
    result = {
        "k6_exit": proc.returncode,
        "minutes": args.minutes,
        "vus": args.vus,
        "statuses": statuses,
        "refused_in_burst": k6_metrics.get("refused", {}).get("count", 0),
        "server_errors": k6_metrics.get("server_errors", {}).get("count", 0),
        "checks_failed": k6_metrics["checks"]["fails"],
        "latency_s": {
            kind: {
                "med": k6_metrics[f"http_req_duration{{kind:{kind}}}"]["med"] / 1000,
                "p95": k6_metrics[f"http_req_duration{{kind:{kind}}}"]["p(95)"] / 1000,
            }
            for kind in ("short", "long", "invalid", "burst")
        },
        "rss_mb": {"at_2_min": at2, "end": end, "peak": max(r for _, r in samples), "growth": (end - at2) / at2},
    }
    print(f"soak: {args.minutes:g} min, {args.vus} virtual users + a burst of {args.burst}; model {args.model}")
    print("| kind | median s | p95 s |")
    print("|---|---|---|")
    for kind, v in result["latency_s"].items():
        print(f"| {kind} | {v['med']:.2f} | {v['p95']:.2f} |")
    print(f"\nanswers by status (server): {json.dumps(statuses)}; burst refusals (503): {result['refused_in_burst']}")
    print(f"other 5xx: {result['server_errors']}; failed checks: {result['checks_failed']}; k6 exit {proc.returncode}")
    rss = result["rss_mb"]
    print(
        f"RSS: {rss['at_2_min']:.0f} MB at 2 min, {rss['end']:.0f} MB at the end "
        f"({100 * rss['growth']:+.1f}%), peak {rss['peak']:.0f} MB"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))
    if proc.returncode != 0:
        print(proc.stdout[-3000:], proc.stderr[-3000:], file=sys.stderr)
    return 0 if proc.returncode == 0 and result["server_errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
