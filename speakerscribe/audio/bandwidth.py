"""Is this a telephone channel? The share of the signal's power above 4 kHz (a narrowband call, sampled at 8 kHz,
has none, whatever rate it reaches us at)."""

from __future__ import annotations

import numpy as np

FRAME = 512  # samples per spectrum (32 ms at 16 kHz)
MAX_FRAMES = 2000  # at most this many frames, evenly spread over the audio: bounded time on any length
CUTOFF_HZ = 4000.0  # the Nyquist frequency of 8 kHz telephone audio
# below this share of power above the cutoff, the audio went through a narrowband channel: calls made telephone-like
# (300-3400 Hz, 8 kHz, G.711) hold 2e-6 to 1e-5 of their power there, the AMI excerpts (far-field meeting
# microphones) 3e-4 to 1.5e-2, the real-voice conversations at meeting quality 1.3e-3 to 0.18
NARROWBAND_SHARE = 5e-5


def high_band_share(samples: np.ndarray, sample_rate: int) -> float:
    """Share of the power above :data:`CUTOFF_HZ` (0 for audio too short for one frame or silent)."""
    if sample_rate <= 2 * CUTOFF_HZ or samples.size < FRAME:
        return 0.0
    count = samples.size // FRAME
    starts = np.linspace(0, (count - 1) * FRAME, min(count, MAX_FRAMES)).astype(np.int64)
    frames = samples[starts[:, None] + np.arange(FRAME)].astype(np.float64)
    power = np.abs(np.fft.rfft(frames * np.hanning(FRAME), axis=1)) ** 2
    high = np.fft.rfftfreq(FRAME, 1.0 / sample_rate) > CUTOFF_HZ
    total = power.sum()
    return float(power[:, high].sum() / total) if total > 0 else 0.0


def is_narrowband(samples: np.ndarray, sample_rate: int) -> bool:
    """True when the audio carries (almost) nothing above 4 kHz: a telephone call or other 8 kHz channel. Audio
    sampled at 8 kHz or less is narrowband by definition; silence is not."""
    if sample_rate <= 2 * CUTOFF_HZ:
        return True
    return 0.0 < high_band_share(samples, sample_rate) < NARROWBAND_SHARE  # 0.0: too short, silent or undefined
