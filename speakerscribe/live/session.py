"""One live transcription session, independent of any wire protocol: audio in, typed events out.

Audio arrives as 16 kHz float32 pieces (:meth:`StreamSession.append`). With turn detection on, a streaming Silero
VAD (:class:`speakerscribe.audio.vad.VadStream`) finds where speech starts and where it has been silent for
``silence_duration_ms``; that ends the turn. Without it, the client ends turns with :meth:`commit`. While a turn is
spoken, :meth:`partial` decodes it again (at most every ``partial_every_s`` of new audio) and sends the words two
decodes agree on (:mod:`.agreement`); deltas are never retracted. When the turn ends, a final decode with word times
gives its transcript (authoritative: it may correct a word the partials confirmed, as OpenAI's ``completed`` may;
decoding partial audio costs accuracy, so the turn is decoded again whole, with the session's recent text as
Whisper's prompt), the turn is embedded and given a session-wide speaker label (:mod:`.online_speakers`), and it is
completed.

:meth:`finish` completes what is pending and returns a summary in the ``diarized_json`` shape: with
``final_diarization`` the whole session's audio is diarized again (the session then keeps its audio, up to its
length limit), otherwise the live labels are used.

Memory: without ``final_diarization`` the session keeps only the current turn (or the last
``prefix_padding_ms`` between turns) and the completed transcript text.

Methods are not thread-safe: the caller runs one at a time per session (the protocol adapters do, in a worker
thread, since decoding blocks).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field

import numpy as np

from ..asr.engine import DecodePlan
from ..audio.windows import plan_windows
from ..errors import InputError
from ..options import AsrOptions, AttributionOptions
from ..records import SAMPLE_RATE, Chunk, Diarization, Result, Span, SpeakerTurn, Transcript, Utterance, Waveform
from ..timing import StageTimer
from .agreement import Agreement, split_words
from .online_speakers import ONLINE_THRESHOLD, OnlineSpeakers

FRAME = 512
MIN_TURN_S = 0.1  # shorter committed audio is completed with an empty transcript, undecoded
# partial decodes take at most 1 / PARTIAL_DUTY of the stream's time: the next waits for PARTIAL_DUTY times as much
# new audio as the last one took to decode. A partial in flight when the speaker stops delays the final decode
# (on 2 cores, partials every 0.5 s of audio kept the CPU busy all the time and added ~0.3 s to completed latency);
# with several streams on one machine, partials slow down before finals do
PARTIAL_DUTY = 2.0
SILENT_FRAMES_SKIP = 1  # one 32 ms frame of silence in a turn: no partial; the turn is decoded ahead instead
# a partial decode stops when more than this much audio has arrived while it ran (the client is ahead of the session,
# the partial would be stale); this also bounds the VAD work of looking ahead
LOOKAHEAD_MAX_S = 2.0


@dataclass(frozen=True)
class TurnDetection:
    """Server-side turn detection, as OpenAI's ``server_vad``: speech probability ``threshold``, audio kept before
    the detected start (``prefix_padding_ms``), and the silence that ends a turn (``silence_duration_ms``)."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500


@dataclass(frozen=True)
class StreamOptions:
    language: str | None = None
    prompt: str | None = None
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)  # None: manual commits
    partials: bool = True
    partial_every_s: float = 0.5
    partial_min_s: float = 1.0  # no partial before this much of the turn is heard: too little context
    agreement_n: int = 2  # consecutive partial decodes that must agree on a word (LocalAgreement-n)
    agreement_hold: int = 1  # newest words of the latest partial decode never confirmed
    final_diarization: bool = False
    speaker_threshold: float = ONLINE_THRESHOLD
    max_turn_s: float = 25.0  # a longer turn is completed there and continues as a new one
    context_chars: int = 400  # the session's last transcript text given to Whisper as its previous-text prompt


# ------------------------------------------------------------------------------------------------- events
@dataclass(frozen=True)
class SpeechStarted:
    item_id: str
    start: float


@dataclass(frozen=True)
class SpeechStopped:
    item_id: str
    end: float


@dataclass(frozen=True)
class Committed:
    item_id: str
    previous_item_id: str | None


@dataclass(frozen=True)
class Delta:
    item_id: str
    text: str


