"""Each person's speech cut into tight pieces: turns of 1-8 s and back-channels of 0.3-1 s.

Silero VAD (``speakerscribe.audio.vad``) finds the speech in every raw clip with tight settings (a 60 ms pad, pauses of
0.25 s and more kept apart); speech runs closer than ``JOIN_GAP_S`` form one piece, so a piece's truth is its
whole extent (pauses inside it under 0.4 s count as speech, as in a hand-made RTTM). Runs longer than
``TURN_MAX_S`` are cut at the quietest 32 ms frame between 3 s and 8 s from the start. A run of 0.3-1 s standing
alone is a back-channel. Few people have 5 or more of those (council members speak in long runs); for the others
every other run of 4 s or more also gives its first 0.4-1 s, cut at the quietest frame there, as a back-channel: a
short burst of that person's voice, which is what a diarizer has to hear. Other pieces under 1 s are dropped.

A person's pieces are stored one after the other in ``people/<person>.wav`` (16 kHz PCM16) with their offsets and
origins in ``people.json``; conversations are cut from these pools only.
"""

from __future__ import annotations

import json
import wave
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from speakerscribe_dev.voice_sources import SAMPLE_RATE, Person, RawClip

TURN_MIN_S, TURN_MAX_S = 1.0, 8.0
BACKCHANNEL_MIN_S, BACKCHANNEL_MAX_S = 0.3, 1.0
JOIN_GAP_S = 0.4
SPLIT_SEARCH_FROM_S = 3.0
CARVE_RUNS_FROM_S = 4.0  # every other run at least this long gives its first 0.4-1 s as a back-channel
CARVE_FROM_S = 0.4
MIN_BACKCHANNELS = 5  # people with fewer natural back-channels get carved ones
FRAME = 512  # Silero's 32 ms frame at 16 kHz


@dataclass(frozen=True)
class Piece:
    """``n`` samples from ``offset`` in the person's pool; ``origin`` and ``start`` locate them in the source."""

    kind: str  # "turn" | "backchannel"
    offset: int
    n: int
    origin: str
    start: float


def tight_options():
    from speakerscribe.options import VadOptions

    return VadOptions(threshold=0.5, neg_threshold=0.35, min_speech_s=0.2, min_silence_s=0.25, pad_s=0.06)


def speech_runs(probs: np.ndarray, duration: float) -> list[tuple[float, float]]:
    """Speech runs (seconds) of one clip: tight Silero regions joined across pauses shorter than JOIN_GAP_S."""
    from speakerscribe.audio.vad import speech_regions

    runs: list[list[float]] = []
    for span in speech_regions(probs, duration, tight_options()):
        if runs and span.start - runs[-1][1] < JOIN_GAP_S:
            runs[-1][1] = span.end
        else:
            runs.append([span.start, span.end])
    return [(a, b) for a, b in runs]


