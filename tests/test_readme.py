"""The README's client snippets, run as written (URL and file substituted) against a live server, and the README's
parameter and environment tables kept in step with the code."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO

from speakerscribe.models.settings import InferenceConfig, ModelSettings

README = (REPO / "README.md").read_text()


def snippet(name: str) -> tuple[str, str]:
    m = re.search(rf"<!-- snippet: {re.escape(name)} -->\n```(\w+)\n(.*?)```", README, re.S)
    assert m, f"README snippet {name!r} not found"
    return m.group(1), m.group(2)


@pytest.fixture(scope="module")
def live(random_models, meeting, tmp_path_factory):
    """A server with the random models, and the festival meeting (real speech, so the VAD finds some)."""
    from test_server import Server, model_env

    s = Server(model_env(random_models), tmp_path_factory.mktemp("readme") / "server.log")
    s.wait_ready()
    yield s, meeting.wav
    s.stop()


def localise(code: str, url: str, audio) -> str:
    return code.replace("http://127.0.0.1:5000", url).replace("samples/meeting.wav", str(audio))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["openai", "huggingface_hub"])
def test_python_snippets_run(live, name):
    server, audio = live
    lang, code = snippet(name)
    assert lang == "python"
    proc = subprocess.run(
        [sys.executable, "-c", localise(code, server.url, audio)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "0"},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip()


@pytest.mark.slow
def test_curl_snippets_run(live):
    server, audio = live
    lang, code = snippet("curl")
    assert lang == "bash"
    outputs = []
    for line in code.strip().splitlines():
        proc = subprocess.run(
            ["bash", "-c", localise(line, server.url, audio) + " --fail-with-body"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        outputs.append(proc.stdout)
    assert '"speakers"' in outputs[0]
    assert "-->" in outputs[1]


def test_every_parameter_and_setting_is_documented():
    for name in InferenceConfig.model_fields:
        assert f"`{name}`" in README, f"parameter {name} missing from the README"
    for name in ModelSettings.model_fields:
        assert f"`{name.upper()}`" in README, f"environment variable {name.upper()} missing from the README"


def test_every_server_variable_is_documented():
    from speakerscribe.serve.service import ServerSettings

    for name in ServerSettings.model_fields:
        assert f"`{name.upper()}`" in README, f"server variable {name.upper()} missing from the README"
