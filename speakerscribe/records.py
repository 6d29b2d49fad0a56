"""Typed records passed between stages. Times are float seconds from the start of the audio."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

SAMPLE_RATE = 16000


@dataclass(frozen=True, slots=True)
class Waveform:
    """Decoded audio: float32 mono samples at ``sample_rate`` (always 16 kHz inside the pipeline)."""

    samples: np.ndarray
    sample_rate: int = SAMPLE_RATE

    @property
    def duration(self) -> float:
        return len(self.samples) / self.sample_rate


@dataclass(frozen=True, slots=True)
class DecodedAudio:
    """A request's audio after decoding: the 16 kHz waveform, the input's own sample rate, and what went wrong
    without making the audio unusable (corrupt packets skipped, a file cut short), for the response's warnings."""

    waveform: Waveform
    native_rate: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Span:
    """A half-open time interval [start, end)."""

    start: float
    end: float


@dataclass(frozen=True, slots=True)
class Word:
    """A word as Whisper spells it, leading space included (" Hello"); joining words rebuilds the text."""

    text: str
    start: float
    end: float
    probability: float | None = None
    speaker: str | None = None


@dataclass(frozen=True, slots=True)
class Chunk:
    """One transcript segment as Whisper timestamps it; ``words`` when word timestamps were asked for."""

    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()
    avg_logprob: float | None = None  # of the window the chunk was decoded in
    no_speech_prob: float | None = None


@dataclass(frozen=True, slots=True)
class SpeakerTurn:
    start: float
    end: float
    speaker: str


@dataclass(frozen=True, slots=True)
class Transcript:
    chunks: tuple[Chunk, ...]
    language: str | None = None
    language_probability: float | None = None
    # speech decoded again where a window's transcript stopped early, without finding anything sure: the follow-ups
    # leave it alone (speakerscribe.asr.refill)
    declined: tuple[Span, ...] = ()

    @property
    def text(self) -> str:
        return "".join(c.text for c in self.chunks)


@dataclass(frozen=True, slots=True)
class SpeakerMatch:
    """What became of one name: the diarized label it replaced (None when no speaker matched it) and the cosine
    similarity of that pair, or of the name's most similar speaker when it was not assigned (None when the
    recording has no speaker at all)."""

    name: str
    speaker: str | None
    similarity: float | None

    @property
    def found(self) -> bool:
        return self.speaker is not None


@dataclass(frozen=True, slots=True)
class Diarization:
    """Speaker turns; ``exclusive`` has no overlapping turns (one speaker at a time), ``turns`` may overlap.
    ``known``: what became of each known speaker the request named (see :mod:`speakerscribe.speakers.names`)."""

    turns: tuple[SpeakerTurn, ...]
    exclusive: tuple[SpeakerTurn, ...]
    known: tuple[SpeakerMatch, ...] = ()

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(sorted({t.speaker for t in self.turns}))


@dataclass(frozen=True, slots=True)
class Utterance:
    """A piece of transcript attributed to one speaker."""

    speaker: str
    start: float
    end: float
    text: str
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Result:
    """Everything one request produced, before serialisation."""

    transcript: Transcript
    duration: float
    utterances: tuple[Utterance, ...] = ()
    diarization: Diarization | None = None
    warnings: tuple[str, ...] = ()
    timings: dict[str, float] = field(default_factory=dict)
