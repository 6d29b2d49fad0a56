"""What one decoding of a window produced (:class:`Decoded`), and what a ``transcribe`` call does
(:class:`DecodePlan`): the records the ASR jobs pass between them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..options import AsrOptions
from ..records import Span
from .tokens import RawSegment


@dataclass(frozen=True)
class DecodePlan:
    """What one ``transcribe`` call does, decided by the pipeline from the request's options and what is loaded:
    the batch size (smaller after running out of accelerator memory), whether the draft model decodes (one window
    at a time), and whether word times are computed (asked for, or needed to cut speaker entries at words)."""

    batch_size: int = 24
    assisted: bool = False
    word_timestamps: bool = False


@dataclass
class Decoded:
    """What one window produced, in window-relative seconds."""

    window: Span
    segments: list[RawSegment] = field(default_factory=list)
    token_times: dict[int, float] = field(default_factory=dict)  # text-token position -> seconds
    text_positions: list[int] = field(default_factory=list)
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    temperature: float = 0.0
    text: str = ""
    compression_ratio: float = 0.0
    loops: bool = False  # the text holds a repetition loop (find_loop)

    def is_silence(self, opts: AsrOptions) -> bool:
        """Whisper's no-speech rule: likely silence, and nothing was decoded with confidence."""
        return self.no_speech_prob > opts.no_speech_threshold and self.avg_logprob < opts.logprob_threshold

    def repeats(self, opts: AsrOptions) -> bool:
        return self.loops or self.compression_ratio > opts.compression_ratio_threshold

    def failed(self, opts: AsrOptions) -> bool:
        """Needs another attempt: a loop, repetitive text, or low confidence (and not silence)."""
        if self.is_silence(opts) or not self.segments:
            return False
        return self.repeats(opts) or (opts.retry_low_confidence and self.avg_logprob < opts.logprob_threshold)
