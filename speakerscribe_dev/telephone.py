"""A telephone channel as a call reaches an endpoint: band-limited to 300-3400 Hz, 8 kHz, G.711 mu-law, back at
16 kHz. Zero-phase filtering and centred resampling: the audio is not delayed, so the truth of the input holds."""

from __future__ import annotations

import numpy as np

MU = 255.0
BAND_HZ = (300.0, 3400.0)


def mu_law_encode(x: np.ndarray) -> np.ndarray:
    """Samples in [-1, 1] -> 8-bit codes 0..255 (continuous mu-law companding, mu = 255, uniform 8-bit steps)."""
    x = np.clip(np.asarray(x, dtype=np.float64), -1.0, 1.0)
    y = np.sign(x) * np.log1p(MU * np.abs(x)) / np.log1p(MU)
    return np.round((y + 1.0) * 127.5).astype(np.uint8)


def mu_law_decode(codes: np.ndarray) -> np.ndarray:
    """8-bit codes -> samples in [-1, 1] (the inverse companding of :func:`mu_law_encode`)."""
    y = codes.astype(np.float64) / 127.5 - 1.0
    return (np.sign(y) * np.expm1(np.abs(y) * np.log1p(MU)) / MU).astype(np.float32)


def telephone(samples: np.ndarray, rate: int = 16_000) -> np.ndarray:
    """``rate`` Hz float samples -> the same duration at ``rate`` Hz after the telephone channel."""
    from scipy.signal import butter, resample_poly, sosfiltfilt

    if rate % 8000:
        raise ValueError(f"telephone(): the input rate must be a multiple of 8000 Hz, got {rate}")
    sos = butter(6, BAND_HZ, btype="bandpass", fs=rate, output="sos")
    band = sosfiltfilt(sos, np.asarray(samples, dtype=np.float64))
    narrow = resample_poly(band, 1, rate // 8000)
    decoded = mu_law_decode(mu_law_encode(narrow))
    wide = resample_poly(decoded.astype(np.float64), rate // 8000, 1)[: len(samples)]
    out = np.zeros(len(samples), dtype=np.float32)
    out[: len(wide)] = wide
    return out
