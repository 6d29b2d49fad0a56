"""Audio in, once, at the edge: request ``inputs`` -> float32 mono 16 kHz :class:`~speakerscribe.records.Waveform`.

Every byte comes from a stranger, so decoding is safe by construction:

* The container is recognised from its first bytes by our own allow-list (WAV/RF64, FLAC, MP3, Ogg, MP4/M4A,
  WebM/Matroska, AIFF, ADTS AAC, AMR, CAF, AU) and FFmpeg is *told* which demuxer to use. FFmpeg's own probing never
  runs, so playlist and script formats that open files or sockets (concat, hls, sdp, image2, subfile, tee, ...) can
  never be chosen, and the only I/O is the in-memory buffer. Stream probing is bounded (``probesize``).
* Only audio codecs on an allow-list are decoded; the file's sample rate must lie in [4 kHz, 384 kHz] and it may
  have at most 32 channels.
* Decoding is streamed: each frame is averaged to mono (a plain mean, so identical channels keep their level) and
  resampled to 16 kHz with soxr as it arrives, and the duration is counted on the way; decoding stops with
  :class:`~speakerscribe.errors.AudioTooLongError` as soon as it passes the deployment's limit. Peak memory of
  decoding is the request body plus one buffer of the decoded 16 kHz float32 audio (64 KB per audio second).
* A packet that fails to decode is skipped and counted; a file that ends early is noticed against the duration it
  declares. Either becomes a warning in the response; when errors cost most of the declared audio it is a 400.

PyAV's wheels carry their own FFmpeg libraries (no system binary). The same array feeds Whisper and pyannote.
"""

from __future__ import annotations

import base64
import binascii
import io
import itertools
import math
import re
from typing import Any

import numpy as np

from ..errors import AudioTooLongError, InputError
from ..records import SAMPLE_RATE, DecodedAudio, Waveform

ACCEPTED_FORMATS = (
    "wav, flac, mp3, ogg (vorbis, opus, flac), m4a/mp4 (aac, alac), webm/mkv, aiff, aac (adts), amr, caf, au"
)
ACCEPTED_INPUTS = (
    "`inputs` must be the audio file's bytes, the same bytes base64-encoded as a string, or a list of "
    "mono samples (numbers in [-1, 1]) at `sampling_rate`"
)
MIN_FILE_RATE = 4000
MAX_FILE_RATE = 384000
MAX_CHANNELS = 32
PROBE_BYTES = 1 << 20  # how much of the body FFmpeg may read to find the stream parameters
EMPTY_FILE_BYTES = 2048  # a file this small may hold no samples (an empty WAV is 44 bytes); a larger one must
LOST_FRACTION_IS_ERROR = 0.5  # decode errors that cost more than this share of the declared duration -> 400
FIRST_BUFFER_S = 60  # the decode buffer's least size
LARGEST_FIRST_BUFFER_S = 6 * 3600  # and its largest first size, whatever a header claims (it grows beyond)
CHECKPOINT_PACKETS = 256  # decoding calls the caller's checkpoint this often (cancellation)

# decoders we run on strangers' bytes: the common speech and music codecs, nothing else
_CODECS = {
    "flac", "mp3", "mp3float", "mp2", "mp2float", "vorbis", "libvorbis", "opus", "libopus", "aac", "aac_fixed",
    "alac", "amrnb", "amrwb", "amr_nb", "amr_wb", "gsm", "gsm_ms", "wavpack",
}  # fmt: skip
_CODEC_PREFIXES = ("pcm_", "adpcm_")

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


def sniff_container(data: bytes) -> str | None:
    """The FFmpeg demuxer for ``data``, from its first bytes and our allow-list; None when it is none of them."""
    head = data[:16]
    if len(head) < 4:
        return None
    tag = head[:4]
    if tag in (b"RIFF", b"RIFX", b"RF64") and head[8:12] == b"WAVE":
        return "wav"
    if tag == b"fLaC":
        return "flac"
    if tag == b"OggS":
        return "ogg"
    if tag == b"\x1a\x45\xdf\xa3":
        return "matroska"
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide", b"skip"):
        return "mov"
    if tag == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
        return "aiff"
    if tag == b"caff":
        return "caf"
    if tag == b".snd":
        return "au"
    if head.startswith(b"#!AMR"):
        return "amr"
    if head.startswith(b"ID3"):
        return "mp3"
    if head[0] == 0xFF and head[1] & 0xE0 == 0xE0:  # a frame sync: MPEG audio, or ADTS AAC when the layer is 0
        return "aac" if head[1] & 0x06 == 0 else "mp3"
    return None


