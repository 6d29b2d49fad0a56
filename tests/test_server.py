"""The server as a real process on 127.0.0.1, driven by real clients: requests, the openai SDK,
huggingface_hub's InferenceClient and k6. Tiny random models: this tests the service, not accuracy."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests
from audio_helpers import wav_bytes
from conftest import REPO
from test_handler import speechlike

pytestmark = pytest.mark.slow

TOKEN = "sk-test-secret-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A server process on a free loopback port. ``argv(port)`` gives another command than our server's (the
    Endpoints runtime stand-in); ``drop`` names inherited environment variables to leave out."""

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        argv: Callable[[int], list[str]] | None = None,
        cwd: Path = REPO,
        drop: tuple[str, ...] = (),
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        environ = {k: v for k, v in os.environ.items() if k not in drop}
        environ.update({**env, "PYTHONUNBUFFERED": "1"})
        command = argv(self.port) if argv else [sys.executable, "-m", "speakerscribe.server", "--port", str(self.port)]
        self.proc = subprocess.Popen(command, cwd=cwd, env=environ, stdout=open(log, "w"), stderr=subprocess.STDOUT)

    def wait_ready(self, timeout: float = 180.0) -> None:
        deadline = time.time() + timeout
        seen_503 = False
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited: {self.log.read_text()[-3000:]}")
            try:
                r = requests.get(f"{self.url}/health", timeout=2)
                if r.status_code == 200:
                    self.seen_loading = seen_503
                    return
                seen_503 |= r.status_code == 503
            except (requests.ConnectionError, requests.Timeout):  # not listening yet, or a busy machine: ask again
                pass
            time.sleep(0.2)
        raise TimeoutError(self.log.read_text()[-3000:])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def model_env(random_models) -> dict[str, str]:
    return {
        "ASR_MODEL": str(random_models.whisper_en),
        "ASSISTANT_MODEL": str(random_models.draft_en),
        "DIARIZATION_MODEL": str(random_models.pipeline),
        "MAX_NEW_TOKENS": "24",
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
    }


@pytest.fixture(scope="module")
def server(random_models, tmp_path_factory):
    s = Server(model_env(random_models), tmp_path_factory.mktemp("srv") / "server.log")
    s.wait_ready()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def guarded(random_models, tmp_path_factory):
    """Token required, 1 MB bodies, one request at a time and no queue."""
    env = {**model_env(random_models), "API_TOKEN": TOKEN, "MAX_BODY_MB": "1", "MAX_CONCURRENCY": "1", "MAX_QUEUE": "0"}
    s = Server(env, tmp_path_factory.mktemp("srv") / "guarded.log")
    s.wait_ready()
    yield s
    s.stop()


@pytest.fixture(scope="module")
def clip() -> bytes:
    return wav_bytes(speechlike(12.0))


def test_health_routes_answer_ok(server):
    for path in ("/", "/health"):
        r = requests.get(server.url + path, timeout=5)
        assert r.status_code == 200 and r.text == "Ok"


