"""Encode test signals into real containers with PyAV's bundled encoders (no system ffmpeg needed)."""

from __future__ import annotations

import io

import numpy as np

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


def encode(channels: np.ndarray, container: str, codec: str, rate: int) -> bytes:
    """channels: (n_channels, samples) float32 in [-1, 1] at ``rate``."""
    import av

    layout = {1: "mono", 2: "stereo"}[channels.shape[0]]
    buf = io.BytesIO()
    with av.open(buf, "w", format=container) as out:
        stream = out.add_stream(codec, rate=rate, layout=layout)
        for i in range(0, channels.shape[1], 1024):
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(channels[:, i : i + 1024]), format="fltp", layout=layout
            )
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


def wav_bytes(samples: np.ndarray, rate: int = 16000) -> bytes:
    return encode(samples[None, :].astype(np.float32), "wav", "pcm_s16le", rate)


def dominant_frequency(samples: np.ndarray, rate: int) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return float(np.fft.rfftfreq(len(samples), 1 / rate)[int(np.argmax(spectrum))])
