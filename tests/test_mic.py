"""The microphone client (``python -m speakerscribe.stream --mic``) without a sound card: a virtual sounddevice
(the same ``query_devices`` / ``default.device`` / ``InputStream(callback=...)`` interface) plays five turns of a
festival conversation at a 44.1 kHz device rate, in 100 ms callbacks, to a real server on loopback with real weights
(tiny.en + the offline diarizer); a real SIGINT ends the session."""

from __future__ import annotations

import io
import os
import signal
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest
from test_server import Server
from test_streaming import live_env

from speakerscribe.clients import mic
from speakerscribe.clients import stream as client

DEVICE_RATE = 44100


class VirtualInputStream:
    """Plays ``samples`` (at the device rate) through ``callback`` from its own thread, ``speed`` times faster
    than real time, as PortAudio calls sounddevice's callback: (indata[frames, channels] float32, frames, time,
    status). When the audio is over, calls ``on_end``."""

    def __init__(self, backend, *, device, channels, samplerate, dtype, blocksize, callback):
        assert dtype == "float32" and channels == 1
        self.backend, self.callback, self.blocksize = backend, callback, blocksize
        self.opened = dict(device=device, samplerate=samplerate)
        self.running = threading.Event()
        self.closed = False
        backend.streams.append(self)

    def start(self) -> None:
        self.running.set()
        threading.Thread(target=self._play, daemon=True).start()

    def _play(self) -> None:
        samples, step = self.backend.samples, self.blocksize
        start = time.perf_counter()
        for i in range(0, len(samples), step):
            if not self.running.is_set():
                return
            block = samples[i : i + step]
            self.callback(block[:, None].astype(np.float32), len(block), None, None)
            ahead = (i + step) / self.opened["samplerate"] / self.backend.speed - (time.perf_counter() - start)
            if ahead > 0:
                time.sleep(ahead)
        self.backend.on_end()

    def stop(self) -> None:
        self.running.clear()

    def close(self) -> None:
        self.closed = True


class VirtualSoundDevice:
    """A stand-in for the ``sounddevice`` module with the given devices (PortAudio's dicts)."""

    def __init__(self, devices, default_in=0, samples=None, speed=1.0, on_end=lambda: None):
        self.devices, self.samples, self.speed, self.on_end = devices, samples, speed, on_end
        self.default = SimpleNamespace(device=[default_in, -1])
        self.streams: list[VirtualInputStream] = []

    def query_devices(self):
        return self.devices

    def InputStream(self, **kwargs):  # noqa: N802 (sounddevice's name)
        return VirtualInputStream(self, **kwargs)


DEVICES = [
    {"name": "HDA Intel PCH: ALC257 Analog (hw:0,0)", "max_input_channels": 2, "default_samplerate": 44100.0},
    {"name": "HDMI 0 (hw:0,3)", "max_input_channels": 0, "default_samplerate": 48000.0},
    {"name": "USB Headset Mic", "max_input_channels": 1, "default_samplerate": 48000.0},
]


# ----------------------------------------------------------------------------------------------- no server
def test_devices_listed_chosen_and_refused(capsys):
    sd = VirtualSoundDevice(DEVICES, default_in=0)
    assert client.main(["--list-devices"], audio_backend=sd) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing == [
        "*   0  HDA Intel PCH: ALC257 Analog (hw:0,0)  (2 ch, 44100 Hz)",
        "    2  USB Headset Mic  (1 ch, 48000 Hz)",
    ]
    devices = mic.input_devices(sd)
    assert mic.choose_device(devices, None).index == 0 and mic.choose_device(devices, "usb").index == 2
    # an output-only device, a number nobody has, a name nobody has: refused, listing what there is
    for wanted in ("1", "7", "-1", "webcam"):
        assert client.main(["--mic", "--device", wanted], audio_backend=sd) == 2
        err = capsys.readouterr().err
        assert f"--device '{wanted}' is not an input device" in err and "USB Headset Mic" in err, err
    assert client.main(["--mic", "--device", "h"], audio_backend=sd) == 2  # "HDA ..." and "USB Headset"
    assert "matches several" in capsys.readouterr().err
    assert sd.streams == []  # nothing was opened for a refused device
    empty = VirtualSoundDevice([DEVICES[1]], default_in=-1)
    assert client.main(["--mic"], audio_backend=empty) == 2
    assert "no audio input device found" in capsys.readouterr().err
    assert client.main(["--list-devices"], audio_backend=empty) == 0
    assert capsys.readouterr().out.strip() == "no audio input devices"


def test_missing_sounddevice_says_what_to_install(monkeypatch, capsys):
    import sys

    monkeypatch.setitem(sys.modules, "sounddevice", None)  # import fails as when it is not installed
    assert client.main(["--mic"]) == 2
    err = capsys.readouterr().err
    assert "pip install sounddevice" in err and "libportaudio2" in err