def test_json_base64_with_requests(server, clip):
    r = requests.post(
        server.url + "/",
        json={"inputs": base64.b64encode(clip).decode(), "parameters": {"vad_filter": False}},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert {"speakers", "chunks", "text"} <= set(body) and body["chunks"]
    assert r.headers["X-Request-ID"]


def test_raw_audio_with_query_parameters(server, clip):
    r = requests.post(
        server.url + "/predict?vad_filter=false&return_timestamps=word&batch_size=2",
        data=clip,
        headers={"Content-Type": "audio/wav", "X-Request-ID": "my-request-1"},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert r.headers["X-Request-ID"] == "my-request-1"
    assert all("words" in c for c in r.json()["chunks"])


def test_huggingface_hub_inference_client(server, clip, monkeypatch):
    import huggingface_hub.constants
    from huggingface_hub import InferenceClient

    # the suite runs with HF_HUB_OFFLINE=1 (no Hub); a local server is not the Hub
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    client = InferenceClient(model=server.url + "/predict")
    out = client.automatic_speech_recognition(clip, extra_body={"vad_filter": False})
    reference = requests.post(
        server.url + "/predict",
        json={"inputs": base64.b64encode(clip).decode(), "parameters": {"vad_filter": False}},
        timeout=120,
    ).json()
    assert out.text == reference["text"]
    assert [c.text for c in out.chunks] == [c["text"] for c in reference["chunks"]]


@pytest.fixture(scope="module")
def openai_client(server):
    from openai import OpenAI

    return OpenAI(base_url=server.url + "/v1", api_key="unused-locally", max_retries=0, timeout=120)


def test_openai_sdk_every_response_format(openai_client, clip, server):
    extra = {"extra_body": {"vad_filter": "false", "num_speakers": 2}}
    as_json = openai_client.audio.transcriptions.create(model="whisper-1", file=("clip.wav", clip), **extra)
    assert isinstance(as_json.text, str) and as_json.text

    text = openai_client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", clip), response_format="text", **extra
    )
    assert text.strip() == as_json.text

    srt = openai_client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", clip), response_format="srt", **extra
    )
    assert srt.startswith("1\n00:00:") and "-->" in srt and "SPEAKER_" in srt

    vtt = openai_client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", clip), response_format="vtt", **extra
    )
    assert vtt.startswith("WEBVTT") and "<v SPEAKER_" in vtt

    verbose = openai_client.audio.transcriptions.create(
        model="whisper-1",
        file=("clip.wav", clip),
        response_format="verbose_json",
        timestamp_granularities=["word", "segment"],
        **extra,
    )
    assert verbose.duration == pytest.approx(12.0) and verbose.segments and verbose.words
    assert all(w.start <= w.end for w in verbose.words)

    diarized = openai_client.audio.transcriptions.create(
        model="whisper-1", file=("clip.wav", clip), response_format="diarized_json", **extra
    )
    data = diarized if isinstance(diarized, dict) else diarized.model_dump()
    assert data["segments"] and all(s["speaker"].startswith("SPEAKER_") for s in data["segments"])
    assert all(s["type"] == "transcript.text.segment" for s in data["segments"])


def test_openai_errors_use_the_openai_shape(openai_client, clip):
    import openai

    with pytest.raises(openai.BadRequestError) as err:
        openai_client.audio.transcriptions.create(
            model="whisper-1", file=("clip.wav", clip), response_format="json", extra_body={"beam_size": 5}
        )
    assert "beam_size" in str(err.value)
    with pytest.raises(openai.BadRequestError, match="could not decode"):
        openai_client.audio.transcriptions.create(model="whisper-1", file=("x.mp3", b"not audio" * 50))


@pytest.mark.parametrize(
    "send, status, needle",
    [
        (lambda u: requests.post(u + "/predict", json={"inputs": "%%%"}, timeout=30), 400, "base64"),
        (
            lambda u: requests.post(u + "/predict", json={"inputs": "AAAA", "parameters": {"foo": 1}}, timeout=30),
            400,
            "unknown parameter",
        ),
        (
            lambda u: requests.post(
                u + "/predict", data=b"{not json", headers={"Content-Type": "application/json"}, timeout=30
            ),
            400,
            "not valid JSON",
        ),
        (
            lambda u: requests.post(u + "/predict", data=b"hello", headers={"Content-Type": "text/plain"}, timeout=30),
            415,
            "Content-Type",
        ),
        (lambda u: requests.get(u + "/nope", timeout=30), 404, ""),
    ],
)
def test_error_statuses(server, send, status, needle):
    r = send(server.url)
    assert r.status_code == status
    if needle:
        assert needle in r.json()["error"]


