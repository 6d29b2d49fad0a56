"""Hostile input against a live server, and property-based fuzzing of the two parsers of strangers' bytes.

Every generated hostile body (speakerscribe_dev.hostile: demuxer tricks, polyglots, truncated and corrupt
files of every format, header bombs, parameter abuse, odd encodings) must be answered 4xx within seconds, never
read a local file or reveal whether one exists, never echo a huge value, and leave the server healthy with its
memory bounded.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
import requests
from audio_helpers import wav_bytes
from conftest import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_handler import speechlike
from test_server import Server, model_env

from speakerscribe.audio.decode import load_inputs
from speakerscribe.errors import InputError
from speakerscribe.models.settings import parse_parameters
from speakerscribe_dev.hostile import hostile_cases


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def hostile_server(random_models, tmp_path_factory):
    s = Server(model_env(random_models), tmp_path_factory.mktemp("hostile") / "server.log")
    s.wait_ready()
    yield s
    s.stop()


@pytest.mark.slow
def test_every_hostile_body_is_refused_quickly_and_the_server_stays_healthy(hostile_server):
    # the concat tricks point at a real audio file the server could read (relative to its working directory, which
    # FFmpeg's concat demuxer accepts as "safe"): it must not be opened
    target = REPO / ".cache" / "hostile" / "meeting.wav"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(wav_bytes(speechlike(3.0)))
    cases = hostile_cases(existing_file=str(target.relative_to(REPO)))
    assert sum(not c.may_decode for c in cases) >= 100
    url = hostile_server.url
    pid = hostile_server.proc.pid
    rss = []
    failures = []
    for i, case in enumerate(cases):
        t0 = time.perf_counter()
        r = requests.post(
            url + case.route + (f"?{case.query}" if case.query else ""),
            data=case.body,
            headers={"Content-Type": case.content_type, **case.headers},
            timeout=30,
        )
        seconds = time.perf_counter() - t0
        allowed = {400, 408, 413, 415} | ({200} if case.may_decode else set())
        text = r.text
        if r.status_code not in allowed:
            failures.append(f"{case.name}: {r.status_code} {text[:200]}")
        if seconds > 5:
            failures.append(f"{case.name}: took {seconds:.1f} s")
        if len(text) > 1500 or "x" * 150 in text or "k" * 150 in text:
            failures.append(f"{case.name}: the answer echoes a large value ({len(text)} characters)")
        if "No such file" in text or "Permission denied" in text or "passwd" in text:
            failures.append(f"{case.name}: the answer reveals the file system: {text[:200]}")
        if requests.get(url + "/health", timeout=5).status_code != 200:
            failures.append(f"{case.name}: server unhealthy after it")
        rss.append(rss_mb(pid))
        if i == 9:
            baseline = rss[-1]
    assert not failures, "\n".join(failures)
    # memory: after the first ten cases (allocator warm-up), the server may not grow by more than 300 MB
    assert max(rss[10:]) - baseline < 300, (baseline, max(rss[10:]))
    log = hostile_server.log.read_text()
    assert "Traceback" not in log, log[-3000:]
    assert '"status": 500' not in log


# ------------------------------------------------------------------------------------------ property-based
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.binary(max_size=2048),
        st.builds(
            lambda magic, rest: magic + rest,
            st.sampled_from(
                [
                    b"RIFF\x00\x00\x00\x00WAVE",
                    b"fLaC",
                    b"OggS",
                    b"ID3",
                    b"\xff\xfb",
                    b"\xff\xf1",
                    b"\x00\x00\x00\x18ftypM4A ",
                    b"\x1a\x45\xdf\xa3",
                    b"FORM\x00\x00\x00\x00AIFF",
                    b"#!AMR\n",
                    b"caff",
                    b".snd",
                ]
            ),  # fmt: skip
            st.binary(max_size=2048),
        ),
        st.text(max_size=512),
        st.lists(st.one_of(st.floats(), st.integers(), st.text(max_size=3), st.none()), max_size=64),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
        st.integers(),
        st.none(),
    )
)
def test_load_inputs_raises_only_input_error(inputs):
    try:
        decoded = load_inputs(inputs, 16000, max_seconds=60)
    except InputError:
        return
    samples = decoded.waveform.samples
    assert samples.ndim == 1 and samples.dtype.name == "float32"
    assert decoded.waveform.duration <= 60 + 1


_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=200),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
_names = st.one_of(
    st.sampled_from(
        [
            "task",
            "batch_size",
            "assisted",
            "chunk_length_s",
            "sampling_rate",
            "language",
            "num_speakers",
            "min_speakers",
            "max_speakers",
            "return_timestamps",
            "group_by_speaker",
            "speaker_entries",
            "vad_filter",
            "prompt",
            "temperature",
        ]
    ),  # fmt: skip
    st.text(max_size=20),
)


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.dictionaries(_names, _values, max_size=6), _values))
def test_parse_parameters_raises_only_input_error_and_quotes_little(parameters):
    try:
        cfg = parse_parameters(parameters)
    except InputError as exc:
        assert len(str(exc)) < 2500
        return
    assert 1 <= cfg.chunk_length_s <= 30 and math.isfinite(cfg.temperature)
