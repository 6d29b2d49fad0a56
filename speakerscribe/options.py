"""What one request asks of each stage, as frozen records. The only translation from a request's ``parameters``
into these is :meth:`speakerscribe.models.settings.InferenceConfig.to_options`; the stages read nothing else.

Request parameter -> record field -> where it acts:

* ``sampling_rate`` -> ``InputOptions.sampling_rate`` -> ``audio.load_inputs`` (sample lists only)
* ``vad_filter`` -> ``SpeechOptions.vad_filter`` -> ``pipeline.Transcriber.speech``
* ``chunk_length_s`` -> ``WindowOptions.chunk_length_s`` -> ``windows.plan_windows``
* ``task``, ``language``, ``prompt``, ``temperature``, ``batch_size``, ``assisted`` -> ``AsrOptions`` ->
  ``asr.WhisperEngine.transcribe`` (batch size and ``assisted: "auto"`` resolved per run into an
  ``asr.DecodePlan`` by ``pipeline.Transcriber.run``)
* ``num_speakers``, ``min_speakers``, ``max_speakers`` -> ``SpeakerCounts`` -> ``diarize.SpeakerDiarizer.__call__``
* ``known_speakers`` (or ``known_speaker_names`` + ``known_speaker_references``), ``known_speaker_threshold`` ->
  ``KnownSpeakers`` -> decoded by ``endpoint.EndpointHandler.process``, checked by ``pipeline.Transcriber.references``,
  matched by ``diarize.SpeakerDiarizer.__call__``
* ``speaker_entries``, ``group_by_speaker``, ``return_timestamps`` -> ``AttributionOptions`` ->
  ``pipeline.Transcriber.attribute``; ``show_words`` also ``response.endpoint_response`` and ``formats``

The speaker-count rules live in :class:`SpeakerCounts` alone: building one is checking it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .errors import InputError, quote

MAX_SPEAKERS = 64
KNOWN_SPEAKER_THRESHOLD = 0.35  # calibrated on AMI train + development: benchmarks/calibrate_naming.py
FALLBACK_TEMPERATURES = (0.2, 0.4, 0.6, 0.8, 1.0)


@dataclass(frozen=True)
class InputOptions:
    """How to read ``inputs``: the rate of a sample list (a file's own header always wins)."""

    sampling_rate: int = 16000
    sampling_rate_given: bool = False  # the request named a rate (a file that declares another one gets a warning)


@dataclass(frozen=True)
class VadOptions:
    """Thresholds on the per-frame speech probability and the shaping of regions (seconds). Deployment-wide."""

    # Silero's defaults. Checked on the AMI train + development meetings: 0.4 / 0.25 covers 82.5% of their reference
    # speech instead of 80% (0.25 / 0.1: 88%), but more non-speech reaches Whisper: WER on the festival
    # several-minutes conversation went from 0.068 to 0.086 (whisper-base), and at 0.25 one meeting was detected
    # as Welsh. Kept at the defaults.
    threshold: float = 0.5
    neg_threshold: float = 0.35
    min_speech_s: float = 0.25
    min_silence_s: float = 0.5
    pad_s: float = 0.2


@dataclass(frozen=True)
class SpeechOptions:
    """Which audio reaches Whisper: with ``vad_filter``, only speech regions (when the deployment has a VAD)."""

    vad_filter: bool = True


@dataclass(frozen=True)
class WindowOptions:
    """The longest window sent to Whisper, seconds (speech regions are packed into such windows)."""

    chunk_length_s: float = 30.0


@dataclass(frozen=True)
class AsrOptions:
    """Decoding options. ``batch_size`` and ``assisted`` are the request's wishes; what a run uses (smaller batches
    after running out of accelerator memory, ``"auto"`` decided from the number of windows) is an
    :class:`speakerscribe.asr.engine.DecodePlan`."""

    task: Literal["transcribe", "translate"] = "transcribe"
    language: str | None = None  # as sent; the engine normalises it ("English" -> "en") against its languages
    prompt: str | None = None  # text that conditions decoding (style, names), as Whisper's previous-text prompt
    temperature: float = 0.0  # 0: greedy; > 0: sampling at that temperature
    batch_size: int = 24
    assisted: bool | Literal["auto"] = False
    no_speech_threshold: float = 0.6
    logprob_threshold: float = -1.0
    compression_ratio_threshold: float = 2.4
    fallback_temperatures: tuple[float, ...] = FALLBACK_TEMPERATURES  # () turns recovery off
    # retry at higher temperatures when the average log-probability is under ``logprob_threshold`` too, not only
    # on repetition; live sessions turn it off (on short turns it cost 2-3 s of latency and no accuracy)
    retry_low_confidence: bool = True


@dataclass(frozen=True)
class SpeakerCounts:
    """How many speakers the diarizer may find. Constructing one checks the rules; InputError names the broken
    one."""

    num: int | None = None
    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        for name, value in self._named():
            if value is not None and not 1 <= value <= MAX_SPEAKERS:
                raise InputError(f"`{name}` must be between 1 and {MAX_SPEAKERS}, got {quote(value, 40)}")
        if self.num is not None and (self.min is not None or self.max is not None):
            raise InputError(
                "`num_speakers` fixes the count exactly; do not send it together with `min_speakers`/`max_speakers`"
            )
        if self.min is not None and self.max is not None and self.min > self.max:
            raise InputError(f"`min_speakers` ({self.min}) must not exceed `max_speakers` ({self.max})")

    def _named(self) -> tuple[tuple[str, int | None], ...]:
        """The request's fields under their parameter names."""
        return (("num_speakers", self.num), ("min_speakers", self.min), ("max_speakers", self.max))

    def _bounds(self) -> tuple[int | None, int | None]:
        """The fewest and most speakers asked for (None: no bound)."""
        if self.num is not None:
            return self.num, self.num
        return self.min, self.max

    @property
    def given(self) -> bool:
        return any(v is not None for v in (self.num, self.min, self.max))

    def miss(self, count: int) -> int:
        """How many speakers ``count`` is away from the request (0: it meets it)."""
        lo, hi = self._bounds()
        return max(0 if lo is None else lo - count, 0 if hi is None else count - hi, 0)

    def allows(self, count: int) -> bool:
        """``count`` speakers meet the request."""
        return self.miss(count) == 0

    def unmet(self, count: int) -> str | None:
        """The response's note when ``count`` speakers were found against this request; None when they meet it."""
        if not self.given or self.allows(count):
            return None
        # num_speakers never comes with min/max (``__post_init__``): the fields sent, in order
        asked = ", ".join(f"{name}={value}" for name, value in self._named() if value is not None)
        if count == 0:
            return f"{asked} was asked for and no speaker was found"
        found = f"{asked} was asked for and {count} speaker(s) were found"
        lo, _ = self._bounds()
        if lo is not None and count < lo:
            return f"{found}: a count is applied only as far as the voices heard allow (one voice is not cut in two)"
        return f"{found}: no clustering of the voices heard within the count came closer to it"


@dataclass(frozen=True)
class AttributionOptions:
    """How words are given to speakers and shown.

    ``entries``: ``"split"`` cuts a speaker entry wherever the speaker changes (needs word times, which the
    pipeline then computes whether or not they are shown); ``"chunk"`` gives one entry per Whisper chunk.
    ``show_words``: word times appear in the response (``return_timestamps: "word"``).
    """

    entries: Literal["split", "chunk"] = "split"
    group_by_speaker: bool = False
    show_words: bool = False


@dataclass(frozen=True)
class KnownSpeakers:
    """People known to be in the recording: names (checked) and their reference clips as sent (audio bytes, or
    base64 / data-URL text), decoded at the edge like the main audio. ``threshold``: the least cosine similarity
    for a diarized speaker to take a name."""

    names: tuple[str, ...] = ()
    clips: tuple[str | bytes, ...] = ()
    threshold: float = KNOWN_SPEAKER_THRESHOLD

    def __bool__(self) -> bool:
        return bool(self.names)


@dataclass(frozen=True)
class RequestOptions:
    """Everything one request asks, per stage."""

    input: InputOptions = field(default_factory=InputOptions)
    speech: SpeechOptions = field(default_factory=SpeechOptions)
    windows: WindowOptions = field(default_factory=WindowOptions)
    asr: AsrOptions = field(default_factory=AsrOptions)
    speakers: SpeakerCounts = field(default_factory=SpeakerCounts)
    attribution: AttributionOptions = field(default_factory=AttributionOptions)
    known: KnownSpeakers = field(default_factory=KnownSpeakers)
