"""Audio in, once: every accepted container decodes to 16 kHz mono, and bad input says what is accepted."""

from __future__ import annotations

import base64

import numpy as np
import pytest
from audio_helpers import FORMATS, dominant_frequency, encode, tone, wav_bytes

from speakerscribe.audio.decode import audio_bytes_from_inputs, decode_audio, load_inputs
from speakerscribe.errors import InputError


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_supported_container_decodes_to_16k_mono(name):
    container, codec, rate = FORMATS[name]
    data = encode(tone(440, 2.0, rate)[None, :], container, codec, rate)
    decoded = decode_audio(data)
    waveform, native = decoded.waveform, decoded.native_rate
    assert decoded.warnings == ()
    assert native == rate
    assert waveform.sample_rate == 16000 and waveform.samples.dtype == np.float32 and waveform.samples.ndim == 1
    assert waveform.duration == pytest.approx(2.0, abs=0.1)  # AAC/MP3/Opus add priming and padding frames
    mid = waveform.samples[4000:28000]
    assert dominant_frequency(mid, 16000) == pytest.approx(440, abs=3)
    assert np.sqrt(np.mean(mid**2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.1)


def test_stereo_is_downmixed_by_averaging_channels():
    rate = 44100
    left = tone(440, 1.0, rate)
    same = decode_audio(encode(np.stack([left, left]), "wav", "pcm_s16le", rate)).waveform
    assert np.sqrt(np.mean(same.samples[2000:14000] ** 2)) == pytest.approx(0.5 / np.sqrt(2), rel=0.02)
    opposite = decode_audio(encode(np.stack([left, -left]), "wav", "pcm_s16le", rate)).waveform
    assert np.abs(opposite.samples).max() < 1e-3
    one_side = decode_audio(encode(np.stack([left, np.zeros_like(left)]), "flac", "flac", rate)).waveform
    assert np.sqrt(np.mean(one_side.samples[2000:14000] ** 2)) == pytest.approx(0.25 / np.sqrt(2), rel=0.02)


def test_resampling_keeps_the_signal():
    decoded = decode_audio(encode(tone(1000, 1.0, 8000)[None, :], "wav", "pcm_s16le", 8000))
    waveform, native = decoded.waveform, decoded.native_rate
    assert native == 8000 and len(waveform.samples) == 16000
    assert dominant_frequency(waveform.samples, 16000) == pytest.approx(1000, abs=2)


def test_raw_bytes_base64_string_base64_bytes_and_data_uri_are_the_same_audio():
    data = wav_bytes(tone(300, 0.5, 16000))
    b64 = base64.b64encode(data)
    forms = [
        data,
        b64.decode(),
        b64,
        "data:audio/wav;base64," + b64.decode(),
        base64.urlsafe_b64encode(data).decode().rstrip("="),
    ]
    decoded = [load_inputs(f).waveform.samples for f in forms]
    for d in decoded[1:]:
        np.testing.assert_array_equal(d, decoded[0])


def test_sample_list_inputs_use_sampling_rate():
    decoded = load_inputs(tone(200, 1.0, 8000).tolist(), 8000)
    w, rate = decoded.waveform, decoded.native_rate
    assert rate == 8000 and len(w.samples) == 16000


@pytest.mark.parametrize(
    "inputs, needle",
    [
        (b"", "empty"),
        ("", "empty"),
        ("this is not base64!", "not valid base64"),
        (base64.b64encode(b"definitely not audio, just text").decode(), "could not decode"),
        (b"\x00\x01\x02garbage" * 10, "could not decode"),
        (None, "missing"),
        (12, "type int"),
        ({"array": [0.1]}, "object"),
        ([], "empty sample list"),
        ([[0.1, 0.2]], "one-dimensional"),
        ([0.1, float("nan")], "NaN"),
        (["a", "b"], "numbers"),
    ],
)
def test_bad_inputs_raise_input_error_naming_what_is_accepted(inputs, needle):
    with pytest.raises(InputError) as err:
        load_inputs(inputs)
    msg = str(err.value)
    assert needle in msg
    assert "accepted" in msg.lower() or "inputs" in msg or "base64" in msg


def test_undecodable_error_lists_accepted_formats():
    with pytest.raises(InputError, match="wav, flac, mp3"):
        decode_audio(b"RIFF\x00\x00\x00\x00WAVEjunkjunk")


def test_truncated_file_keeps_what_decodes():
    data = encode(tone(440, 2.0, 44100)[None, :], "mp3", "libmp3lame", 44100)
    waveform = decode_audio(data[: len(data) // 2]).waveform
    assert 0.5 < waveform.duration < 1.5


def test_container_without_samples_is_empty_audio_not_an_error():
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.zeros(0, dtype=np.float32), 16000, format="WAV", subtype="PCM_16")
    waveform = decode_audio(buf.getvalue()).waveform
    assert waveform.duration == 0


def test_pure_base64_text_bytes_are_decoded_but_real_audio_bytes_are_not():
    data = wav_bytes(tone(300, 0.2, 16000))
    assert audio_bytes_from_inputs(data) == data
    assert audio_bytes_from_inputs(base64.b64encode(data)) == data


def test_corrupt_bytes_mid_file_are_skipped_with_a_warning_not_a_silent_cut():
    data = bytearray(encode(tone(440, 10.0, 44100)[None, :], "mp3", "libmp3lame", 44100))
    middle = len(data) // 5  # 2 s in: before, the decode stopped here and returned 1.96 s without a word
    data[middle : middle + 64] = bytes(range(64))
    decoded = decode_audio(bytes(data))
    assert decoded.waveform.duration > 9.5
    assert decoded.warnings and "could not be decoded completely" in decoded.warnings[0]


def test_a_file_that_loses_most_of_its_audio_to_errors_is_refused():
    data = bytearray(encode(tone(440, 3.0, 48000)[None, :], "flac", "flac", 48000))
    data[64:] = np.random.default_rng(0).integers(0, 256, len(data) - 64, dtype=np.uint8).tobytes()
    with pytest.raises(InputError, match="no audio could be decoded|corrupt"):
        decode_audio(bytes(data))


def test_decoding_stops_at_the_length_limit_without_decoding_the_rest():
    import tracemalloc

    from speakerscribe.errors import AudioTooLongError

    data = encode(np.zeros((1, 48000 * 60), dtype=np.float32), "flac", "flac", 48000)  # 60 s of silence
    tracemalloc.start()
    with pytest.raises(AudioTooLongError, match="MAX_AUDIO_SECONDS"):
        decode_audio(data, max_seconds=5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 16000 * 4 * 20  # well under the 60 s the file holds, at 16 kHz float32
    assert decode_audio(data, max_seconds=61).waveform.duration == pytest.approx(60, abs=0.1)


@pytest.mark.parametrize(
    "rate, channels, needle", [(1, 1, "sample rate is 1 Hz"), (500000, 1, "accepted rates"), (16000, 40, "channels")]
)
def test_header_bombs_are_refused_before_decoding(rate, channels, needle):
    from speakerscribe_dev.hostile import wav_header

    payload = b"\x00" * 200000
    with pytest.raises(InputError, match=needle):
        decode_audio(wav_header(rate, channels, 16, len(payload)) + payload)


def test_sample_lists_are_checked_for_length_before_resampling():
    from speakerscribe.errors import AudioTooLongError

    with pytest.raises(AudioTooLongError, match="MAX_AUDIO_SECONDS"):
        load_inputs([0.0] * 20000, 1000, max_seconds=10)  # 20 s at 1 kHz would become 320000 samples
    with pytest.raises(InputError, match="numbers"):
        load_inputs([0.1, 10**400], 16000)


@pytest.mark.parametrize(
    "body",
    [
        b"ffconcat version 1.0\nfile README.md\n",
        b"v=0\no=- 0 0 IN IP4 127.0.0.1\ns=x\nc=IN IP4 127.0.0.1\nt=0 0\nm=audio 5004 RTP/AVP 0\n",
        b"#EXTM3U\n#EXTINF:10,\nfile:///etc/passwd\n",
    ],
)
def test_playlist_and_script_formats_are_never_opened(body):
    with pytest.raises(InputError, match="not a file of a supported format"):
        decode_audio(body)


def test_decoding_peak_memory_is_about_the_decoded_16k_audio():
    """A 48 kHz stereo file decodes in one pass into the 16 kHz buffer: no copy at the file's own rate, no second
    copy of the result (numpy's allocations are traced)."""
    import tracemalloc

    seconds = 120
    left = tone(440, seconds, 48000)
    data = encode(np.stack([left, left]), "flac", "flac", 48000)
    decoded_bytes = seconds * 16000 * 4
    tracemalloc.start()
    audio = decode_audio(data)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert audio.waveform.duration == pytest.approx(seconds, abs=0.1)
    assert peak < 1.3 * decoded_bytes + 4 * 2**20, peak / decoded_bytes


def test_decoding_stops_at_a_checkpoint_that_raises():
    from speakerscribe.errors import RequestCancelled

    data = encode(tone(440, 30.0, 44100)[None, :], "mp3", "libmp3lame", 44100)
    calls = []

    def checkpoint():
        calls.append(1)
        if len(calls) == 2:
            raise RequestCancelled("deadline")

    with pytest.raises(RequestCancelled):
        decode_audio(data, checkpoint=checkpoint)
    assert len(calls) == 2