def _codec_allowed(name: str) -> bool:
    return name in _CODECS or name.startswith(_CODEC_PREFIXES)


class _MonoResampler:
    """Frames of any layout and rate -> float32 mono 16 kHz, streamed into one growing buffer.

    The buffer is allocated for the duration the file declares (at least ``FIRST_BUFFER_S``, at most the limit):
    pages the audio never reaches are never touched, so they cost address space, not memory. It grows by doubling
    when a file holds more than it declared.
    """

    def __init__(self, limit_samples: float, expected_samples: int):
        self.limit = limit_samples
        self.rate = 0
        self._stream = None
        self.produced = 0
        capacity = max(expected_samples + SAMPLE_RATE, FIRST_BUFFER_S * SAMPLE_RATE)
        capacity = min(capacity, limit_samples + SAMPLE_RATE, LARGEST_FIRST_BUFFER_S * SAMPLE_RATE)
        self._buffer = np.empty(int(capacity), dtype=np.float32)

    def feed(self, planar: np.ndarray, rate: int) -> None:
        if rate != self.rate:
            self.flush()
            self.rate = rate
            self._stream = None if rate == SAMPLE_RATE else soxr_stream(rate)
        mono = _downmix(planar)
        self._add(mono if self._stream is None else self._stream.resample_chunk(mono))

    def flush(self) -> None:
        if self._stream is not None:
            self._add(self._stream.resample_chunk(np.zeros(0, dtype=np.float32), last=True))
            self._stream = None

    def _add(self, samples: np.ndarray) -> None:
        if not samples.size:
            return
        end = self.produced + samples.size
        if end > self.limit:
            raise AudioTooLongError(
                f"the audio is longer than {self.limit / SAMPLE_RATE:.0f} s, the longest this deployment accepts "
                "(MAX_AUDIO_SECONDS); decoding stopped there. Send a shorter file or split it"
            )
        if end > self._buffer.size:
            grown = np.empty(int(min(max(end, 2 * self._buffer.size), self.limit + SAMPLE_RATE)), dtype=np.float32)
            grown[: self.produced] = self._buffer[: self.produced]
            self._buffer = grown
        self._buffer[self.produced : end] = samples
        self.produced = end

    def samples(self) -> np.ndarray:
        out = self._buffer[: self.produced]
        for a in range(0, out.size, 1 << 20):  # in place and in blocks: no whole-length temporaries
            np.nan_to_num(out[a : a + (1 << 20)], copy=False, nan=0.0, posinf=1.0, neginf=-1.0)
        return out


def soxr_stream(rate: int):
    """A streaming soxr resampler from ``rate`` to 16 kHz, mono float32, high quality (keeps its filter state
    across pieces)."""
    import soxr

    return soxr.ResampleStream(rate, SAMPLE_RATE, 1, dtype="float32", quality="HQ")


def resample(samples: np.ndarray, orig_sr: int, target_sr: int = SAMPLE_RATE) -> np.ndarray:
    """Resample a 1-D float array with soxr (high quality); returns float32."""
    samples = np.asarray(samples, dtype=np.float32)
    if orig_sr == target_sr or samples.size == 0:
        return samples
    import soxr

    return np.asarray(soxr.resample(samples, orig_sr, target_sr, quality="HQ"), dtype=np.float32)


def decode_audio(data: bytes, max_seconds: float = math.inf, checkpoint=None) -> DecodedAudio:
    """Decode an audio file to 16 kHz mono, stopping past ``max_seconds`` (see the module docstring).

    ``checkpoint()``, if given, is called every ``CHECKPOINT_PACKETS`` packets and may raise to stop decoding (a
    request's deadline, its client gone)."""
    import av

    if not data:
        raise InputError(f"the audio is empty (zero bytes). Accepted formats: {ACCEPTED_FORMATS}.")
    demuxer = sniff_container(data)
    if demuxer is None:
        raise InputError(
            f"could not decode the audio: it is not a file of a supported format (its first bytes are {data[:8]!r}). "
            f"Accepted formats: {ACCEPTED_FORMATS}."
        )
    try:
        container = av.open(
            io.BytesIO(data),
            mode="r",
            format=demuxer,
            options={"probesize": str(PROBE_BYTES), "analyzeduration": "5000000"},
            metadata_errors="ignore",
        )
    except (av.FFmpegError, ValueError, OSError, UnicodeError) as exc:
        raise InputError(
            f"could not read the {demuxer} container ({len(data)} bytes): {_describe(exc)}. "
            f"Accepted formats: {ACCEPTED_FORMATS}."
        ) from None
    with container:
        return _decode_stream(container, demuxer, max_seconds, len(data), checkpoint)


