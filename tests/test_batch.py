"""The batch client (python -m speakerscribe.cli --endpoint ...) against real server processes on 127.0.0.1: one
of two servers killed mid-run loses and duplicates nothing, a busy server's 503 + Retry-After is honoured, a second
run resumes, refused files and tokens are reported."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from audio_helpers import wav_bytes
from conftest import REPO
from test_handler import speechlike
from test_server import Server, model_env

pytestmark = pytest.mark.slow

DURATIONS = [3.0 + 0.5 * i for i in range(10)]  # distinct, so every output can be matched to its own file


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("recordings")
    for i, seconds in enumerate(DURATIONS):
        sub = root / ("day1" if i % 2 else "day2")
        sub.mkdir(exist_ok=True)
        (sub / f"call{i:02d}.wav").write_bytes(wav_bytes(speechlike(seconds)))
    (root / "notes.txt").write_text("not audio: ignored by the folder walk")
    return root


def run_cli(*args: str, env_extra: dict | None = None, wait: bool = True):
    env = {**os.environ, "SPEAKERSCRIBE_PROGRESS": "1", **(env_extra or {})}
    env.pop("SPEAKERSCRIBE_TOKEN", None)
    env.pop("HF_TOKEN", None)
    command = [sys.executable, "-m", "speakerscribe.cli", *args]
    if wait:
        return subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    return subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def outputs(out: Path) -> dict[str, dict]:
    return {str(p.relative_to(out)): json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))}


def check_complete(out: Path) -> None:
    found = outputs(out)
    expected = {f"day{'1' if i % 2 else '2'}/call{i:02d}.json": d for i, d in enumerate(DURATIONS)}
    assert set(found) == set(expected)
    for name, seconds in expected.items():
        assert found[name]["duration"] == pytest.approx(seconds, abs=0.01), name  # its own file's answer
    assert not [p for p in out.rglob("*") if p.name.endswith(".part")]


@pytest.fixture()
def two_servers(random_models, tmp_path):
    env = {**model_env(random_models), "MAX_NEW_TOKENS": "8", "MAX_QUEUE": "4"}
    servers = [Server(env, tmp_path / f"server{i}.log") for i in range(2)]
    for s in servers:
        s.wait_ready()
    yield servers
    for s in servers:
        s.stop()


def test_a_server_killed_mid_run_loses_nothing_and_a_second_run_resumes(two_servers, folder, tmp_path):
    out = tmp_path / "out"
    a, b = two_servers
    proc = run_cli(
        "--endpoint", a.url, "--endpoint", b.url, "--format", "json", "--output-dir", str(out),
        "--vad-filter", "false", str(folder), wait=False,
    )  # fmt: skip
    deadline = time.time() + 300
    while len(list(out.rglob("*.json"))) < 2 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.05)
    a.proc.send_signal(signal.SIGKILL)  # mid-run: its requests in flight are lost with it
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr[-3000:]
    check_complete(out)
    assert "10/10 files (0 skipped, 0 failed)" in stderr
    served_by_b = sum('"status": 200' in line for line in b.log.read_text().splitlines())
    assert served_by_b >= len(DURATIONS) - 2  # b took over what a could no longer do

    before = {p: p.stat().st_mtime_ns for p in out.rglob("*.json")}
    again = run_cli("--endpoint", b.url, "--format", "json", "--output-dir", str(out), str(folder))
    assert again.returncode == 0 and "10/10 files (10 skipped, 0 failed)" in again.stderr
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*.json")} == before


def test_busy_server_503_with_retry_after_is_honoured(random_models, folder, tmp_path):
    env = {**model_env(random_models), "MAX_NEW_TOKENS": "8", "MAX_CONCURRENCY": "1", "MAX_QUEUE": "0"}
    server = Server(env, tmp_path / "busy.log")
    server.wait_ready()
    # four of the files: each 503 rests the endpoint for its Retry-After (5 s), so ten files spent over a minute
    # resting without testing anything more
    few = tmp_path / "few"
    for wav in sorted(folder.rglob("*.wav"))[:4]:
        (few / wav.parent.name).mkdir(parents=True, exist_ok=True)
        (few / wav.parent.name / wav.name).write_bytes(wav.read_bytes())
    try:
        out = tmp_path / "srt"
        proc = run_cli(
            "--endpoint", server.url, "--concurrency", "3", "--format", "srt", "--output-dir", str(out),
            "--retries", "20", str(few),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert sorted(p.relative_to(out).with_suffix("") for p in out.rglob("*.srt")) == sorted(
            p.relative_to(few).with_suffix("") for p in few.rglob("*.wav")
        )
        log = server.log.read_text()
        assert '"status": 503' in log  # it was busy, and every file still came through
    finally:
        server.stop()


def test_refused_files_are_reported_and_the_rest_done(two_servers, folder, tmp_path):
    bad = tmp_path / "mixed"
    bad.mkdir()
    (bad / "good.wav").write_bytes(wav_bytes(speechlike(3.0)))
    (bad / "broken.wav").write_bytes(b"RIFF\x00\x00\x00\x00WAVEnot really")
    out = tmp_path / "out"
    proc = run_cli("--endpoint", two_servers[0].url, "--format", "txt", "--output-dir", str(out), str(bad))
    assert proc.returncode == 1
    assert "broken.wav" in proc.stderr and "HTTP 400" in proc.stderr
    assert (out / "good.txt").is_file() and not (out / "broken.txt").exists()


def test_a_refused_token_stops_the_run(random_models, folder, tmp_path):
    env = {**model_env(random_models), "MAX_NEW_TOKENS": "8", "API_TOKEN": "right-token"}
    server = Server(env, tmp_path / "auth.log")
    server.wait_ready()
    try:
        proc = run_cli("--endpoint", server.url, "--token", "wrong", "--output-dir", str(tmp_path / "o"), str(folder))
        assert proc.returncode == 1 and "token was refused" in proc.stderr
        assert not list((tmp_path / "o").rglob("*.txt"))
    finally:
        server.stop()


def test_usage_errors(tmp_path):
    missing = run_cli("--endpoint", "http://127.0.0.1:9", "--output-dir", str(tmp_path), str(tmp_path / "nope"))
    assert missing.returncode == 2 and "no such file" in missing.stderr
    no_out = run_cli("--endpoint", "http://127.0.0.1:9", str(tmp_path))
    assert no_out.returncode == 2 and "--output-dir" in no_out.stderr


def test_known_speakers_go_as_json_bodies(two_servers, meeting, tmp_path):
    """--speaker with --endpoint: the clips cannot ride in a query string, so each request is a JSON body."""
    calls = tmp_path / "calls"
    calls.mkdir()
    (calls / "call.wav").write_bytes(meeting.wav.read_bytes())
    out = tmp_path / "out"
    proc = run_cli(
        "--endpoint", two_servers[0].url, "--format", "json", "--output-dir", str(out), str(calls),
        "--speaker", f"Ada Lovelace={meeting.wav}", "--num-speakers", "2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    answer = json.loads((out / "call.json").read_text())
    assert [k["name"] for k in answer["known_speakers"]] == ["Ada Lovelace"]
    bad = run_cli("--endpoint", two_servers[0].url, "--output-dir", str(out), str(calls), "--speaker", "Ada")
    assert bad.returncode == 2 and "NAME=FILE" in bad.stderr
