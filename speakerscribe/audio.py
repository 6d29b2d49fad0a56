"""Audio in, once, at the edge: request ``inputs`` -> float32 mono 16 kHz :class:`~speakerscribe.records.Waveform`.

Containers and codecs are decoded with PyAV, whose wheels carry their own FFmpeg libraries (no system binary):
wav, flac, mp3, ogg (vorbis, opus), m4a/mp4 (aac), webm/mkv (opus, vorbis), and anything else that FFmpeg reads.
Channels are averaged (a plain mean, so identical channels keep their level) and the result is resampled with soxr
(via librosa) to 16 kHz. The same array then feeds Whisper and pyannote.
"""

from __future__ import annotations

import base64
import binascii
import io
import re
from typing import Any

import numpy as np

from .errors import InputError
from .records import SAMPLE_RATE, Waveform

ACCEPTED_FORMATS = "wav, flac, mp3, ogg/vorbis, ogg/opus, m4a/aac, webm, and other formats FFmpeg decodes"
ACCEPTED_INPUTS = (
    "`inputs` must be the audio file's bytes, the same bytes base64-encoded as a string, or a list of "
    "mono samples (numbers in [-1, 1]) at `sampling_rate`"
)

_B64_ALPHABET = re.compile(rb"^[A-Za-z0-9+/=_\-\s]+$")
_DATA_URI = re.compile(r"^data:[^,;]*(;[^,;]*)*;base64,", re.IGNORECASE)


def audio_bytes_from_inputs(inputs: Any) -> bytes:
    """Bytes of the audio file from the ``inputs`` field: raw bytes or a base64 string (data URIs too).

    The Endpoints runtime hands a handler raw bytes for ``audio/*`` bodies and a string for JSON bodies, and
    sometimes base64-decodes the string itself, so both forms are accepted; bytes that are pure base64 text are
    decoded too.
    """
    if isinstance(inputs, (bytearray, memoryview)):
        inputs = bytes(inputs)
    if isinstance(inputs, bytes):
        if not inputs:
            raise InputError(f"`inputs` is empty: no audio was sent. {ACCEPTED_INPUTS}.")
        if _B64_ALPHABET.match(inputs[:4096]) and _B64_ALPHABET.match(inputs):
            try:
                return _b64decode(inputs.decode("ascii"))
            except InputError:
                return inputs
        return inputs
    if isinstance(inputs, str):
        return _b64decode(inputs)
    if inputs is None:
        raise InputError(f"`inputs` is missing. {ACCEPTED_INPUTS}.")
    raise InputError(f"`inputs` has type {type(inputs).__name__}. {ACCEPTED_INPUTS}.")


def _b64decode(text: str) -> bytes:
    text = _DATA_URI.sub("", text.strip(), count=1)
    if not text:
        raise InputError(f"`inputs` is an empty string: no audio was sent. {ACCEPTED_INPUTS}.")
    compact = re.sub(r"\s+", "", text)
    try:
        if "-" in compact or "_" in compact:
            data = base64.urlsafe_b64decode(compact + "=" * (-len(compact) % 4))
        else:
            data = base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(
            f"`inputs` is a string but not valid base64 ({exc}). Send the audio file's bytes base64-encoded "
            "(standard or URL-safe alphabet, optionally as a data: URI), or post the raw bytes with an audio/* "
            "Content-Type."
        ) from None
    if not data:
        raise InputError(f"`inputs` decodes to zero bytes: no audio was sent. {ACCEPTED_INPUTS}.")
    return data


def resample(samples: np.ndarray, orig_sr: int, target_sr: int = SAMPLE_RATE) -> np.ndarray:
    """Resample a 1-D float array with soxr (high quality); returns float32."""
    samples = np.asarray(samples, dtype=np.float32)
    if orig_sr == target_sr or samples.size == 0:
        return samples
    import librosa

    return librosa.resample(samples, orig_sr=orig_sr, target_sr=target_sr, res_type="soxr_hq").astype(
        np.float32, copy=False
    )


def decode_audio(data: bytes) -> tuple[Waveform, int]:
    """Decode a whole audio file to 16 kHz mono. Returns the waveform and the file's own sample rate."""
    import av

    if not data:
        raise InputError(f"the audio is empty (zero bytes). Accepted formats: {ACCEPTED_FORMATS}.")
    try:
        container = av.open(io.BytesIO(data), mode="r")
    except (av.FFmpegError, ValueError, OSError) as exc:
        raise InputError(
            f"could not decode the audio ({len(data)} bytes): {_describe(exc)}. Accepted formats: {ACCEPTED_FORMATS}."
        ) from None
    with container:
        if not container.streams.audio:
            raise InputError(
                f"the file has no audio stream ({container.format.name}). Accepted formats: {ACCEPTED_FORMATS}."
            )
        stream = container.streams.audio[0]
        to_float = av.AudioResampler(format="fltp")
        pieces: list[np.ndarray] = []
        native_rate = 0
        try:
            for frame in container.decode(stream):
                native_rate = native_rate or frame.sample_rate
                pieces.extend(_downmix(out.to_ndarray()) for out in to_float.resample(frame))
            pieces.extend(_downmix(out.to_ndarray()) for out in to_float.resample(None))
        except (av.FFmpegError, ValueError) as exc:
            if not pieces:
                raise InputError(
                    f"could not decode the audio stream ({stream.codec_context.name}): {_describe(exc)}. "
                    f"Accepted formats: {ACCEPTED_FORMATS}."
                ) from None
            # A truncated tail: keep what decoded (the usual behaviour of audio players and ffmpeg).
        native_rate = native_rate or stream.rate or SAMPLE_RATE
    mono = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
    mono = np.nan_to_num(mono, nan=0.0, posinf=1.0, neginf=-1.0)
    return Waveform(resample(mono, native_rate)), native_rate


def _downmix(planar: np.ndarray) -> np.ndarray:
    """(channels, samples) planar float -> (samples,) mean of the channels."""
    return (planar.mean(axis=0) if planar.shape[0] > 1 else planar[0]).astype(np.float32, copy=False)


def waveform_from_samples(values: Any, sampling_rate: int) -> Waveform:
    """A list/array of mono samples at ``sampling_rate`` -> 16 kHz waveform."""
    try:
        arr = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise InputError(f"`inputs` is a list but not a list of numbers. {ACCEPTED_INPUTS}.") from None
    if arr.ndim != 1:
        raise InputError(f"`inputs` sample list must be one-dimensional (mono); got shape {arr.shape}.")
    if arr.size == 0:
        raise InputError(f"`inputs` is an empty sample list: no audio was sent. {ACCEPTED_INPUTS}.")
    if not np.all(np.isfinite(arr)):
        raise InputError("`inputs` sample list contains NaN or infinite values.")
    return Waveform(resample(arr, sampling_rate))


def load_inputs(inputs: Any, sampling_rate: int = SAMPLE_RATE) -> tuple[Waveform, int]:
    """Any accepted ``inputs`` value -> (16 kHz waveform, the input's own sample rate)."""
    if isinstance(inputs, (list, tuple, np.ndarray)):
        return waveform_from_samples(inputs, sampling_rate), sampling_rate
    if isinstance(inputs, dict):
        raise InputError(
            "`inputs` is an object; send the audio file base64-encoded as a string, or a list of samples with "
            "`parameters.sampling_rate`."
        )
    return decode_audio(audio_bytes_from_inputs(inputs))


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text)
    return re.sub(r"\s*:\s*.<none>.$", "", text)
