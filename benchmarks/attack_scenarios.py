"""The attacks of issue 11 that are not a single body: timing, connections, memory. Status and time of each,
against any checkout (run it on an old commit's worktree for "before").

    python benchmarks/attack_scenarios.py [--repo /tmp/old]

Scenarios (one server each, offline models ``models/whisper-tiny.en`` + ``models/diarization``, defaults):

* ``ffconcat-local-wav``: a 47-byte ffconcat body naming a WAV in the server's working directory;
* ``ffconcat-missing``: the same naming a file that does not exist (does the answer reveal it?);
* ``wav-1hz-1mb``: an 8-bit WAV header declaring 1 Hz with 1 MB of data (peak RSS of the server);
* ``flac-192k-silence``: FLAC of silence at 192 kHz (an hour, ~1 MB): peak RSS;
* ``mp3-corrupt-64-bytes``: 10 s MP3 with 64 bytes overwritten at 2 s: the duration and warnings answered;
* ``slow-upload``: one body trickled at 1 byte/s while a normal request is sent: how long the normal one waits;
* ``multipart-chunked-oversize``: 4x MAX_BODY_MB sent chunked to /v1/audio/transcriptions: bytes sent before 413;
* ``disconnect-queued``: a client that leaves while queued behind a long request: its status in the log;
* ``language-150k``: the answer's size for a 150,000-character `language`.
"""

from __future__ import annotations

import argparse
import io
import json
import select
import socket
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

import numpy as np
import requests

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "benchmarks"))

from hostile_cases import LiveServer  # noqa: E402

from speakerscribe_dev.hostile import encode, tone, wav_header  # noqa: E402


class PeakRss:
    def __init__(self, server: LiveServer):
        self.server, self.peak, self._stop = server, 0.0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, self.server.rss_mb())
            except (OSError, ValueError):
                pass
            time.sleep(0.02)

    def __enter__(self):
        self.base = self.server.rss_mb()
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def post(server: LiveServer, path: str, body: bytes, ctype: str = "audio/wav", timeout: float = 60):
    t0 = time.perf_counter()
    try:
        r = requests.post(server.url + path, data=body, headers={"Content-Type": ctype}, timeout=timeout)
        return str(r.status_code), time.perf_counter() - t0, r.text
    except requests.RequestException as exc:
        return type(exc).__name__, time.perf_counter() - t0, ""


def raw_socket(server: LiveServer) -> socket.socket:
    u = urlparse(server.url)
    return socket.create_connection((u.hostname, u.port), timeout=60)


