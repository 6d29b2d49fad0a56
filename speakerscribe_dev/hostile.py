"""Hostile request bodies, generated (nothing stored): what an attacker sends to an audio endpoint.

Used by the hostile-input test suite (every case must be answered 4xx within seconds, the server healthy after it)
and by ``benchmarks/hostile_cases.py`` (status and time of each case, old code against new). Categories:

* ``demuxer`` - playlists and scripts that make FFmpeg open files or sockets when it picks the demuxer from the
  bytes (ffconcat, SDP, HLS, DASH, ffmetadata), and other non-audio files (images, documents, executables);
* ``polyglot`` - an audio magic number followed by something else;
* ``truncated`` / ``corrupt`` - real files of every supported format cut inside their headers, or with their
  packets overwritten;
* ``bomb`` - headers declaring absurd sample rates or channel counts;
* ``parameters`` - out-of-range, oversized and malformed parameters with a valid clip;
* ``encoding`` - bodies that are not what their Content-Type says, or malformed JSON, base64 and multipart.
"""

from __future__ import annotations

import base64
import io
import json
import struct
from dataclasses import dataclass, field

import numpy as np

RATE = 16000

# (container, codec, rate) for every format the service accepts
FORMATS = {
    "wav": ("wav", "pcm_s16le", 44100),
    "flac": ("flac", "flac", 48000),
    "mp3": ("mp3", "libmp3lame", 44100),
    "ogg-opus": ("ogg", "libopus", 48000),
    "m4a-aac": ("ipod", "aac", 44100),
    "webm-opus": ("webm", "libopus", 48000),
    "aiff": ("aiff", "pcm_s16be", 22050),
    "au": ("au", "pcm_s16be", 8000),
}


@dataclass(frozen=True)
class HostileCase:
    name: str
    category: str
    body: bytes
    content_type: str = "audio/wav"
    route: str = "/predict"
    query: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    may_decode: bool = False  # the bytes are valid audio after all (PCM noise, silent AMR frames): 200 is right too


def tone(seconds: float, rate: int, freq: float = 220.0) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    return (0.4 * np.sin(2 * np.pi * freq * t) * (np.sin(2 * np.pi * 2 * t) > -0.3)).astype(np.float32)


def encode(samples: np.ndarray, container: str, codec: str, rate: int) -> bytes:
    """float32 samples in [-1, 1] at ``rate`` -> a file, with PyAV's bundled encoders (no system ffmpeg needed).
    ``samples``: (samples,) for mono, or (channels, samples) with one or two channels."""
    import av

    channels = samples[None, :] if samples.ndim == 1 else samples
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


