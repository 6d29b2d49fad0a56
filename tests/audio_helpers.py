"""Test signals, and real audio files of them (``encode``: the dev tooling's encoder, PyAV's bundled encoders)."""

from __future__ import annotations

import numpy as np

from speakerscribe_dev.hostile import encode

__all__ = ["FORMATS", "dominant_frequency", "encode", "tone", "wav_bytes"]

# (container format, codec, sample rate) for each format the service accepts
FORMATS = {
    "wav": ("wav", "pcm_s16le", 44100),
    "flac": ("flac", "flac", 48000),
    "mp3": ("mp3", "libmp3lame", 44100),
    "ogg-opus": ("ogg", "libopus", 48000),
    "m4a-aac": ("ipod", "aac", 44100),
    "webm-opus": ("webm", "libopus", 48000),
    "mp4-aac": ("mp4", "aac", 22050),
}


def tone(freq: float, seconds: float, rate: int, amplitude: float = 0.5) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (amplitude * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def wav_bytes(samples: np.ndarray, rate: int = 16000) -> bytes:
    return encode(samples[None, :].astype(np.float32), "wav", "pcm_s16le", rate)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])
