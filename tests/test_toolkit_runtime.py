"""The repository served the way the Endpoints default container serves it (speakerscribe_dev/toolkit_runtime.py,
our stand-in written from huggingface-inference-toolkit's behaviour): a clean copy of the tracked files as
/repository, the runtime started from another working directory, real HTTP on 127.0.0.1."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from audio_helpers import wav_bytes
from conftest import REPO
from test_handler import speechlike
from test_server import Server

pytestmark = pytest.mark.slow

RUNTIME = REPO / "speakerscribe_dev" / "toolkit_runtime.py"


def repository_copy(dest: Path) -> Path:
    """The tracked files only, as duplicating the repository on the Hub gives them (no models, no .venv)."""
    dest.mkdir(parents=True)
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return dest


def Runtime(model_dir: Path, workdir: Path, env: dict[str, str], log: Path) -> Server:
    """The stand-in started as the container starts its runtime: HF_MODEL_DIR set, from a working directory where
    the repository is importable only through the runtime's sys.path."""
    workdir.mkdir(parents=True, exist_ok=True)
    return Server(
        {"HF_MODEL_DIR": str(model_dir), **env},
        log,
        argv=lambda port: [sys.executable, str(RUNTIME), "--port", str(port)],
        cwd=workdir,
        drop=("PYTHONPATH", "HF_TASK"),
    )


def model_env(random_models, **extra: str) -> dict[str, str]:
    return {
        "ASR_MODEL": str(random_models.whisper_en),
        "DIARIZATION_MODEL": str(random_models.pipeline),
        "MAX_NEW_TOKENS": "8",
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
        **extra,
    }


@pytest.fixture(scope="module")
def repository(tmp_path_factory) -> Path:
    return repository_copy(tmp_path_factory.mktemp("endpoint") / "repository")


@pytest.fixture(scope="module")
def runtime(repository, random_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("toolkit")
    r = Runtime(repository, root / "app", model_env(random_models), root / "runtime.log")
    r.wait_ready()
    yield r
    r.stop()


@pytest.fixture(scope="module")
def clip() -> bytes:
    return wav_bytes(speechlike(6.0))


def test_start_up_installs_nothing_over_the_environment_and_imports_the_handler_from_the_repository(runtime):
    log = runtime.log.read_text()
    # pip ran over requirements.txt (dry run): every range is met, so nothing (torch above all) would be installed
    assert "== pip install -r requirements.txt" in log
    assert "Would install" not in log, log[:3000]
    assert "Requirement already satisfied: torch" in log
    for path in ("/", "/health"):
        r = requests.get(runtime.url + path, timeout=5)
        assert r.status_code == 200 and r.text == "Ok"
    metrics = requests.get(runtime.url + "/metrics", timeout=5).text
    assert "inf_queue_size 0" in metrics


def test_json_with_base64_audio_answers_the_original_shape(runtime, clip):
    body = {"inputs": base64.b64encode(clip).decode(), "parameters": {"vad_filter": False, "num_speakers": 1}}
    r = requests.post(runtime.url + "/predict", json=body, timeout=120)
    assert r.status_code == 200, r.text
    out = r.json()
    assert {"speakers", "chunks", "text"} <= set(out) and out["duration"] == pytest.approx(6.0, abs=0.01)
    assert all(u["speaker"] == out["speakers"][0]["speaker"] for u in out["speakers"])  # num_speakers reached us


def test_charset_spelling_the_runtime_accepts_and_the_one_it_refuses(runtime, clip):
    body = json.dumps({"inputs": base64.b64encode(clip).decode()})
    ok = requests.post(
        runtime.url + "/", data=body, headers={"Content-Type": "application/json; charset=UTF-8"}, timeout=120
    )
    assert ok.status_code == 200, ok.text
    refused = requests.post(
        runtime.url + "/", data=body, headers={"Content-Type": "application/json; charset=utf-8"}, timeout=30
    )
    assert refused.status_code == 400 and "not supported" in refused.json()["error"]


@pytest.mark.parametrize("content_type", ["audio/wav", "audio/x-wav", "audio/webm;codecs=opus"])
def test_raw_audio_body_with_query_parameters(runtime, clip, content_type):
    # the runtime turns "2" into 2 and "false" into False, and leaves "0.0" a string: our parameters accept all three
    r = requests.post(
        runtime.url + "/predict?vad_filter=false&num_speakers=2&temperature=0.0&return_timestamps=word",
        data=clip,
        headers={"Content-Type": content_type},
        timeout=120,
    )
    assert r.status_code == 200, r.text
    assert "words" in r.json()["chunks"][0]


def test_our_errors_come_back_as_the_runtimes_400_with_our_message(runtime, clip):
    body = {"inputs": base64.b64encode(clip).decode(), "parameters": {"num_speakers": 0}}
    r = requests.post(runtime.url + "/predict", json=body, timeout=30)
    assert r.status_code == 400 and "`num_speakers`: Input should be greater than or equal to 1" in r.json()["error"]
    undecodable = requests.post(
        runtime.url + "/predict", data=b"not audio at all", headers={"Content-Type": "audio/wav"}, timeout=30
    )
    assert undecodable.status_code == 400 and "audio" in undecodable.json()["error"].lower()
    no_inputs = requests.post(runtime.url + "/predict", json={"parameters": {}}, timeout=30)
    assert no_inputs.status_code == 400 and "inputs" in no_inputs.json()["error"]
    assert requests.get(runtime.url + "/health", timeout=5).status_code == 200  # still serving


def test_a_browser_accept_header_is_refused_by_the_runtime_after_the_work(runtime, clip):
    r = requests.post(
        runtime.url + "/predict",
        json={"inputs": base64.b64encode(clip).decode()},
        headers={"Accept": "application/json, text/plain, */*"},
        timeout=120,
    )
    assert r.status_code == 400 and "Accept type" in r.json()["error"]


def test_asr_task_decodes_base64_before_the_handler(repository, random_models, tmp_path, clip):
    """With HF_TASK=automatic-speech-recognition the runtime hands us bytes, not base64 text."""
    r = Runtime(
        repository, tmp_path / "app", model_env(random_models, HF_TASK="automatic-speech-recognition"), tmp_path / "l"
    )
    try:
        r.wait_ready()
        body = {"inputs": base64.b64encode(clip).decode(), "parameters": {"vad_filter": False}}
        out = requests.post(r.url + "/predict", json=body, timeout=120)
        assert out.status_code == 200, out.text
        assert out.json()["duration"] == pytest.approx(6.0, abs=0.01)
    finally:
        r.stop()


def test_a_handler_that_cannot_load_stops_the_runtime_before_the_port_opens(repository, tmp_path):
    r = Runtime(
        repository, tmp_path / "app", {"ASR_MODEL": str(tmp_path / "missing"), "HF_HUB_OFFLINE": "1"}, tmp_path / "l"
    )
    try:
        assert r.proc.wait(timeout=300) != 0
        log = r.log.read_text()
        assert "could not load ASR_MODEL" in log
    finally:
        r.stop()
