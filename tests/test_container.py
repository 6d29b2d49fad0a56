"""The custom image (Dockerfile) without a container: hadolint, and the image's own entry command, with the image's
environment, run from a folder that holds exactly what the Dockerfile copies, against the offline default models.
tests/test_image.py builds and runs the image itself with podman."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
from conftest import REPO
from test_server import free_port

pytestmark = pytest.mark.slow

DOCKERFILE = REPO / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def image_env() -> dict[str, str]:
    """The image's environment: ENV values with ${ARG} references expanded to the build arguments' defaults."""
    args: dict[str, str] = {}
    env: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default.strip('"')
        elif word == "ENV":
            for key, value in re.findall(r'(\w+)=("[^"]*"|\S+)', rest):
                env[key] = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), value.strip('"'))
    return env


def image_command() -> list[str]:
    commands = [json.loads(rest) for word, rest in instructions() if word == "CMD"]
    return commands[-1]


def image_files(dest: Path) -> Path:
    """A folder with what the Dockerfile's COPY instructions put in /app (build arguments at their defaults)."""
    dest.mkdir(parents=True, exist_ok=True)
    args: dict[str, str] = {}
    for word, rest in instructions():
        if word == "ARG":
            name, _, default = rest.partition("=")
            args[name] = default.strip('"')
        if word != "COPY" or rest.startswith("--"):
            continue
        *sources, _target = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest).split()
        for source in sources:
            path = REPO / source
            if path.is_dir():
                shutil.copytree(path, dest / source, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(path, dest / source)
    return dest


def test_dockerfile_passes_hadolint():
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    proc = subprocess.run([hadolint, str(DOCKERFILE)], cwd=REPO, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_image_runs_the_server_on_port_80_as_a_non_root_user_with_a_health_check():
    env = image_env()
    assert env["PORT"] == "80" and env["HOST"] == "0.0.0.0"
    assert env["ASR_MODEL"] == env["ASSISTANT_MODEL"] == env["DIARIZATION_MODEL"] == ""  # named at run time
    assert image_command()[1:] == ["-m", "speakerscribe.server"]
    words = dict(instructions())
    assert words["USER"] != "root" and words["USER"] != "0"
    assert "/health" in words["HEALTHCHECK"] and words["EXPOSE"] == "80"


def test_the_images_entry_command_serves_the_offline_models(real_models, meeting, tmp_path):
    app = image_files(tmp_path / "app")
    assert not (app / "speakerscribe_dev").exists() and (app / "handler.py").is_file()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(image_env())
    env.update(
        PORT=str(port),  # the image binds 80; here a free port on loopback
        HOST="127.0.0.1",
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="1",
        ASR_MODEL=str(real_models / "whisper-tiny.en"),
        DIARIZATION_MODEL=str(real_models / "diarization"),
    )
    command = [sys.executable, *image_command()[1:]]
    log = tmp_path / "server.log"
    proc = subprocess.Popen(command, cwd=app, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.time() + 300
        while time.time() < deadline:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if requests.get(url + "/health", timeout=2).status_code in (200, 500):  # loaded, or failed to
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.5)
        r = requests.post(
            url + "/predict", data=meeting.wav.read_bytes(), headers={"Content-Type": "audio/wav"}, timeout=600
        )
        assert r.status_code == 200, r.text
        out = r.json()
        assert len({u["speaker"] for u in out["speakers"]}) == 2 and len(out["text"].split()) > 20
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_baking_step_loads_the_named_models_and_fails_clearly_on_a_missing_one(real_models, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "DEVICE": "cpu", "ASR_MODEL": str(real_models / "whisper-tiny.en")}
    env.pop("DIARIZATION_MODEL", None)
    env.pop("ASSISTANT_MODEL", None)
    ok = subprocess.run(
        [sys.executable, "-m", "speakerscribe.models.loading"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "loaded: ASR on cpu" in ok.stderr
    env["ASR_MODEL"] = str(tmp_path / "missing")
    bad = subprocess.run(
        [sys.executable, "-m", "speakerscribe.models.loading"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert bad.returncode == 1 and "could not load ASR_MODEL" in bad.stderr
