"""Faults against a live server: slow and oversized bodies, clients that leave, deadlines, SIGTERM, /metrics.

Raw sockets where a real client library would hide the behaviour (a body trickled byte by byte, a connection
closed while queued). A "long" request decodes hundreds of one-second windows one at a time with tiny random
models, so it has many checkpoints and takes several seconds; its full duration is measured first, and the
cancellation tests compare against it (with wide margins), instead of guessing absolute times.
"""

from __future__ import annotations

import base64
import json
import select
import signal
import socket
import threading
import time
from urllib.parse import urlparse

import pytest
import requests
from audio_helpers import wav_bytes
from test_handler import speechlike
from test_server import Server, model_env

pytestmark = pytest.mark.slow

LONG_PARAMS = "vad_filter=false&chunk_length_s=1&batch_size=1"


def long_audio() -> bytes:
    return wav_bytes(speechlike(15.0, seed=5), rate=8000)  # 30 s at 8 kHz: 30 windows, each decoded up to 6 times


def short_audio() -> bytes:
    return wav_bytes(speechlike(2.0, seed=6))


def open_request(url: str, path: str, body: bytes, ctype: str = "audio/wav", send_body: bool = True):
    """A connected socket with the request sent (headers, and the body when ``send_body``)."""
    u = urlparse(url)
    sock = socket.create_connection((u.hostname, u.port), timeout=30)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {u.hostname}\r\nContent-Type: {ctype}\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    sock.sendall(head.encode() + (body if send_body else b""))
    return sock


def read_response(sock: socket.socket, timeout: float = 60) -> tuple[int, bytes]:
    """Status and body of the HTTP/1.1 answer on ``sock`` (read up to its Content-Length)."""
    sock.settimeout(timeout)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise AssertionError(f"connection closed before an answer: {data[:200]!r}")
        data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(h.split(":", 1)[1]) for h in lines[1:] if h.lower().startswith("content-length:")), None)
    while length is not None and len(payload) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        payload += chunk
    return int(lines[0].split(" ", 2)[1]), payload