def wav_header(rate: int, channels: int, bits: int, data_bytes: int) -> bytes:
    """A canonical 44-byte PCM WAV header with whatever values it is given."""
    block = max(1, channels * bits // 8)
    fmt = struct.pack("<HHIIHH", 1, channels, rate, (rate * block) & 0xFFFFFFFF, block & 0xFFFF, bits)
    return (
        b"RIFF"
        + struct.pack("<I", (36 + data_bytes) & 0xFFFFFFFF)
        + b"WAVEfmt "
        + struct.pack("<I", 16)
        + fmt
        + b"data"
        + struct.pack("<I", data_bytes & 0xFFFFFFFF)
    )


def _demuxer_tricks(existing_file: str) -> list[HostileCase]:
    texts = {
        "ffconcat-existing-file": f"ffconcat version 1.0\nfile {existing_file}\n",
        "ffconcat-missing-file": "ffconcat version 1.0\nfile /nonexistent/secret.wav\n",
        "ffconcat-dev-zero": "ffconcat version 1.0\nfile /dev/zero\n",
        "ffconcat-dev-urandom": "ffconcat version 1.0\nfile /dev/urandom\n",
        "ffconcat-proc-environ": "ffconcat version 1.0\nfile /proc/self/environ\n",
        "ffconcat-http": "ffconcat version 1.0\nfile http://127.0.0.1:9/x.wav\n",
        "ffconcat-subfile": "ffconcat version 1.0\nfile 'subfile,,start,0,end,100,,:/etc/passwd'\n",
        "sdp-udp": "v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio 5004 RTP/AVP 0\n",
        "hls-file": "#EXTM3U\n#EXT-X-TARGETDURATION:10\n#EXTINF:10,\nfile:///etc/passwd\n#EXT-X-ENDLIST\n",
        "hls-http": "#EXTM3U\n#EXTINF:10,\nhttp://127.0.0.1:9/seg.ts\n",
        "m3u-concat": "#EXTM3U\n#EXTINF:-1,\nconcat:/etc/passwd|/etc/hostname\n",
        "dash-mpd": '<?xml version="1.0"?><MPD xmlns="urn:mpeg:dash:schema:mpd:2011"><Period><AdaptationSet>'
        "<Representation><BaseURL>file:///etc/passwd</BaseURL></Representation></AdaptationSet></Period></MPD>",
        "ffmetadata": ";FFMETADATA1\ntitle=x\n",
        "srt-subtitles": "1\n00:00:00,000 --> 00:00:01,000\nhello\n",
        "ass-subtitles": "[Script Info]\nScriptType: v4.00+\n",
        "html": "<html><body>not audio</body></html>",
        "shell-script": "#!/bin/sh\ncat /etc/passwd\n",
        "empty-json-like": "{}",
    }
    cases = [HostileCase(f"demuxer/{name}", "demuxer", text.encode()) for name, text in texts.items()]
    binaries = {
        "png": b"\x89PNG\r\n\x1a\n" + b"\x00" * 64,
        "gif": b"GIF89a" + b"\x00" * 64,
        "jpeg": b"\xff\xd8\xff\xe0" + b"\x00" * 64,
        "pdf": b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n" + b"0" * 64,
        "zip": b"PK\x03\x04" + b"\x00" * 64,
        "gzip": b"\x1f\x8b\x08\x00" + b"\x00" * 64,
        "elf": b"\x7fELF\x02\x01\x01" + b"\x00" * 64,
        "mpeg-ts": (b"\x47" + b"\x00" * 187) * 4,
        "one-byte": b"\x00",
        "zeros-64k": b"\x00" * 65536,
        "random-64k": np.random.default_rng(0).integers(0, 256, 65536, dtype=np.uint8).tobytes(),
    }
    cases += [HostileCase(f"demuxer/{name}", "demuxer", body) for name, body in binaries.items()]
    return cases


def _polyglots(concat: bytes) -> list[HostileCase]:
    magics = {
        "riff-wave": b"RIFF\x24\x00\x00\x00WAVE",
        "rf64": b"RF64\xff\xff\xff\xffWAVE",
        "flac": b"fLaC",
        "ogg": b"OggS",
        "id3": b"ID3\x04\x00\x00\x00\x00\x00\x00",
        "mp3-sync": b"\xff\xfb\x90\x64",
        "adts-sync": b"\xff\xf1\x50\x80",
        "ftyp": b"\x00\x00\x00\x18ftypM4A ",
        "ebml": b"\x1a\x45\xdf\xa3",
        "aiff": b"FORM\x00\x00\x00\x10AIFF",
        "caff": b"caff\x00\x01\x00\x00",
        "au": b".snd\x00\x00\x00\x18",
        "amr": b"#!AMR\n",
    }
    cases = []
    for name, magic in magics.items():
        cases.append(HostileCase(f"polyglot/{name}+ffconcat", "polyglot", magic + b"\n" + concat))
        # zero bytes are valid AMR frames (silence)
        cases.append(
            HostileCase(f"polyglot/{name}+zeros", "polyglot", magic + b"\x00" * 4096, may_decode=name == "amr")
        )
    return cases


def _truncated_and_corrupt() -> list[HostileCase]:
    cases = []
    rng = np.random.default_rng(1)
    for name, (container, codec, rate) in FORMATS.items():
        data = encode(tone(3.0, rate), container, codec, rate)
        for cut in (4, 12):
            cases.append(HostileCase(f"truncated/{name}-{cut}-bytes", "truncated", data[:cut]))
        # everything after the first 64 bytes overwritten: the header survives, the audio does not
        noise = rng.integers(0, 256, len(data) - 64, dtype=np.uint8).tobytes()
        pcm = codec.startswith("pcm_")  # random bytes are valid PCM samples (noise)
        cases.append(HostileCase(f"corrupt/{name}-body-random", "corrupt", data[:64] + noise, may_decode=pcm))
        # the magic number kept, the rest of the header destroyed
        cases.append(HostileCase(f"corrupt/{name}-header-zeroed", "corrupt", data[:4] + b"\x00" * 60 + data[64:128]))
    return cases


def _bombs() -> list[HostileCase]:
    payload = b"\x80" * (1 << 20)
    cases = [
        HostileCase("bomb/wav-8bit-1hz", "bomb", wav_header(1, 1, 8, len(payload)) + payload),
        HostileCase("bomb/wav-100hz", "bomb", wav_header(100, 1, 16, len(payload)) + payload),
        HostileCase("bomb/wav-3999hz", "bomb", wav_header(3999, 1, 16, 64000) + payload[:64000]),
        HostileCase("bomb/wav-2ghz", "bomb", wav_header(2_000_000_000, 1, 16, len(payload)) + payload),
        HostileCase("bomb/wav-65535-channels", "bomb", wav_header(16000, 65535, 16, len(payload)) + payload),
        HostileCase("bomb/wav-64-channels", "bomb", wav_header(16000, 64, 16, len(payload)) + payload),
        HostileCase("bomb/wav-0-channels", "bomb", wav_header(16000, 0, 16, 64000) + payload[:64000]),
        HostileCase("bomb/wav-0-bits", "bomb", wav_header(16000, 1, 0, 64000) + payload[:64000]),
    ]
    # FLAC STREAMINFO declaring 1 Hz and 655350 Hz: take a real file and patch the 20-bit rate field
    flac = encode(tone(1.0, 48000), "flac", "flac", 48000)
    for rate in (1, 655350):
        patched = bytearray(flac)
        # STREAMINFO starts at 8; bytes 18..20 hold rate (20 bits), channels-1 (3), bits-1 (5), samples (36)
        bits = int.from_bytes(patched[18:21], "big")
        bits = (rate << 4) | (bits & 0xF)
        patched[18:21] = bits.to_bytes(3, "big")
        # FLAC frames carry their own rate, so the decoder may decode them correctly despite STREAMINFO
        cases.append(HostileCase(f"bomb/flac-{rate}hz", "bomb", bytes(patched), may_decode=True))
    # MP4 with an atom claiming 4 GB, and atoms nested far too deep
    cases.append(
        HostileCase("bomb/mp4-huge-atom", "bomb", b"\x00\x00\x00\x18ftypM4A " + b"\xff\xff\xff\xffmoov" + b"\x00" * 256)
    )
    nest = b""
    for _ in range(2000):
        nest = struct.pack(">I", len(nest) + 8) + b"moov" + nest
    cases.append(HostileCase("bomb/mp4-deep-nesting", "bomb", b"\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00M4A " + nest))
    return cases


def _parameters(clip: bytes) -> list[HostileCase]:
    b64 = base64.b64encode(clip).decode()
    query_cases = {
        "chunk-length-tiny": "chunk_length_s=0.000001&vad_filter=false",
        "chunk-length-zero": "chunk_length_s=0",
        "chunk-length-negative": "chunk_length_s=-1",
        "chunk-length-huge": "chunk_length_s=1e308",
        "chunk-length-nan": "chunk_length_s=nan",
        "batch-size-zero": "batch_size=0",
        "batch-size-5000-digits": "batch_size=" + "9" * 5000,
        "num-speakers-huge": "num_speakers=1000000",
        "temperature-inf": "temperature=inf",
        "language-150k": "language=" + "x" * 150_000,
        "unknown-parameter": "no_such_parameter=1",
        "task-bogus": "task=" + "y" * 5000,
    }
    cases = [
        HostileCase(f"parameters/query-{name}", "parameters", clip, "audio/wav", query=q)
        for name, q in query_cases.items()
    ]

    def j(name: str, payload) -> HostileCase:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return HostileCase(f"parameters/json-{name}", "parameters", body, "application/json")

    cases += [
        j(
            "batch-size-400-digits",
            b'{"inputs": "' + b64.encode() + b'", "parameters": {"batch_size": ' + b"7" * 400 + b"}}",
        ),
        j("language-150k", {"inputs": b64, "parameters": {"language": "x" * 150_000}}),
        j("prompt-1mb", {"inputs": b64, "parameters": {"prompt": "p " * 500_000}}),
        j("parameters-list", {"inputs": b64, "parameters": [1, 2, 3]}),
        j("parameters-string", {"inputs": b64, "parameters": "batch_size=1"}),
        j(
            "parameters-nested",
            b'{"inputs": "' + b64.encode() + b'", "parameters": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        ),
        j("unknown-key-150k", {"inputs": b64, "parameters": {"k" * 150_000: 1}}),
        j("sampling-rate-1", {"inputs": [0.0] * 100, "parameters": {"sampling_rate": 1}}),
        j("sampling-rate-huge", {"inputs": [0.0] * 100, "parameters": {"sampling_rate": 10**12}}),
        j("samples-400-digit-int", b'{"inputs": [0.1, ' + b"9" * 400 + b"]}"),
        j("samples-nested-lists", {"inputs": [[[0.1]]]}),
        j("samples-strings", {"inputs": ["a", "b"]}),
        j("samples-nan", b'{"inputs": [0.1, NaN]}'),
        j("inputs-object", {"inputs": {"array": [0.1]}}),
        j("inputs-number", {"inputs": 12345}),
        j("inputs-null", {"inputs": None}),
        j("no-inputs", {"parameters": {}}),
        j("extra-top-level", {"inputs": b64, "exploit": True}),
        j("num-speakers-negative", {"inputs": b64, "parameters": {"num_speakers": -1}}),
        j("min-above-max", {"inputs": b64, "parameters": {"min_speakers": 5, "max_speakers": 2}}),
        j("return-timestamps-bogus", {"inputs": b64, "parameters": {"return_timestamps": {"a": 1}}}),
        j("temperature-string", {"inputs": b64, "parameters": {"temperature": "hot"}}),
    ]
    return cases


def _encodings(clip: bytes) -> list[HostileCase]:
    b64 = base64.b64encode(clip).decode()
    boundary = "xyzBOUNDARYxyz"

    def multipart(parts: list[tuple[str, bytes, str | None]]) -> bytes:
        out = b""
        for name, value, filename in parts:
            disposition = f'form-data; name="{name}"' + (f'; filename="{filename}"' if filename else "")
            out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n\r\n".encode() + value + b"\r\n"
        return out + f"--{boundary}--\r\n".encode()

    form = f"multipart/form-data; boundary={boundary}"
    openai = "/v1/audio/transcriptions"
    concat = b"ffconcat version 1.0\nfile README.md\n"
    jtype = "application/json"

    def js(obj) -> bytes:
        return json.dumps(obj).encode()

    def raw(name: str, body: bytes, ctype: str = jtype, route: str = "/predict") -> HostileCase:
        return HostileCase(f"encoding/{name}", "encoding", body, ctype, route)

    def part(name: str, parts: list) -> HostileCase:
        return raw(name, multipart(parts), form, openai)

    wav = ("file", clip, "a.wav")
    cases = [
        raw("json-invalid-utf8", b'{"inputs": "\xff\xfe\xfd"}'),
        raw("json-truncated", b'{"inputs": "' + b64[:100].encode()),
        # a UTF-8 byte-order mark before valid JSON is still a valid request
        HostileCase("encoding/json-bom", "encoding", b"\xef\xbb\xbf" + js({"inputs": b64}), jtype, may_decode=True),
        raw("json-deep-array", b"[" * 200_000 + b"]" * 200_000),
        raw("json-deep-object", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
        raw("json-top-level-list", b"[1, 2, 3]"),
        raw("base64-garbage", js({"inputs": "!!!not base64!!!"})),
        raw("base64-of-text", js({"inputs": base64.b64encode(b"hello").decode()})),
        raw("data-uri-garbage", js({"inputs": "data:audio/wav;base64,@@@@"})),
        raw("base64-ffconcat", js({"inputs": base64.b64encode(concat).decode()})),
        raw("text-plain", b"hello", "text/plain"),
        raw("gzip-wav", __import__("gzip").compress(clip), "audio/wav"),
        raw("utf16-audio-header", "RIFF....WAVE".encode("utf-16"), "audio/wav"),
        raw("multipart-no-boundary", b"--x\r\n\r\n", "multipart/form-data", openai),
        raw("multipart-garbage", b"\x00\x01\x02" * 100, form, openai),
        part("multipart-no-file", [("model", b"whisper-1", None)]),
        part("multipart-two-files", [wav, ("file", clip, "b.wav")]),
        part("multipart-many-fields", [(f"f{i}", b"1", None) for i in range(200)] + [wav]),
        part("multipart-ffconcat-file", [("file", concat, "a.wav"), ("model", b"m", None)]),
        part("multipart-bad-format", [wav, ("response_format", b"x" * 10000, None)]),
        part("multipart-unknown-field", [wav, ("k" * 10000, b"1", None)]),
        raw("openai-json-body", js({"file": b64}), jtype, openai),
    ]
    return cases


def hostile_cases(existing_file: str = "README.md") -> list[HostileCase]:
    """Every hostile case, generated deterministically. ``existing_file``: a path the server can read (the
    concat trick's target)."""
    clip = encode(tone(2.0, RATE), "wav", "pcm_s16le", RATE)
    concat = f"ffconcat version 1.0\nfile {existing_file}\n".encode()
    return (
        _demuxer_tricks(existing_file)
        + _polyglots(concat)
        + _truncated_and_corrupt()
        + _bombs()
        + _parameters(clip)
        + _encodings(clip)
    )