def _quietest_cut(samples: np.ndarray, a: int, b: int) -> int:
    """A sample index in [a + 3 s, a + 8 s] at the start of the quietest 32 ms frame there."""
    lo, hi = a + int(SPLIT_SEARCH_FROM_S * SAMPLE_RATE), min(b, a + int(TURN_MAX_S * SAMPLE_RATE)) - FRAME
    frames = np.arange(lo, max(lo, hi) + 1, FRAME // 2)
    energy = [float(np.mean(samples[f : f + FRAME] ** 2)) for f in frames]
    return int(frames[int(np.argmin(energy))])


def cut_run(samples: np.ndarray, a: int, b: int) -> list[tuple[int, int]]:
    """Sample spans of at most TURN_MAX_S covering [a, b)."""
    spans = []
    while b - a > TURN_MAX_S * SAMPLE_RATE:
        cut = _quietest_cut(samples, a, b)
        spans.append((a, cut))
        a = cut
    spans.append((a, b))
    return spans


def _carve_backchannel(samples: np.ndarray, a: int) -> int:
    """The end of a back-channel cut from the start of a run at ``a``: the quietest 32 ms frame 0.4-1.0 s in."""
    lo, hi = a + int(CARVE_FROM_S * SAMPLE_RATE), a + int(BACKCHANNEL_MAX_S * SAMPLE_RATE) - FRAME
    frames = np.arange(lo, hi, FRAME // 4)
    energy = [float(np.mean(samples[f : f + FRAME] ** 2)) for f in frames]
    return int(frames[int(np.argmin(energy))]) + FRAME // 2


def pieces_of_clip(samples: np.ndarray, probs: np.ndarray, carve: bool) -> list[tuple[str, int, int]]:
    """(kind, start sample, end sample) of one clip's turns and back-channels; ``carve``: cut back-channels from
    the start of every other long run too."""
    out = []
    for k, (start, end) in enumerate(speech_runs(probs, len(samples) / SAMPLE_RATE)):
        a, b = int(round(start * SAMPLE_RATE)), int(round(end * SAMPLE_RATE))
        length = (b - a) / SAMPLE_RATE
        if BACKCHANNEL_MIN_S <= length <= BACKCHANNEL_MAX_S:
            out.append(("backchannel", a, b))
            continue
        if carve and length >= CARVE_RUNS_FROM_S and k % 2 == 0:
            cut = _carve_backchannel(samples, a)
            out.append(("backchannel", a, cut))
            a = cut
        for i, j in cut_run(samples, a, b):
            if (j - i) / SAMPLE_RATE >= TURN_MIN_S:
                out.append(("turn", i, j))
    return out


def speech_probabilities(clips: list[RawClip]) -> list[np.ndarray]:
    """Silero's per-frame speech probability for each clip, one clip per stream (no state shared across clips)."""
    import torch

    from speakerscribe.audio.vad import SileroVAD

    torch.set_num_threads(1)  # the same arithmetic on every machine and run: identical pieces, identical bytes
    vad = SileroVAD(streams=1)
    return vad.probabilities_of([c.samples for c in clips])


def to_pcm16(samples: np.ndarray) -> np.ndarray:
    return np.round(np.clip(samples, -1.0, 32767 / 32768) * 32768).astype("<i2")


def write_wav(path: Path, samples: np.ndarray) -> None:
    """16 kHz mono PCM16, same bytes for the same samples."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(to_pcm16(samples).tobytes())


def read_wav(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        if (w.getnchannels(), w.getsampwidth(), w.getframerate()) != (1, 2, SAMPLE_RATE):
            raise ValueError(f"{path}: expected 16 kHz mono PCM16")
        data = w.readframes(w.getnframes())
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768


def build_pools(clips: list[RawClip], people: dict[str, Person], folder: Path) -> dict:
    """Write every person's pool and return the ``people.json`` content (person -> record with pieces)."""
    folder.mkdir(parents=True, exist_ok=True)
    probs = speech_probabilities(clips)
    table = {}
    for pid, person in people.items():
        own = [(c, p) for c, p in zip(clips, probs) if c.person == pid]
        natural = sum(k == "backchannel" for c, p in own for k, _, _ in pieces_of_clip(c.samples, p, carve=False))
        chunks, pieces, offset = [], [], 0
        for clip, p in own:
            for kind, a, b in pieces_of_clip(clip.samples, p, carve=natural < MIN_BACKCHANNELS):
                chunks.append(clip.samples[a:b])
                pieces.append(Piece(kind, offset, b - a, clip.origin, round(a / SAMPLE_RATE, 3)))
                offset += b - a
        write_wav(folder / f"{pid}.wav", np.concatenate(chunks) if chunks else np.zeros(0, np.float32))
        turn_s = sum(p.n for p in pieces if p.kind == "turn") / SAMPLE_RATE
        table[pid] = {**asdict(person), "turn_speech_s": round(turn_s, 2), "pieces": [asdict(p) for p in pieces]}
    return table


@dataclass(frozen=True)
class Pool:
    person: Person
    samples: np.ndarray
    turns: tuple[Piece, ...]
    backchannels: tuple[Piece, ...]

    def audio(self, piece: Piece) -> np.ndarray:
        return self.samples[piece.offset : piece.offset + piece.n]


def load_pools(folder: Path) -> dict[str, Pool]:
    table = json.loads((folder / "people.json").read_text())
    pools = {}
    for pid, rec in table.items():
        person = Person(rec["id"], rec["source"], rec["gender"], rec["group"])
        pieces = [Piece(**p) for p in rec["pieces"]]
        pools[pid] = Pool(
            person,
            read_wav(folder / f"{pid}.wav"),
            tuple(p for p in pieces if p.kind == "turn"),
            tuple(p for p in pieces if p.kind == "backchannel"),
        )
    return pools