def gauge(url: str, name: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = requests.get(url + "/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return sample.value
    raise AssertionError(f"{name} not in /metrics")


def wait_for(predicate, timeout: float = 60.0, step: float = 0.05) -> float:
    """Seconds until predicate() is true (AssertionError after ``timeout``)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        if predicate():
            return time.perf_counter() - t0
        time.sleep(step)
    raise AssertionError("condition not reached")


def access_lines(server: Server) -> list[dict]:
    return [
        json.loads(line.split(" speakerscribe.access ", 1)[1])
        for line in server.log.read_text().splitlines()
        if " speakerscribe.access " in line
    ]


def start(random_models, tmp_path_factory, name: str, **env) -> Server:
    s = Server({**model_env(random_models), **env}, tmp_path_factory.mktemp(name) / "server.log")
    s.wait_ready()
    return s


@pytest.fixture(scope="module")
def faults(random_models, tmp_path_factory):
    s = start(
        random_models,
        tmp_path_factory,
        "faults",
        MAX_CONCURRENCY="1",
        MAX_QUEUE="4",
        MAX_BODY_MB="4",
        BODY_TIMEOUT_S="3",
    )
    yield s
    s.stop()


@pytest.fixture(scope="module")
def long_seconds(faults) -> float:
    """How long the long request takes when nobody interrupts it."""
    t0 = time.perf_counter()
    r = requests.post(
        f"{faults.url}/predict?{LONG_PARAMS}", data=long_audio(), headers={"Content-Type": "audio/wav"}, timeout=600
    )
    assert r.status_code == 200, r.text
    return time.perf_counter() - t0


def test_a_slow_body_gets_408_and_does_not_block_others(faults):
    body = short_audio()
    sock = open_request(faults.url, "/predict", body, send_body=False)
    answers: dict[str, object] = {}

    def trickle():
        try:
            for i in range(0, 40):  # 20 s of one byte every 0.5 s: longer than BODY_TIMEOUT_S=3
                sock.sendall(body[i : i + 1])
                time.sleep(0.5)
        except OSError:
            pass  # the server answered and closed

    thread = threading.Thread(target=trickle, daemon=True)
    thread.start()
    time.sleep(0.5)
    # a normal request goes through while the slow one holds nothing
    ok = requests.post(f"{faults.url}/predict?vad_filter=false", data=body, headers={"Content-Type": "audio/wav"})
    answers["ok_at"] = time.perf_counter()
    assert ok.status_code == 200, ok.text
    status, payload = read_response(sock)
    answers["slow_at"] = time.perf_counter()
    assert status == 408 and b"BODY_TIMEOUT_S" in payload
    assert answers["ok_at"] < answers["slow_at"]
    sock.close()


@pytest.mark.parametrize("route", ["/predict", "/v1/audio/transcriptions"])
def test_a_chunked_body_over_the_limit_is_refused_before_it_is_all_sent(faults, route):
    u = urlparse(faults.url)
    sock = socket.create_connection((u.hostname, u.port), timeout=30)
    ctype = "audio/wav" if route == "/predict" else "multipart/form-data; boundary=b0undary"
    sock.sendall(
        f"POST {route} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nTransfer-Encoding: chunked\r\n\r\n".encode()
    )
    chunk = b"\0" * 65536
    total = 64 * 1024 * 1024  # 16x MAX_BODY_MB; loopback socket buffers hold a few MB of it
    sent = 0
    try:
        while sent < total:
            sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sent += len(chunk)
            if select.select([sock], [], [], 0)[0]:
                break
    except OSError:
        pass  # the server closed after answering
    status, payload = read_response(sock)
    assert status == 413 and b"MAX_BODY_MB" in payload
    assert sent < total / 2
    sock.close()


def test_clients_that_leave_are_dropped_queued_or_running(faults, long_seconds):
    body = long_audio()
    running = open_request(faults.url, f"/predict?{LONG_PARAMS}", body)
    wait_for(lambda: gauge(faults.url, "speakerscribe_in_flight") == 1)
    queued = open_request(faults.url, f"/predict?{LONG_PARAMS}", body)
    wait_for(lambda: gauge(faults.url, "speakerscribe_queue_length") == 1)
    queued.close()
    wait_for(lambda: gauge(faults.url, "speakerscribe_queue_length") == 0, timeout=10)
    time.sleep(0.5)
    t0 = time.perf_counter()
    running.close()
    wait_for(lambda: gauge(faults.url, "speakerscribe_in_flight") == 0, timeout=long_seconds)
    stopped_after = time.perf_counter() - t0
    # the work stopped at a checkpoint instead of running to the end for nobody
    assert stopped_after < long_seconds / 2, (stopped_after, long_seconds)
    after = requests.post(
        f"{faults.url}/predict?vad_filter=false", data=short_audio(), headers={"Content-Type": "audio/wav"}
    )
    assert after.status_code == 200
    statuses = [line["status"] for line in access_lines(faults)]
    assert statuses.count(499) >= 2 and 500 not in statuses
    assert "Traceback" not in faults.log.read_text()


def test_metrics_in_prometheus_format(faults):
    from prometheus_client.parser import text_string_to_metric_families

    requests.post(f"{faults.url}/predict?vad_filter=false", data=short_audio(), headers={"Content-Type": "audio/wav"})
    requests.post(f"{faults.url}/predict", data=b"junk", headers={"Content-Type": "audio/wav"})
    r = requests.get(faults.url + "/metrics", timeout=5)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    assert {
        "speakerscribe_requests",
        "speakerscribe_request_seconds",
        "speakerscribe_queue_length",
        "speakerscribe_in_flight",
        "speakerscribe_audio_seconds",
    } <= set(families)
    counts = {
        (s.labels["route"], s.labels["status"]): s.value
        for s in families["speakerscribe_requests"].samples
        if s.name == "speakerscribe_requests_total"
    }
    assert counts[("predict", "200")] >= 1 and counts[("predict", "400")] >= 1
    audio = [s.value for s in families["speakerscribe_audio_seconds"].samples if s.name.endswith("_total")]
    assert audio and audio[0] >= 2.0
    buckets = [s for s in families["speakerscribe_request_seconds"].samples if s.name.endswith("_count")]
    assert sum(s.value for s in buckets) >= sum(counts.values()) - 1


def test_request_deadline_is_504_and_stops_the_work(random_models, tmp_path_factory, long_seconds):
    s = start(random_models, tmp_path_factory, "deadline", REQUEST_TIMEOUT_S="2")
    try:
        t0 = time.perf_counter()
        r = requests.post(
            f"{s.url}/predict?{LONG_PARAMS}", data=long_audio(), headers={"Content-Type": "audio/wav"}, timeout=600
        )
        seconds = time.perf_counter() - t0
        assert r.status_code == 504 and "REQUEST_TIMEOUT_S" in r.json()["error"]
        assert seconds < long_seconds / 2, (seconds, long_seconds)
        assert gauge(s.url, "speakerscribe_in_flight") == 0
    finally:
        s.stop()


def _sigterm_case(random_models, tmp_path_factory, name: str, grace: str):
    s = start(random_models, tmp_path_factory, name, MAX_CONCURRENCY="1", GRACEFUL_TIMEOUT_S=grace)
    running = open_request(s.url, f"/predict?{LONG_PARAMS}", long_audio())
    wait_for(lambda: gauge(s.url, "speakerscribe_in_flight") == 1)
    queued = open_request(s.url, f"/predict?{LONG_PARAMS}", long_audio())
    wait_for(lambda: gauge(s.url, "speakerscribe_queue_length") == 1)
    s.proc.send_signal(signal.SIGTERM)
    return s, running, queued


def test_sigterm_finishes_running_work_and_refuses_the_queue(random_models, tmp_path_factory):
    s, running, queued = _sigterm_case(random_models, tmp_path_factory, "sigterm", "300")
    status, payload = read_response(queued, timeout=30)
    assert status == 503 and b"shutting down" in payload
    status, payload = read_response(running, timeout=600)
    assert status == 200, payload[:300]
    assert json.loads(payload)["chunks"]
    assert s.proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    with pytest.raises(requests.ConnectionError):
        requests.get(s.url + "/health", timeout=5)
    assert "Traceback" not in s.log.read_text()


def test_sigterm_stops_running_work_after_the_grace_period(random_models, tmp_path_factory, long_seconds):
    s, running, queued = _sigterm_case(random_models, tmp_path_factory, "sigterm-grace", "1")
    t0 = time.perf_counter()
    status, _ = read_response(queued, timeout=30)
    assert status == 503
    status, payload = read_response(running, timeout=600)
    assert status == 503 and b"shutting down" in payload
    assert s.proc.wait(timeout=60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has shut down
    assert time.perf_counter() - t0 < long_seconds, "the running request was not stopped at the grace period"


def test_base64_json_bodies_count_against_the_limit(faults):
    big = base64.b64encode(b"\0" * (4 * 1024 * 1024)).decode()
    r = requests.post(faults.url + "/predict", json={"inputs": big}, timeout=60)
    assert r.status_code == 413