def _decode_stream(container, demuxer: str, max_seconds: float, len_data: int, checkpoint) -> DecodedAudio:
    import av

    if not container.streams.audio:
        raise InputError(f"the {demuxer} file has no audio stream. Accepted formats: {ACCEPTED_FORMATS}.")
    stream = container.streams.audio[0]
    if stream.codec_context is None:
        raise InputError(f"the {demuxer} file's audio stream has no decoder. Accepted formats: {ACCEPTED_FORMATS}.")
    codec = stream.codec_context.name or "unknown"
    if not _codec_allowed(codec):
        raise InputError(f"the audio codec {codec!r} is not accepted. Accepted formats: {ACCEPTED_FORMATS}.")
    _check_layout(stream.codec_context.sample_rate, stream.codec_context.channels)
    declared, estimate = _declared_seconds(container, stream)
    expected = int(min(estimate or 0.0, max_seconds) * SAMPLE_RATE)
    out = _MonoResampler(max_seconds * SAMPLE_RATE, expected)
    to_float, to_float_for = None, None  # to planar float, made for the (format, rate, layout) it converts
    bad_packets, stopped, native_rate = 0, None, 0
    packets = container.demux(stream)
    for count in itertools.count(1):
        if checkpoint is not None and count % CHECKPOINT_PACKETS == 0:
            checkpoint()
        try:
            packet = next(packets)
        except StopIteration:
            break
        except (av.FFmpegError, ValueError, OSError) as exc:
            stopped = _describe(exc)
            break
        try:
            frames = packet.decode()
        except (av.FFmpegError, ValueError) as exc:
            bad_packets += 1
            if bad_packets > 1000 and out.produced == 0:
                raise InputError(
                    f"could not decode the {codec} audio: {_describe(exc)}. Accepted formats: {ACCEPTED_FORMATS}."
                ) from None
            continue
        for frame in frames:
            _check_layout(frame.sample_rate, len(frame.layout.channels))
            native_rate = native_rate or frame.sample_rate
            shape = (frame.format.name, frame.sample_rate, frame.layout.name)
            if shape != to_float_for:  # first frame, or the stream changed format, rate or layout mid-file
                to_float, to_float_for = av.AudioResampler(format="fltp"), shape
            for converted in to_float.resample(frame):
                out.feed(converted.to_ndarray(), converted.sample_rate)
    out.flush()
    samples = out.samples()
    decoded = samples.size / SAMPLE_RATE
    if samples.size == 0 and (declared or bad_packets or stopped or len_data > EMPTY_FILE_BYTES):
        raise InputError(
            f"no audio could be decoded from the {len_data}-byte {demuxer} file ({codec}). "
            f"Accepted formats: {ACCEPTED_FORMATS}."
        )
    warnings = _decode_warnings(decoded, declared, bad_packets, stopped, codec)
    return DecodedAudio(Waveform(samples), native_rate or stream.codec_context.sample_rate or SAMPLE_RATE, warnings)


def _check_layout(rate: int | None, channels: int | None) -> None:
    if rate and not MIN_FILE_RATE <= rate <= MAX_FILE_RATE:
        raise InputError(
            f"the file's sample rate is {rate} Hz; accepted rates are {MIN_FILE_RATE} to {MAX_FILE_RATE} Hz"
        )
    if channels and channels > MAX_CHANNELS:
        raise InputError(f"the file has {channels} channels; at most {MAX_CHANNELS} are accepted")


def _declared_seconds(container, stream) -> tuple[float | None, float | None]:
    """(the duration the stream's header states, or None; that or FFmpeg's estimate from the bitrate, or None).

    Only a stated duration judges a decode (warnings, refusals): an estimate (MP3 without a VBR header, ADTS AAC)
    can be far off. The estimate only sizes the decode buffer."""
    if stream.duration is not None and stream.time_base is not None:
        stated = float(stream.duration * stream.time_base)
        return stated, stated
    if container.duration is not None and container.duration > 0:
        return None, container.duration / 1_000_000
    return None, None