def scenario_files(repo: Path) -> dict[str, bytes]:
    target = repo / "meeting-for-ffconcat.wav"
    target.write_bytes(encode(tone(3.0, 16000), "wav", "pcm_s16le", 16000))
    mp3 = bytearray(encode(tone(10.0, 44100), "mp3", "libmp3lame", 44100))
    at = len(mp3) // 5
    mp3[at : at + 64] = bytes(range(64))
    import av

    buf = io.BytesIO()
    with av.open(buf, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=192000, layout="mono")
        silence = np.zeros((1, 192000), dtype=np.int16)
        for _ in range(3600):
            frame = av.AudioFrame.from_ndarray(silence, format="s16", layout="mono")
            frame.sample_rate = 192000
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    payload = b"\x80" * (1 << 20)
    return {
        "ffconcat-local-wav": f"ffconcat version 1.0\nfile {target.name}\n".encode(),
        "ffconcat-missing": b"ffconcat version 1.0\nfile samples/secret.wav\n",
        "wav-1hz-1mb": wav_header(1, 1, 8, len(payload)) + payload,
        "flac-192k-silence": buf.getvalue(),
        "mp3-corrupt-64-bytes": bytes(mp3),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=HERE)
    parser.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args()
    repo = args.repo.resolve()
    env = {
        "ASR_MODEL": str(HERE / "models" / "whisper-tiny.en"),
        "DIARIZATION_MODEL": str(HERE / "models" / "diarization"),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
        "MAX_BODY_MB": "4",
    }
    files = scenario_files(repo)
    rows = []

    log_path = Path("/tmp/attack-server.log")

    def fresh() -> LiveServer:
        log_path.unlink(missing_ok=True)
        server = LiveServer(repo, env, log_path)
        server.start()
        return server

    for name, body in files.items():
        server = fresh()
        with PeakRss(server) as rss:
            status, seconds, text = post(server, "/predict", body, timeout=args.timeout)
        note = f"peak RSS +{rss.peak - rss.base:.0f} MB"
        if text.startswith("{"):
            answer = json.loads(text)
            if "duration" in answer:
                note += f"; duration {answer['duration']:.2f} s, warnings {len(answer.get('warnings', []))}"
            elif "error" in answer:
                note += f"; {str(answer['error'])[:70]}"
        rows.append((name, status, seconds, note))
        server.stop()

    server = fresh()
    # slow upload: headers, then one byte a second; meanwhile a normal request
    slow = raw_socket(server)
    clip = encode(tone(2.0, 16000), "wav", "pcm_s16le", 16000)
    slow.sendall(
        f"POST /predict HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\nContent-Length: {len(clip)}\r\n\r\n".encode()
    )
    stop = threading.Event()

    def trickle():
        for i in range(len(clip)):
            if stop.is_set():
                return
            try:
                slow.sendall(clip[i : i + 1])
            except OSError:
                return
            time.sleep(1)

    threading.Thread(target=trickle, daemon=True).start()
    time.sleep(1)
    status, seconds, _ = post(server, "/predict", clip, timeout=args.timeout)
    rows.append(("slow-upload: the other request", status, seconds, "while one body trickles at 1 byte/s"))
    stop.set()
    slow.close()
    server.stop()

    server = fresh()
    sock = raw_socket(server)
    sock.sendall(
        b"POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: multipart/form-data; boundary=b0\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    part = b'--b0\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n\r\n'
    sock.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
    sent, t0, chunk = len(part), time.perf_counter(), b"\0" * 65536
    try:
        while sent < 64 * 2**20 and not select.select([sock], [], [], 0)[0]:
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
        if sent >= 64 * 2**20:
            sock.sendall(b"0\r\n\r\n")
        sock.settimeout(args.timeout)
        status = sock.recv(64).split(b" ")[1].decode()
    except (OSError, IndexError) as exc:
        status = type(exc).__name__
    rows.append(
        ("multipart-chunked-oversize", status, time.perf_counter() - t0, f"{sent / 2**20:.1f} MB sent (limit 4 MB)")
    )
    sock.close()
    server.stop()

    server = fresh()
    long_clip = encode(tone(120.0, 16000), "wav", "pcm_s16le", 16000)
    head = (
        "POST /predict?vad_filter=false HTTP/1.1\r\nHost: x\r\nContent-Type: audio/wav\r\n"
        f"Content-Length: {len(long_clip)}\r\n\r\n"
    )
    first = raw_socket(server)
    first.sendall(head.encode() + long_clip)
    time.sleep(1.0)
    queued = raw_socket(server)
    queued.sendall(head.encode() + long_clip)
    time.sleep(1.0)
    queued.close()
    first.settimeout(args.timeout * 5)
    try:
        first.recv(64)
    except OSError:
        pass
    deadline = time.time() + 300  # the queued request is logged when the server notices it is gone
    while time.time() < deadline and log_path.read_text().count("speakerscribe.access") < 2:
        time.sleep(0.5)
    log = log_path.read_text()
    statuses = [
        json.loads(line.split("speakerscribe.access ", 1)[1])["status"]
        for line in log.splitlines()
        if "speakerscribe.access" in line
    ]
    note = f"statuses logged {statuses} (queued first); tracebacks in log: {log.count('Traceback')}"
    rows.append(("disconnect-queued", str(statuses[0] if statuses else "?"), 0.0, note))
    first.close()
    server.stop()

    server = fresh()
    status, seconds, text = post(server, "/predict?language=" + "x" * 150_000, clip)
    rows.append(("language-150k (query)", status, seconds, f"answer {len(text)} characters"))
    import base64

    payload = json.dumps({"inputs": base64.b64encode(clip).decode(), "parameters": {"language": "x" * 150_000}})
    payload = payload.encode()
    status, seconds, text = post(server, "/predict", payload, "application/json")
    rows.append(("language-150k (json)", status, seconds, f"answer {len(text)} characters"))
    server.stop()

    print(f"against {repo}")
    print("| scenario | status | seconds | notes |")
    print("|---|---|---|---|")
    for name, status, seconds, note in rows:
        print(f"| {name} | {status} | {seconds:.2f} | {note} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
