"""Long-form test audio with exact reference text, for the accuracy of long requests (words lost between windows).

* :func:`festival_longform`: several two- and three-person festival conversations spoken one after another into one
  file (5-20 minutes), with the exact text of every turn.
* :func:`ami_joined`: the 14 real AMI excerpts joined into one 7-minute meeting-room recording (reference speakers,
  no reference words: coverage only).

Deterministic: the same arguments give the same file (festival's output is cached by the script's hash).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .conversation import MEETING, THREE_SPEAKERS, Conversation, Line, long_conversation, synthesize

_GAP_BETWEEN_CONVERSATIONS_S = 1.5


@dataclass(frozen=True)
class LongForm:
    """A long recording: the file, its duration, and its reference text (None when there is none)."""

    name: str
    wav: Path
    duration: float
    reference: str | None


def festival_script(lines: int) -> list[Line]:
    """Conversations of two and three people, one after another, about ``lines`` turns in all (3-4 s a turn)."""
    parts: list[list[Line]] = [list(MEETING), list(THREE_SPEAKERS)]
    seed = 11
    while sum(len(p) for p in parts) < lines:
        n = min(24, lines - sum(len(p) for p in parts))
        parts.append(long_conversation(max(n, 4), seed=seed, backchannel_every=2 + seed % 3, pauses=(0.3, 1.0)))
        seed += 1
    script: list[Line] = []
    for part in parts:
        script.extend(part[:-1])
        script.append(replace(part[-1], pause_after=_GAP_BETWEEN_CONVERSATIONS_S))
    return script


def festival_longform(out_dir: Path, lines: int = 100) -> tuple[LongForm, Conversation]:
    """``lines`` turns (100 give about 6 minutes) spoken by festival voices into ``out_dir/longform_<lines>.wav``."""
    conversation = synthesize(festival_script(lines), out_dir, f"longform_{lines}")
    return LongForm(f"festival_{lines}", conversation.wav, conversation.duration, conversation.reference_text), (
        conversation
    )


def ami_joined(recordings, out_dir: Path, gap_s: float = 1.0) -> LongForm:
    """The AMI excerpts (``speakerscribe_dev.ami.load``) joined with ``gap_s`` of silence into one file."""
    import soundfile as sf

    from speakerscribe.records import SAMPLE_RATE

    out_dir.mkdir(parents=True, exist_ok=True)
    wav = out_dir / f"ami_joined_{len(recordings)}.wav"
    gap = np.zeros(int(gap_s * SAMPLE_RATE), dtype=np.float32)
    pieces = []
    for r in recordings:
        samples, rate = sf.read(str(r.wav), dtype="float32", always_2d=True)
        assert rate == SAMPLE_RATE, f"{r.wav}: {rate} Hz"
        pieces += [samples.mean(axis=1), gap]
    audio = np.concatenate(pieces)
    if not wav.is_file() or sf.info(str(wav)).frames != audio.size:
        sf.write(str(wav), audio, SAMPLE_RATE, subtype="PCM_16")
    return LongForm(wav.stem, wav, round(audio.size / SAMPLE_RATE, 3), None)