def test_device_that_fails_to_open_is_reported(capsys):
    sd = VirtualSoundDevice(DEVICES)

    def refuse(**kwargs):
        raise RuntimeError("Error opening InputStream: Invalid sample rate [PaErrorCode -9997]")

    sd.InputStream = refuse
    assert client.main(["--mic", "--url", "http://127.0.0.1:9"], audio_backend=sd) == 2
    err = capsys.readouterr().err
    assert "could not open input device 0" in err and "Invalid sample rate" in err


def test_buffer_is_bounded_when_nobody_reads():
    """A stalled connection: the callback keeps coming, the buffer holds max_buffer_s and counts what it drops."""
    stop = threading.Event()
    source = mic.MicSource(VirtualSoundDevice(DEVICES), mic.InputDevice(0, "x", 1, 48000, True), stop, max_buffer_s=1)
    block = np.zeros((4800, 1), dtype=np.float32)
    for _ in range(50):  # 5 s of callbacks
        source._callback(block, 4800, None, None)
    assert source.blocks.qsize() == 10 and source.dropped_seconds == pytest.approx(4.0)
    stop.set()
    sent = b"".join(source)  # what was buffered still goes, resampled to 16 kHz pcm16
    assert abs(len(sent) // 2 - 16000) <= 160


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_redraws_the_partial_in_place():
    out = Terminal()
    show = client.Printer(as_json=False, out=out)
    show("partial", {"id": "a", "delta": " Good"})
    show("partial", {"id": "a", "delta": " morning"})
    show("final", {"id": "a", "start": 0.5, "end": 2.25, "speaker": "SPEAKER_00", "text": " Good morning all."})
    assert out.getvalue() == (
        "\r\033[K... Good" "\r\033[K... Good morning" "\r\033[K[0.50-2.25] SPEAKER_00: Good morning all.\n"
    )  # fmt: skip
    plain = io.StringIO()
    show = client.Printer(as_json=False, out=plain)
    show("partial", {"id": "a", "delta": " Good"})
    show("final", {"id": "a", "start": 0.5, "end": 2.25, "speaker": "SPEAKER_01", "text": " Good."})
    assert plain.getvalue() == "[0.50-2.25] SPEAKER_01: Good.\n"  # no partials, no control codes in a pipe


# ----------------------------------------------------------------------------------------- a live server
@pytest.fixture(scope="module")
def mic_server(real_models, tmp_path_factory):
    s = Server(live_env(real_models, API_TOKEN="mic-s3cret"), tmp_path_factory.mktemp("mic") / "server.log")
    s.wait_ready()
    yield s
    s.stop()


@pytest.mark.slow
def test_microphone_conversation_arrives_with_speakers_and_ctrl_c_gives_the_summary(mic_server, meeting, capsys):
    from speakerscribe.audio.decode import decode_audio, resample
    from speakerscribe_dev.evaluation import wer

    turns = meeting.turns[:5]  # A, B, A, B, A: both speakers, and half the meeting's time in CI
    samples = decode_audio(meeting.wav.read_bytes()).waveform.samples[: int(turns[-1].end * 16000) + 8000]
    samples = resample(samples, 16000, DEVICE_RATE)
    samples = np.concatenate([samples, np.zeros(DEVICE_RATE, dtype=np.float32)])  # a second of room tone
    sd = VirtualSoundDevice(
        DEVICES, default_in=0, samples=samples, speed=3.0, on_end=lambda: os.kill(os.getpid(), signal.SIGINT)
    )
    argv = ["--mic", "--url", mic_server.url, "--token", "mic-s3cret"]
    before = signal.getsignal(signal.SIGINT)  # Python's handler, or SIG_IGN when started in the background
    assert client.main(argv, audio_backend=sd) == 0
    out, err = capsys.readouterr()
    assert "stopping" in err and "error" not in err, err
    lines = out.strip().splitlines()
    finals, summary = lines[:-1], lines[-1]
    assert summary.startswith("== summary (live labels):") and f"{len(finals)} segments" in summary
    assert lines[0].startswith("[0.") and "SPEAKER_00: Good morning" in lines[0], lines
    assert {line.split("] ")[1].split(":")[0] for line in finals} == {"SPEAKER_00", "SPEAKER_01"}
    text = " ".join(line.split(": ", 1)[1] for line in finals)
    assert wer(" ".join(t.text for t in turns), text) < 0.25, text
    (stream,) = sd.streams
    assert stream.opened == {"device": 0, "samplerate": DEVICE_RATE} and stream.closed
    # the signal handler is put back: a later Ctrl-C does what it did before the client ran
    assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.slow
def test_microphone_without_the_token_is_refused(mic_server, capsys):
    sd = VirtualSoundDevice(DEVICES, samples=np.zeros(DEVICE_RATE * 30, dtype=np.float32))
    assert client.main(["--mic", "--url", mic_server.url, "--token", "wrong"], audio_backend=sd) == 1
    assert "bearer" in capsys.readouterr().err.lower()
    assert sd.streams[0].closed
