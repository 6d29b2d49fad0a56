"""Telephone-channel detection (speakerscribe.audio.bandwidth), which switches the cannot-link clustering's wider
gate on (issue 26): synthetic signals for the rule, then every real recording the set-up prepares."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.audio.bandwidth import FRAME, NARROWBAND_SHARE, high_band_share, is_narrowband
from speakerscribe_dev.telephone import telephone

RATE = 16_000


def _noise(seconds=3.0, seed=0):
    return (0.1 * np.random.default_rng(seed).normal(size=int(seconds * RATE))).astype(np.float32)


def test_wideband_noise_is_wideband_and_the_same_through_a_telephone_line_is_not():
    wide = _noise()
    assert high_band_share(wide, RATE) > 0.3  # white noise: half its power is above 4 kHz
    assert not is_narrowband(wide, RATE)
    call = telephone(wide, RATE)
    assert high_band_share(call, RATE) < NARROWBAND_SHARE
    assert is_narrowband(call, RATE)


def test_audio_at_8_khz_or_less_is_narrowband_silence_and_scraps_are_not():
    assert is_narrowband(_noise()[:8000], 8000)
    assert not is_narrowband(np.zeros(RATE, dtype=np.float32), RATE)  # silence says nothing about the channel
    assert not is_narrowband(_noise()[: FRAME - 1], RATE)  # shorter than one spectrum
    assert not is_narrowband(np.array([], dtype=np.float32), RATE)
    nan = _noise()
    nan[100] = np.nan
    assert not is_narrowband(nan, RATE)  # an undefined share never claims a telephone line


def test_long_audio_is_sampled_not_read_whole(monkeypatch):
    """Time and memory are bounded: an hour costs the same spectra as a minute (MAX_FRAMES at most)."""
    from speakerscribe.audio import bandwidth

    shapes = []
    rfft = np.fft.rfft

    def counting(frames, *args, **kwargs):
        shapes.append(frames.shape)
        return rfft(frames, *args, **kwargs)

    monkeypatch.setattr(bandwidth.np.fft, "rfft", counting)
    hour = np.tile(_noise(60.0), 60)
    assert not is_narrowband(hour, RATE)
    assert shapes == [(bandwidth.MAX_FRAMES, FRAME)]


@pytest.mark.slow
def test_every_prepared_recording_is_classified_by_its_channel():
    """The real-voice conversations at both qualities and the AMI excerpts (far-field meeting microphones, the
    quietest highs of any recording here): telephone quality is narrowband, everything else is not."""
    import soundfile as sf
    from conftest import REPO

    from speakerscribe_dev import ami, real_voices

    folder = real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")
    seen = {"meeting": 0, "telephone": 0, "ami": 0}
    for conv in real_voices.load(folder):
        samples, rate = sf.read(conv.wav, dtype="float32")
        assert is_narrowband(samples, rate) == (conv.quality == "telephone"), conv.uri
        seen[conv.quality] += 1
    for rec in ami.load(ami.prepare(REPO / "data" / "ami"), ("train", "development", "test")):
        samples, rate = sf.read(rec.wav, dtype="float32")
        assert not is_narrowband(samples, rate), rec.uri
        seen["ami"] += 1
    assert seen["meeting"] >= 70 and seen["telephone"] >= 70 and seen["ami"] >= 14, seen