@dataclass(frozen=True)
class Completed:
    item_id: str
    text: str
    start: float
    end: float
    words: tuple = ()
    speaker: str | None = None
    speaker_similarity: float | None = None


@dataclass(frozen=True)
class Cleared:
    pass


@dataclass(frozen=True)
class Summary:
    result: Result
    rediarized: bool


class StreamLimit(InputError):
    """The session reached its audio limit."""


class Overtaken(Exception):
    """A decode ahead of the audio was stopped: audio that arrived meanwhile makes its result useless."""


class _Lookahead:
    """Between decoding steps, a look at the audio the server holds for the session but has not appended yet
    (``pending()``: the blocks, oldest first), through a fork of the session's VAD (the session's own VAD does not
    move). A partial decode is stopped once the newest frame is silence (the speaker is pausing: the turn may be
    ending, and its final decode must not wait for a partial); a turn decoded ahead during a pause is stopped once
    speech resumes before the pause is long enough to end the turn (that decode would be thrown away).

    Used as a :class:`~speakerscribe.timing.StageTimer`'s token: ``check`` runs as each stage starts and before
    every greedy decoding step, and raises :class:`Overtaken`."""

    def __init__(self, vad, pending, low: float, silence_left: int | None = None):
        self.vad = vad.fork()
        self.pending = pending
        self.low = low
        self.silence_left = silence_left  # None: stop at a pause; n: stop at speech within the next n frames
        self.seen = 0  # blocks of pending() looked at
        self.heard = 0  # samples looked at

    def check(self) -> None:
        if self.silence_left is not None and self.silence_left <= 0:
            return  # the pause already ends the turn: what is decoded will be used
        blocks = self.pending()
        fresh, self.seen = blocks[self.seen :], len(blocks)
        if not fresh:
            return
        audio = np.concatenate(fresh)
        if self.silence_left is None:
            self.heard += len(audio)
            if self.heard > LOOKAHEAD_MAX_S * SAMPLE_RATE:
                # the client sends faster than the session decodes: a partial now is stale before it is sent
                raise Overtaken("audio is waiting")
            probs = self.vad.feed(audio)
            if probs.size and probs[-1] < self.low:
                raise Overtaken("the speaker paused")
            return
        probs = self.vad.feed(audio[: self.silence_left * FRAME + FRAME])  # only the frames that can still matter
        speech = np.flatnonzero(probs >= self.low)
        if speech.size and speech[0] < self.silence_left:
            raise Overtaken("speech resumed")
        self.silence_left -= probs.size


