"""The CLI on real files: every format parses, parameters match the endpoint's, bad input exits non-zero."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from audio_helpers import wav_bytes
from conftest import REPO
from test_handler import speechlike

from speakerscribe.clients.cli import build_parser
from speakerscribe.models.settings import InferenceConfig

SRT_CUE = re.compile(r"^(\d+)\n(\d\d:\d\d:\d\d,\d{3}) --> (\d\d:\d\d:\d\d,\d{3})\n(.+)$")
VTT_TIME = re.compile(r"^(\d\d:\d\d:\d\d\.\d{3}) --> (\d\d:\d\d:\d\d\.\d{3})$")
RTTM = re.compile(r"^SPEAKER (\S+) 1 (\d+\.\d{3}) (\d+\.\d{3}) <NA> <NA> (\S+) <NA> <NA>$")


def seconds(stamp: str) -> float:
    h, m, rest = stamp.replace(",", ".").split(":")
    return int(h) * 3600 + int(m) * 60 + float(rest)


@pytest.fixture(scope="module")
def audio_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "clip.wav"
    path.write_bytes(wav_bytes(speechlike(12.0)))
    return path


def run_cli(args, random_models, **env):
    environ = {
        **os.environ,
        "ASR_MODEL": str(random_models.whisper_en),
        "DIARIZATION_MODEL": str(random_models.pipeline),
        "MAX_NEW_TOKENS": "24",
        **env,
    }
    environ.pop("ASSISTANT_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "speakerscribe.cli", *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=environ,
        timeout=600,
    )


def test_flags_are_the_request_parameters():
    from speakerscribe.clients.cli import CLIP_PARAMETERS

    parser = build_parser()
    dests = {a.dest for a in parser._actions}
    # the parameters that carry reference clips come from --speaker NAME=FILE instead
    assert set(CLIP_PARAMETERS) == {"known_speakers", "known_speaker_names", "known_speaker_references"}
    assert set(InferenceConfig.model_fields) - set(CLIP_PARAMETERS) <= dests and "speakers" in dests
    for name in set(InferenceConfig.model_fields) - set(CLIP_PARAMETERS):
        assert "--" + name.replace("_", "-") in parser._option_string_actions
    assert "--speaker" in parser._option_string_actions


def test_every_format_is_well_formed(tmp_path, audio_file, random_models):
    out = tmp_path / "out"
    proc = run_cli(
        [str(audio_file), "--format", "all", "--output-dir", str(out), "--vad-filter", "false", "--no-progress"],
        random_models,
    )
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"clip.{f}" for f in ("json", "txt", "srt", "vtt", "rttm"))
    # one format alone writes just that file, the same text as the run that wrote them all
    one = tmp_path / "one"
    proc = run_cli(
        [str(audio_file), "--format", "srt", "--output-dir", str(one), "--vad-filter", "false", "--no-progress"],
        random_models,
    )
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in one.iterdir()] == ["clip.srt"]
    assert (one / "clip.srt").read_text() == (out / "clip.srt").read_text()
    data = json.loads((out / "clip.json").read_text())
    assert {"speakers", "chunks", "text"} <= set(data) and data["chunks"]

    srt = (out / "clip.srt").read_text().strip().split("\n\n")
    assert len(srt) == len(data["speakers"])
    for i, block in enumerate(srt, start=1):
        m = SRT_CUE.match(block)
        assert m and int(m.group(1)) == i and seconds(m.group(2)) <= seconds(m.group(3)) <= 12.0
        assert m.group(4).startswith("SPEAKER_")

    vtt = (out / "clip.vtt").read_text().split("\n")
    assert vtt[0] == "WEBVTT"
    cues = [line for line in vtt if VTT_TIME.match(line)]
    assert len(cues) == len(data["speakers"])
    assert all(line.startswith("<v SPEAKER_") for line in vtt if line and not VTT_TIME.match(line) and line != "WEBVTT")

    rttm = (out / "clip.rttm").read_text().strip().splitlines()
    assert rttm
    for line in rttm:
        m = RTTM.match(line)
        assert m and m.group(1) == "clip" and float(m.group(3)) > 0 and m.group(4).startswith("SPEAKER_")

    txt = (out / "clip.txt").read_text().strip().splitlines()
    assert len(txt) == len(data["speakers"]) and all(re.match(r"^\[\d\d:\d\d:\d\d\.\d{3} --> ", t) for t in txt)


def test_stdout_and_progress(audio_file, random_models):
    proc = run_cli(
        [str(audio_file), "--vad-filter", "false", "--num-speakers", "1"], random_models, SPEAKERSCRIBE_PROGRESS="1"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("[00:00:")
    assert "transcribe" in proc.stderr and "/" in proc.stderr


@pytest.mark.parametrize(
    "args, code, needle",
    [
        (["missing.wav"], 2, "no such file"),
        (["{audio}", "--batch-size", "0"], 2, "batch_size"),
        (["{audio}", "--num-speakers", "2", "--min-speakers", "1"], 2, "num_speakers"),
        (["{junk}"], 2, "could not decode"),
        (["{audio}", "--format", "docx"], 2, "invalid choice"),
        (["{audio}", "--format", "all"], 2, "--format all writes one file per format: give --output-dir"),
        (["{audio}", "--format", "all", "-o", "{tmp}", "--endpoint", "http://127.0.0.1:9"], 2, "without --endpoint"),
    ],
)
def test_bad_input_exits_non_zero_with_a_message(tmp_path, audio_file, random_models, args, code, needle):
    junk = tmp_path / "junk.mp3"
    junk.write_bytes(b"not audio at all" * 20)
    args = [a.format(audio=audio_file, junk=junk, tmp=tmp_path) for a in args]
    proc = run_cli(args, random_models)
    assert proc.returncode == code
    assert needle in proc.stderr


def test_missing_model_exits_one(audio_file, random_models, tmp_path):
    proc = run_cli([str(audio_file)], random_models, ASR_MODEL=str(tmp_path / "nope"), HF_HUB_OFFLINE="1")
    assert proc.returncode == 1 and "could not load" in proc.stderr