def test_bearer_token_is_required_when_configured(guarded, clip):
    small = wav_bytes(speechlike(2.0))
    body = {"inputs": base64.b64encode(small).decode(), "parameters": {"vad_filter": False}}
    assert requests.post(guarded.url + "/predict", json=body, timeout=60).status_code == 401
    wrong = requests.post(guarded.url + "/predict", json=body, headers={"Authorization": "Bearer nope"}, timeout=60)
    assert wrong.status_code == 401 and wrong.headers.get("WWW-Authenticate") == "Bearer"
    ok = requests.post(guarded.url + "/predict", json=body, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60)
    assert ok.status_code == 200, ok.text
    assert requests.get(guarded.url + "/health", timeout=5).status_code == 200  # health needs no token


def test_body_too_large_is_413(guarded):
    big = b"\0" * (2 * 1024 * 1024)
    r = requests.post(
        guarded.url + "/predict",
        data=big,
        headers={"Content-Type": "audio/wav", "Authorization": f"Bearer {TOKEN}"},
        timeout=60,
    )
    assert r.status_code == 413 and "MAX_BODY_MB" in r.json()["error"]


def test_full_queue_is_503_with_retry_after(guarded):
    # one slot, no queue: of requests sent at the same instant, one is processed (hundreds of ms) and those arriving
    # meanwhile (a few ms later) are turned away at once. No sleep-based guess of when the first one is running.
    audio = wav_bytes(speechlike(15.0, seed=3))  # ~640 kB as base64, under the 1 MB limit
    body = {
        "inputs": base64.b64encode(audio).decode(),
        "parameters": {"vad_filter": False, "batch_size": 1, "chunk_length_s": 2},
    }
    headers = {"Authorization": f"Bearer {TOKEN}"}
    senders = 4
    start = threading.Barrier(senders)

    def send(_):
        start.wait()
        return requests.post(guarded.url + "/predict", json=body, headers=headers, timeout=300)

    with ThreadPoolExecutor(max_workers=senders) as pool:
        answers = list(pool.map(send, range(senders)))
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) == {200, 503}, statuses
    for r in answers:
        if r.status_code == 503:
            assert r.headers.get("Retry-After") and "busy" in r.json()["error"]


def test_one_structured_log_line_per_request_without_secrets(guarded):
    lines = [
        json.loads(line.split(" speakerscribe.access ", 1)[1])
        for line in guarded.log.read_text().splitlines()
        if " speakerscribe.access " in line
    ]
    assert lines and all({"request_id", "method", "path", "status", "ms"} <= set(x) for x in lines)
    assert any(x["status"] == 200 and "timings" in x and "audio_s" in x for x in lines)
    text = guarded.log.read_text()
    assert TOKEN not in text
    assert "UklGR" not in text  # no base64 WAV header in the log


