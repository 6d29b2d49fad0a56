"""Send every generated hostile body (speakerscribe_dev.hostile) to a live server; print status and time of each.

    python benchmarks/hostile_cases.py                       # this checkout
    python benchmarks/hostile_cases.py --repo /tmp/old       # another checkout (e.g. a git worktree of an old commit)

The server runs from ``--repo`` with the offline models (``models/whisper-tiny.en`` + ``models/diarization``).
Each case gets ``--timeout`` seconds; a case that times out, or after which ``/health`` does not answer 200, is
counted and the server is restarted so the next case starts clean. Prints one line per case and a summary by
category and status, plus the server's RSS at the start and the end.
"""

from __future__ import annotations

import argparse
import collections
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))

from speakerscribe_dev.hostile import hostile_cases  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LiveServer:
    def __init__(self, repo: Path, env: dict[str, str], log: Path):
        self.repo, self.env, self.log = repo, env, log
        self.proc = None
        self.url = ""

    def start(self) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        env = {**os.environ, **self.env, "PYTHONPATH": str(self.repo), "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "speakerscribe.server", "--port", str(port)],
            cwd=self.repo,
            env=env,
            stdout=open(self.log, "a"),
            stderr=subprocess.STDOUT,
        )
        deadline = time.time() + 300
        while time.time() < deadline:
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.3)
        raise TimeoutError("server did not start")

    def healthy(self) -> bool:
        try:
            return requests.get(self.url + "/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE)
    parser.add_argument("--models", type=Path, default=HERE / "models")
    parser.add_argument("--timeout", type=float, default=15.0)
    parser.add_argument("--log", type=Path, default=Path("/tmp/hostile-server.log"))
    args = parser.parse_args()
    env = {
        "ASR_MODEL": str(args.models / "whisper-tiny.en"),
        "DIARIZATION_MODEL": str(args.models / "diarization"),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
    }
    server = LiveServer(args.repo.resolve(), env, args.log)
    server.start()
    rss_start = server.rss_mb()
    summary: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    restarts = 0
    cases = hostile_cases()
    print(f"{len(cases)} cases against {args.repo}")
    for case in cases:
        t0 = time.perf_counter()
        try:
            r = requests.post(
                server.url + case.route + (f"?{case.query}" if case.query else ""),
                data=case.body,
                headers={"Content-Type": case.content_type, **case.headers},
                timeout=args.timeout,
            )
            status, answer = str(r.status_code), r.text[:90].replace("\n", " ")
        except requests.RequestException as exc:
            status, answer = "timeout" if isinstance(exc, requests.Timeout) else "conn-error", type(exc).__name__
        seconds = time.perf_counter() - t0
        healthy = server.healthy()
        print(f"{case.name:48s} {status:>10s} {seconds:7.2f}s {'' if healthy else 'UNHEALTHY '}{answer}")
        summary[case.category][status] += 1
        if not healthy or status in ("timeout", "conn-error"):
            restarts += 1
            server.stop()
            server.start()
    print(f"\nRSS start {rss_start:.0f} MB, end {server.rss_mb():.0f} MB; server restarts {restarts}")
    for category, counts in summary.items():
        print(f"{category:12s} " + ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