def _decode_warnings(
    decoded: float, declared: float | None, bad_packets: int, stopped: str | None, codec: str
) -> tuple[str, ...]:
    """Decode trouble -> warnings, or InputError when errors lost most of the audio."""
    short = declared is not None and decoded < declared - max(0.5, 0.02 * declared)
    errors = bad_packets > 0 or stopped is not None
    if not errors and not short:
        return ()
    if errors and declared and decoded < (1 - LOST_FRACTION_IS_ERROR) * declared:
        raise InputError(
            f"the file is corrupt: only {decoded:.1f} s of the {declared:.1f} s it declares could be decoded "
            f"({bad_packets} bad packet(s){'; ' + stopped if stopped else ''}). Accepted formats: {ACCEPTED_FORMATS}."
        )
    parts = []
    if bad_packets:
        parts.append(f"{bad_packets} corrupt {codec} packet(s) were skipped")
    if stopped:
        parts.append(f"reading stopped early ({stopped})")
    if short:
        parts.append(f"{decoded:.1f} s of the {declared:.1f} s the file declares were decoded")
    return ("the audio could not be decoded completely: " + "; ".join(parts) + ". The transcript covers what decoded",)


def _downmix(planar: np.ndarray) -> np.ndarray:
    """(channels, samples) planar float -> (samples,) mean of the channels."""
    return (planar.mean(axis=0) if planar.shape[0] > 1 else planar[0]).astype(np.float32, copy=False)


def waveform_from_samples(values: Any, sampling_rate: int, max_seconds: float = math.inf) -> Waveform:
    """A list/array of mono samples at ``sampling_rate`` -> 16 kHz waveform (length checked before resampling)."""
    if not isinstance(sampling_rate, int) or not 1000 <= sampling_rate <= MAX_FILE_RATE:
        raise InputError(f"`sampling_rate` must be an integer from 1000 to {MAX_FILE_RATE} Hz")
    count = values.size if isinstance(values, np.ndarray) else len(values)
    if count / sampling_rate > max_seconds:
        raise AudioTooLongError(
            f"the sample list is {count / sampling_rate:.0f} s long; this deployment accepts up to "
            f"{max_seconds:.0f} s (MAX_AUDIO_SECONDS)"
        )
    try:
        with np.errstate(over="ignore"):  # out-of-range numbers become inf and are refused below
            arr = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"`inputs` is a list but not a list of numbers. {ACCEPTED_INPUTS}.") from None
    if arr.ndim != 1:
        raise InputError(f"`inputs` sample list must be one-dimensional (mono); got shape {arr.shape}.")
    if arr.size == 0:
        raise InputError(f"`inputs` is an empty sample list: no audio was sent. {ACCEPTED_INPUTS}.")
    if not np.all(np.isfinite(arr)):
        raise InputError("`inputs` sample list contains NaN or infinite values.")
    return Waveform(resample(arr, sampling_rate))


def load_inputs(
    inputs: Any, sampling_rate: int = SAMPLE_RATE, max_seconds: float = math.inf, checkpoint=None
) -> DecodedAudio:
    """Any accepted ``inputs`` value -> the decoded audio (16 kHz waveform, the input's own rate, warnings)."""
    if isinstance(inputs, (list, tuple, np.ndarray)):
        return DecodedAudio(waveform_from_samples(inputs, sampling_rate, max_seconds), sampling_rate)
    if isinstance(inputs, dict):
        raise InputError(
            "`inputs` is an object; send the audio file base64-encoded as a string, or a list of samples with "
            "`parameters.sampling_rate`."
        )
    return decode_audio(audio_bytes_from_inputs(inputs), max_seconds, checkpoint)


def load_reference(name: str, clip: str | bytes, max_seconds: float, checkpoint=None) -> DecodedAudio:
    """A known speaker's reference clip (audio bytes, base64 or a data: URL) decoded as the main audio is, with the
    same allow-lists; every error names the speaker and the clip."""
    where = f"known speaker {name[:80]!r}: the reference clip"
    try:
        return decode_audio(audio_bytes_from_inputs(clip), max_seconds, checkpoint)
    except AudioTooLongError:
        raise InputError(
            f"{where} is longer than {max_seconds:.0f} s; send 2-30 s of that person speaking alone"
        ) from None
    except InputError as exc:
        raise InputError(f"{where}: {str(exc).replace('`inputs`', 'it')}") from None


def _describe(exc: Exception) -> str:
    text = str(exc).strip() or type(exc).__name__
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", text)
    return re.sub(r"\s*:\s*.<none>.$", "", text)[:200]