def test_k6_smoke(server, tmp_path):
    k6 = shutil.which("k6") or str(Path(sys.executable).parent / "k6")
    audio = tmp_path / "clip.wav"
    audio.write_bytes(wav_bytes(speechlike(4.0)))
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [
            k6,
            "run",
            "--quiet",
            "-e",
            f"BASE_URL={server.url}",
            "-e",
            f"AUDIO={audio}",
            "-e",
            'PARAMS={"vad_filter": false}',
            "-e",
            "ITERATIONS=3",
            "--summary-export",
            str(summary),
            str(REPO / "benchmarks" / "k6" / "transcribe.js"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    metrics = json.loads(summary.read_text())["metrics"]
    assert metrics["checks"]["passes"] == 6 and metrics["checks"]["fails"] == 0
    assert metrics["http_req_duration"]["med"] > 0


# ----------------------------------------------------------------------------- in-process: loading states, 500
def _serve_in_thread(app):
    import uvicorn

    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not srv.started and time.time() < deadline:
        time.sleep(0.05)
    return srv, thread, f"http://127.0.0.1:{port}"


def test_not_ready_is_503_then_ok():
    from speakerscribe.serve.command import ServerSettings, create_app

    gate = threading.Event()

    class Broken:
        def check_parameters(self, parameters):
            return None

        def process(self, data, cancel=None, consume=False):
            raise RuntimeError("boom: a bug of ours")

    def load():
        gate.wait(30)
        return Broken()

    srv, thread, url = _serve_in_thread(create_app(load, ServerSettings()))
    try:
        loading = requests.get(url + "/health", timeout=5)
        assert loading.status_code == 503 and loading.headers.get("Retry-After")
        early = requests.post(url + "/predict", json={"inputs": "AAAA"}, timeout=5)
        assert early.status_code == 503 and "loading" in early.json()["error"]
        gate.set()
        for _ in range(100):
            if requests.get(url + "/health", timeout=5).status_code == 200:
                break
            time.sleep(0.05)
        failing = requests.post(url + "/predict", json={"inputs": "AAAA"}, timeout=5)
        assert failing.status_code == 500
        assert failing.headers["X-Request-ID"] in failing.json()["error"]
        assert "boom" not in failing.json()["error"]  # internals stay in the log
    finally:
        srv.should_exit = True
        thread.join(10)


def test_failed_model_load_is_reported():
    from speakerscribe.errors import ModelLoadError
    from speakerscribe.serve.command import ServerSettings, create_app

    def load():
        raise ModelLoadError("could not load ASR_MODEL 'nowhere': not found")

    srv, thread, url = _serve_in_thread(create_app(load, ServerSettings()))
    try:
        for _ in range(100):
            health = requests.get(url + "/health", timeout=5)
            if health.status_code != 503:
                break
            time.sleep(0.05)
        # the reason goes to the log only: no internals in answers
        assert health.status_code == 500 and "failed to load" in health.json()["error"]
        assert "ASR_MODEL" not in health.text and "nowhere" not in health.text
        r = requests.post(url + "/predict", json={"inputs": "AAAA"}, timeout=5)
        assert r.status_code == 503 and "failed to load" in r.json()["error"] and "nowhere" not in r.text
        # the process keeps answering
        assert requests.get(url + "/metrics", timeout=5).status_code == 200
        assert requests.get(url + "/health", timeout=5).status_code == 500
    finally:
        srv.should_exit = True
        thread.join(10)


def test_k6_soak_smoke(server, tmp_path):
    """benchmarks/k6/soak.js, shortened: mixed valid and invalid requests and a burst past the queue; every
    answer is 200, 4xx for the invalid ones, or 503 with Retry-After for the burst; never another 5xx."""
    k6 = shutil.which("k6") or str(Path(sys.executable).parent / "k6")
    (tmp_path / "short.wav").write_bytes(wav_bytes(speechlike(3.0)))
    (tmp_path / "long.wav").write_bytes(wav_bytes(speechlike(12.0, seed=2)))
    (tmp_path / "ffconcat.txt").write_text("ffconcat version 1.0\nfile README.md\n")
    (tmp_path / "junk.bin").write_bytes(os.urandom(5000))
    (tmp_path / "sdp.txt").write_text("v=0\nc=IN IP4 127.0.0.1\nm=audio 5004 RTP/AVP 0\n")
    summary = tmp_path / "summary.json"
    proc = subprocess.run(
        [k6, "run", "--quiet", "-e", f"BASE_URL={server.url}", "-e", f"DIR={tmp_path}", "-e", "DURATION=20s",
         "-e", "VUS=2", "-e", "BURST=14", "-e", "BURST_AT=5s", "--summary-export", str(summary),
         str(REPO / "benchmarks" / "k6" / "soak.js")],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    metrics = json.loads(summary.read_text())["metrics"]
    assert metrics["checks"]["fails"] == 0 and metrics["checks"]["passes"] > 14
    assert metrics.get("server_errors", {}).get("count", 0) == 0
    assert metrics["refused"]["count"] >= 1  # the burst went past the queue (8) and was turned away, not queued
    assert metrics["http_req_duration{kind:invalid}"]["max"] < 10_000