class StreamSession:
    def __init__(self, transcriber, options: StreamOptions, max_seconds: float = 3600.0, id_prefix: str = "item"):
        from ..audio.vad import new_stream

        self.transcriber = transcriber
        self.models = transcriber.models
        self.options = options
        self.max_samples = int(max_seconds * SAMPLE_RATE)
        # finals retry only on repetition loops: low-confidence retries cost seconds of latency per turn and
        # changed no word on the test conversations (benchmarks/RESULTS.md "Live streaming")
        self.asr_options = AsrOptions(language=options.language, prompt=options.prompt, retry_low_confidence=False)
        self.models.asr.validate(self.asr_options)
        self.partial_options = AsrOptions(language=options.language, prompt=options.prompt, fallback_temperatures=())
        detection = options.turn_detection
        self.vad = new_stream(self.models.vad) if detection is not None and self.models.vad is not None else None
        self.detection = detection
        self.speakers = OnlineSpeakers(options.speaker_threshold) if self._can_embed() else None
        self.id_prefix = id_prefix
        # set by a server: the audio received for this session and not appended yet (blocks, oldest first), which
        # decodes ahead look at to stop early (see _Lookahead); None: no look ahead
        self.pending = None
        self.items = 0
        self.last_item: str | None = None
        self.received = 0  # samples in the whole session
        self.buffer = np.zeros(0, dtype=np.float32)  # samples from buffer_start on
        self.buffer_start = 0
        self.kept: list[np.ndarray] = []  # the whole session, only with final_diarization
        self.chunks: list[Chunk] = []
        self.labels: list[str | None] = []
        self._reset_turn()

    # ---------------------------------------------------------------------------------------------- state
    def _reset_turn(self) -> None:
        self.in_turn = False
        self.turn_start = 0  # session sample where the current turn's audio starts (prefix included)
        self.item_id: str | None = None
        self.silence_frames = 0
        self.early: tuple | None = None  # (end sample, transcript, embedding) decoded ahead while the speaker paused
        self.agreement = Agreement(n=self.options.agreement_n, hold=self.options.agreement_hold)
        self.partial_at = 0  # session sample up to which the last partial decoded
        self.partial_cost = 0.0  # seconds the last partial decode took

    def _can_embed(self) -> bool:
        diarizer = self.models.diarizer
        return diarizer is not None and diarizer.can_name

    def _new_item(self) -> str:
        self.items += 1
        return f"{self.id_prefix}_{self.items:04d}"

    @property
    def seconds(self) -> float:
        return self.received / SAMPLE_RATE

    # ---------------------------------------------------------------------------------------------- input
    def append(self, samples: np.ndarray) -> list:
        """16 kHz float32 audio -> the events it causes (speech started/stopped, turns completed)."""
        samples = np.asarray(samples, dtype=np.float32)
        if self.received + len(samples) > self.max_samples:
            raise StreamLimit(
                f"the session reached its limit of {self.max_samples / SAMPLE_RATE:.0f} s of audio "
                "(MAX_STREAM_SECONDS); start a new session"
            )
        self.received += len(samples)
        self.buffer = np.concatenate([self.buffer, samples])
        if self.options.final_diarization:
            self.kept.append(samples)
        events: list = []
        if self.vad is not None:
            events = self._detect(self.vad.feed(samples))
            if not self.in_turn:  # between turns only the prefix padding is kept
                keep = int(self.detection.prefix_padding_ms * SAMPLE_RATE / 1000)
                self._drop_before(self.received - keep)
        else:
            if self.item_id is None:  # manual mode: audio after a commit is the next item
                self.item_id, self.turn_start, self.partial_at = self._new_item(), self.buffer_start, self.buffer_start
            if self.received - self.buffer_start > int(self.options.max_turn_s * SAMPLE_RATE) * 20:
                events = self.commit()  # an uncommitted buffer past 20 turns' length is committed
        return events

    @property
    def _silence_needed(self) -> int:
        """Silent frames that end a turn."""
        return max(1, round(self.detection.silence_duration_ms / 1000 * SAMPLE_RATE / FRAME))

    @property
    def _low(self) -> float:
        """Below this speech probability a frame is silence (hysteresis under ``threshold``)."""
        return max(0.0, self.detection.threshold - 0.15)

    def _detect(self, probs: np.ndarray) -> list:
        d = self.detection
        events: list = []
        # frames count from the session start (frame k covers samples [512 k, 512 (k + 1))); every sample
        # received but the VAD's pending remainder is in a complete frame
        frame0 = (self.received - self.vad.pending) // FRAME - len(probs)
        silence_needed, low = self._silence_needed, self._low
        for k, p in enumerate(probs):
            frame = frame0 + k
            if not self.in_turn:
                if p >= d.threshold:
                    start = max(self.buffer_start, frame * FRAME - int(d.prefix_padding_ms * SAMPLE_RATE / 1000))
                    self.in_turn, self.turn_start, self.silence_frames = True, start, 0
                    self.item_id = self._new_item()
                    self.partial_at = start
                    events.append(SpeechStarted(self.item_id, start / SAMPLE_RATE))
                continue
            self.silence_frames = self.silence_frames + 1 if p < low else 0
            if self.silence_frames == 0:
                self.early = None  # speech resumed: what was decoded ahead is not the turn
            end = (frame + 1) * FRAME
            if self.silence_frames >= silence_needed:
                speech_end = end - self.silence_frames * FRAME + FRAME  # one frame of the silence kept
                events.append(SpeechStopped(self.item_id, speech_end / SAMPLE_RATE))
                events.extend(self._complete(speech_end))
            elif end - self.turn_start >= int(self.options.max_turn_s * SAMPLE_RATE):
                events.extend(self._complete(end))  # a very long turn: completed here, continued as a new one
                self.in_turn, self.turn_start, self.item_id = True, end, self._new_item()
                self.partial_at = end
                events.append(SpeechStarted(self.item_id, end / SAMPLE_RATE))
        return events

    def _drop_before(self, sample: int) -> None:
        if sample > self.buffer_start:
            cut = min(sample - self.buffer_start, len(self.buffer))
            self.buffer = self.buffer[cut:].copy()
            self.buffer_start += cut

    def _audio(self, start: int, end: int) -> np.ndarray:
        return self.buffer[max(0, start - self.buffer_start) : max(0, end - self.buffer_start)]

    # ------------------------------------------------------------------------------------------- decoding
    def _context(self, options: AsrOptions) -> AsrOptions:
        """``options`` with the session's recent transcript as Whisper's previous-text prompt (after the client's
        own prompt): a turn is decoded with the context a 30 s batch window would have given it."""
        if self.options.context_chars <= 0 or not self.chunks:
            return options
        recent = "".join(c.text for c in self.chunks[-20:])[-self.options.context_chars :]
        prompt = f"{self.options.prompt} {recent}" if self.options.prompt else recent
        return dataclasses.replace(options, prompt=prompt.strip())

    def _decode(self, samples: np.ndarray, options: AsrOptions, words: bool, lookahead=None) -> Transcript:
        options = self._context(options)
        waveform = Waveform(samples)
        windows = plan_windows([Span(0.0, waveform.duration)], samples, 30.0)
        plan = DecodePlan(batch_size=4, assisted=False, word_timestamps=words)
        return self.models.asr.transcribe(waveform, windows, options, plan, None, StageTimer(cancel=lookahead))

    def _lookahead(self, silence_left: int | None = None) -> _Lookahead | None:
        if self.vad is None or self.pending is None:
            return None
        return _Lookahead(self.vad, self.pending, self._low, silence_left)

    def partial(self) -> list:
        """A partial decode of the turn being spoken, when ``partial_every_s`` of new audio arrived since the last
        one (and ``PARTIAL_DUTY`` times the last one's decode time): the newly confirmed words as a Delta (or
        nothing)."""
        if not self.options.partials or self.item_id is None:
            return []
        if self.vad is not None and self.silence_frames >= SILENT_FRAMES_SKIP:
            return []  # the speaker has paused: the turn may be ending, and its final decode must not wait
        end = self.received
        every = max(self.options.partial_every_s, PARTIAL_DUTY * self.partial_cost)
        if end - self.partial_at < int(every * SAMPLE_RATE):
            return []
        self.partial_at = end
        audio = self._audio(self.turn_start, end)
        if len(audio) < max(MIN_TURN_S, self.options.partial_min_s) * SAMPLE_RATE:
            return []
        started = time.perf_counter()
        try:
            words = split_words(
                self._decode(audio, self.partial_options, words=False, lookahead=self._lookahead()).text
            )
        except Overtaken:
            return []
        self.partial_cost = time.perf_counter() - started
        new = self.agreement.update(words)
        return [Delta(self.item_id, "".join(new))] if new else []

    def idle(self) -> list:
        """What to do while no audio waits: when the speaker has paused inside a turn, decode the turn up to the
        pause ahead of time (if the pause becomes the turn's end, completion reuses it and the ``completed`` event
        does not wait for a decode); otherwise a partial decode."""
        if self.vad is None or not self.in_turn or self.silence_frames < SILENT_FRAMES_SKIP:
            return self.partial()
        end = self._speech_end()
        if self.early is None or self.early[0] != end:
            audio = self._audio(self.turn_start, end)
            try:
                transcript = self._final_decode(audio, self._lookahead(self._silence_needed - self.silence_frames))
            except Overtaken:
                return []
            self.early = (end, transcript, self._embedding(audio))
        return []

    def _speech_end(self) -> int:
        """Where the current pause began (one frame of it kept), in session samples."""
        last_frame = (self.received - self.vad.pending) // FRAME - 1
        return (last_frame + 1) * FRAME - self.silence_frames * FRAME + FRAME

    def _final_decode(self, audio: np.ndarray, lookahead=None) -> Transcript | None:
        if len(audio) < MIN_TURN_S * SAMPLE_RATE:
            return None
        return self._decode(audio, self.asr_options, words=True, lookahead=lookahead)

    def _complete(self, end: int) -> list:
        """The current turn, [turn_start, end), decoded, labelled and completed."""
        item_id, start = self.item_id, self.turn_start
        events: list = [Committed(item_id, self.last_item)]
        self.last_item = item_id
        audio = self._audio(start, end)
        offset = start / SAMPLE_RATE
        words: tuple = ()
        text_words: list[str] = []
        if self.early is not None and self.early[0] == end:
            transcript, embedding = self.early[1], self.early[2]
        else:
            transcript, embedding = self._final_decode(audio), self._embedding(audio)
        if transcript is not None:
            text_words = split_words(transcript.text)
            words = tuple(
                type(w)(w.text, w.start + offset, w.end + offset, w.probability)
                for c in transcript.chunks
                for w in c.words
            )
        rest = self.agreement.finish(text_words)
        if rest:
            events.append(Delta(item_id, "".join(rest)))
        # the final decode is authoritative (as in OpenAI's protocol): where partial decodes confirmed a word that
        # the final decode of the whole turn hears otherwise, `completed` has the final decode's word
        text = "".join(text_words) if text_words else self.agreement.text
        speaker, similarity = self._label(embedding, len(audio) / SAMPLE_RATE)
        if speaker is not None:
            words = tuple(type(w)(w.text, w.start, w.end, w.probability, speaker) for w in words)
        completed = Completed(item_id, text, offset, end / SAMPLE_RATE, words, speaker, similarity)
        events.append(completed)
        if text.strip():
            self.chunks.append(Chunk(offset, end / SAMPLE_RATE, text, words))
            self.labels.append(speaker)
        self._reset_turn()
        self._drop_before(end)
        return events

    def _embedding(self, audio: np.ndarray) -> np.ndarray | None:
        if self.speakers is None or len(audio) < SAMPLE_RATE // 2:
            return None
        return self.models.diarizer.embed_clips([(audio, ())])[0]

    def _label(self, embedding: np.ndarray | None, seconds: float) -> tuple[str | None, float | None]:
        if embedding is None:
            return None, None
        return self.speakers.assign(embedding, seconds)

    # ------------------------------------------------------------------------------------------- commands
    def commit(self) -> list:
        """End the current turn now (manual turn detection: the whole uncommitted buffer is the turn)."""
        if self.vad is None:
            if self.received - self.buffer_start < int(MIN_TURN_S * SAMPLE_RATE):
                raise InputError(
                    "the input audio buffer is empty (under 100 ms of audio since the last commit); append audio "
                    "before committing"
                )
            return self._complete(self.received)
        if not self.in_turn:
            raise InputError("no speech is being spoken to commit: the server's turn detection ends turns itself")
        return self._complete(self.received)

    def clear(self) -> list:
        """Drop the uncommitted audio and the turn being spoken."""
        self._drop_before(self.received)
        self._reset_turn()
        return [Cleared()]

    def finish(self) -> list:
        """Complete what is pending and return the summary (see the module docstring)."""
        events: list = []
        if self.in_turn or (self.vad is None and self.received - self.buffer_start >= MIN_TURN_S * SAMPLE_RATE):
            events.extend(self._complete(self.received))
        events.append(self.summary())
        return events

    def summary(self) -> Summary:
        chunks = tuple(self.chunks)
        transcript = Transcript(chunks, self.options.language)
        duration = self.received / SAMPLE_RATE
        diarizer = self.models.diarizer
        if self.options.final_diarization and diarizer is not None and self.kept and chunks:
            diarization = diarizer(Waveform(np.concatenate(self.kept)))
            turns = diarization.exclusive or diarization.turns
            utterances = self.transcriber.attribute(chunks, turns, AttributionOptions(), words=True)
            return Summary(Result(transcript, duration, tuple(utterances), diarization), rediarized=True)
        utterances = tuple(
            Utterance(label or "SPEAKER_00", c.start, c.end, c.text, c.words) for c, label in zip(chunks, self.labels)
        )
        turns = tuple(SpeakerTurn(u.start, u.end, u.speaker) for u in utterances)
        diarization = Diarization(turns, turns) if turns and self.speakers is not None else None
        return Summary(Result(transcript, duration, utterances if diarization else (), diarization), rediarized=False)
