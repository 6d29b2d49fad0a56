"""The microphone as a source of 16 kHz pcm16 blocks, over ``sounddevice`` (PortAudio).

``sounddevice`` is a client-side extra, not a dependency of the endpoint: it is imported only here, when the
microphone is asked for, with an error that says what to install when it (or the PortAudio library) is missing.
The device records at its own default rate; blocks are resampled to 16 kHz with the same streaming soxr resampler
the server uses. The PortAudio callback only copies into a bounded queue (``max_buffer_s`` of audio); when the
network falls behind, newer audio is dropped and counted rather than held without limit.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import SpeakerscribeError

logger = logging.getLogger(__name__)

BLOCK_S = 0.1  # seconds per PortAudio callback and per message


class MicrophoneError(SpeakerscribeError):
    """The microphone cannot be used: the library is missing, there is no such device, or it failed to open."""


@dataclass(frozen=True)
class InputDevice:
    """An audio input device as PortAudio lists it."""

    index: int
    name: str
    channels: int
    rate: int
    default: bool


def load_sounddevice() -> Any:
    """The ``sounddevice`` module, or MicrophoneError saying what to install."""
    try:
        import sounddevice
    except ImportError:
        raise MicrophoneError(
            "the microphone client needs the sounddevice package: pip install sounddevice "
            "(and the PortAudio library: apt-get install libportaudio2)"
        ) from None
    except OSError as exc:  # sounddevice is there but libportaudio is not
        raise MicrophoneError(f"PortAudio is missing ({exc}): apt-get install libportaudio2") from None
    return sounddevice


def input_devices(backend: Any) -> list[InputDevice]:
    """The devices with at least one input channel; ``backend`` is sounddevice (or a stand-in with
    ``query_devices()`` and ``default.device``)."""
    try:
        listed = backend.query_devices()
        default = backend.default.device
    except Exception as exc:  # PortAudio fails in many ways (no ALSA, no server): all mean "no devices"
        raise MicrophoneError(f"could not list the audio devices: {exc}") from None
    default_in = default[0] if isinstance(default, (list, tuple)) else default
    return [
        InputDevice(i, str(d["name"]), int(d["max_input_channels"]), int(d["default_samplerate"]), i == default_in)
        for i, d in enumerate(listed)
        if d["max_input_channels"] > 0
    ]


def describe_devices(devices: list[InputDevice]) -> str:
    """One line per input device: index, name, channels, rate; ``*`` marks the default."""
    return "\n".join(
        f"{'*' if d.default else ' '} {d.index:3d}  {d.name}  ({d.channels} ch, {d.rate} Hz)" for d in devices
    )


def choose_device(devices: list[InputDevice], wanted: str | None) -> InputDevice:
    """The device ``wanted`` names (an index, or a part of a name), else the default input, else the first."""
    if not devices:
        raise MicrophoneError(
            "no audio input device found (PortAudio lists none): connect a microphone, or check that this user "
            "may use the sound card"
        )
    listing = "input devices:\n" + describe_devices(devices)
    if wanted is None:
        return next((d for d in devices if d.default), devices[0])
    wanted = wanted.strip()
    if wanted.lstrip("-").isdigit():
        found = [d for d in devices if d.index == int(wanted)]
    else:
        found = [d for d in devices if wanted.lower() in d.name.lower()]
    if len(found) != 1:
        what = "matches several" if found else "is not an input device"
        raise MicrophoneError(f"--device {wanted[:60]!r} {what}; give an index from the list.\n{listing}")
    return found[0]


class MicSource:
    """Iterable of 16 kHz pcm16 blocks recorded from ``device`` until ``stop`` is set; a context manager opens and
    closes the input stream. What was recorded before ``stop`` is still sent."""

    def __init__(self, backend: Any, device: InputDevice, stop: threading.Event, max_buffer_s: float = 10.0):
        from ..audio.decode import soxr_stream
        from ..records import SAMPLE_RATE

        self.backend, self.device, self.stop = backend, device, stop
        self.rate = device.rate
        self.resample = None if device.rate == SAMPLE_RATE else soxr_stream(device.rate)
        self.blocks: queue.Queue[np.ndarray] = queue.Queue(maxsize=max(1, int(max_buffer_s / BLOCK_S)))
        self.dropped = 0  # samples dropped at the device rate
        self.stream: Any = None

    @property
    def dropped_seconds(self) -> float:
        return self.dropped / self.rate

    def _callback(self, indata, frames, time_info, status) -> None:
        # PortAudio's thread: copy and go, never block
        try:
            self.blocks.put_nowait(np.array(indata[:, 0], dtype=np.float32))
        except queue.Full:
            self.dropped += frames

    def __enter__(self) -> MicSource:
        try:
            self.stream = self.backend.InputStream(
                device=self.device.index,
                channels=1,
                samplerate=self.rate,
                dtype="float32",
                blocksize=int(self.rate * BLOCK_S),
                callback=self._callback,
            )
            self.stream.start()
        except Exception as exc:  # PortAudioError and friends: the device cannot record as asked
            where = f"input device {self.device.index} ({self.device.name})"
            raise MicrophoneError(f"could not open {where}: {exc}") from None
        logger.info("recording from %s at %d Hz", self.device.name, self.rate)
        return self

    def __exit__(self, *exc_info) -> None:
        if self.stream is not None:
            self.stream.stop()
            self.stream.close()
            self.stream = None

    def _pcm16(self, samples: np.ndarray, last: bool = False) -> bytes:
        if self.resample is not None:
            samples = np.asarray(self.resample.resample_chunk(samples, last=last), dtype=np.float32)
        return (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()

    def __iter__(self) -> Iterator[bytes]:
        while not self.stop.is_set():
            try:
                yield self._pcm16(self.blocks.get(timeout=0.2))
            except queue.Empty:
                continue
        while True:  # what was recorded before the stop
            try:
                yield self._pcm16(self.blocks.get_nowait())
            except queue.Empty:
                break
        tail = self._pcm16(np.zeros(0, dtype=np.float32), last=True)
        if tail:
            yield tail
