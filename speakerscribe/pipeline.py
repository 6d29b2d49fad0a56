"""The job, as named steps: speech regions -> windows -> (ASR || diarization) -> second look -> attribution -> Result.

:meth:`Transcriber.run` takes a decoded waveform and the request's :class:`~speakerscribe.options.RequestOptions`;
it knows nothing of HTTP, pydantic or the environment (models are loaded by :mod:`speakerscribe.models.loading`).
Diarization runs in a worker thread while Whisper decodes (both release the GIL inside PyTorch), and its failure
never costs the transcript: the result carries a warning instead of speakers. The second look decodes again the
diarized speech that got no words.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .asr.coverage import (
    MAX_FOLLOW_UP_ROUNDS,
    SpeechMap,
    chunks_in,
    confident,
    covered_spans,
    follow_up_windows,
)
from .asr.engine import DecodePlan, WhisperEngine
from .audio.vad import SileroVAD, heard_only_briefly, speech_regions
from .audio.windows import plan_windows, uncovered
from .cancel import CancelToken
from .diarization.diarizer import SpeakerDiarizer
from .errors import CapacityError, InputError, RequestCancelled, short_message
from .intervals import union_intervals
from .merge import (
    attribute_chunks,
    attribute_words,
    group_by_speaker,
    trim_to_speech,
    widen_to_turns,
)
from .options import AttributionOptions, RequestOptions, SpeechOptions, VadOptions
from .records import Chunk, Diarization, Result, Span, SpeakerTurn, Transcript, Utterance, Waveform
from .runtime import Placement, start_worker
from .speakers.names import MIN_REFERENCE_SPEECH_S, Reference
from .timing import StageHook, StageTimer

logger = logging.getLogger(__name__)


def _reporter(cancel: CancelToken, progress: ProgressHook | None) -> Callable[[str, int, int], None]:
    """``report(stage, done, total)``: a cancellation check, then ``progress`` if there is one."""

    def report(name: str, done: int, total: int) -> None:
        cancel.check()
        if progress:
            progress(name, done, total)

    return report


WHOLE_AUDIO_WARNING = (
    "the speech detector heard speech only in moments too short for a region (quiet or distant speech, "
    "or noise); the whole audio was transcribed and Whisper's own no-speech test kept this text"
)

# the second look (see Transcriber._second_look); chosen on AMI train + development and the festival conversations
SECOND_LOOK_MIN_S = 0.8  # diarized speech without words shorter than this is not decoded again
SECOND_LOOK_PAD_S = 0.1  # audio added on both sides of such a stretch (never reaching a word)
HEARD_PAD_S = 0.15  # a word "covers" this much on both sides

ProgressHook = Callable[[str, int, int], None]  # (stage name, units done, units in total)


@dataclass(frozen=True)
class Heard:
    """What the speech detector found: the regions Whisper decodes, whether they are the whole audio because the
    VAD heard speech only briefly, its per-frame probabilities (None without a VAD, or when ``whole``) and the speech
    regions it heard (``speech``: the regions Whisper decodes, except with ``vad_filter`` off, where Whisper decodes
    the whole audio and the VAD only says which of it must end up covered by words)."""

    regions: list[Span]
    whole: bool
    probabilities: np.ndarray | None
    speech: list[Span] | None = None

    @property
    def speech_regions(self) -> list[Span]:
        """What must come back covered by words (the follow-ups' and tails' regions)."""
        return self.regions if self.speech is None else self.speech


@dataclass(frozen=True)
class Models:
    """What a deployment loaded (see :func:`speakerscribe.models.loading.load_models`)."""

    asr: WhisperEngine
    diarizer: SpeakerDiarizer | None
    vad: SileroVAD | None
    placement: Placement


class Transcriber:
    """Runs requests against loaded models. Holds no per-request state, so concurrent calls are safe."""

    def __init__(
        self,
        models: Models,
        max_audio_seconds: float = 4 * 3600.0,
        vad_options: VadOptions = VadOptions(),
        overlap: bool = True,
        second_look: bool = True,
    ):
        self.models = models
        self.second_look = second_look
        self.overlap = overlap
        self.max_audio_seconds = max_audio_seconds
        self.vad_options = vad_options

    @property
    def has_diarizer(self) -> bool:
        return self.models.diarizer is not None

    # ------------------------------------------------------------------------------------------------ steps
    def check(self, options: RequestOptions) -> None:
        """The request's options against what is loaded (language, task, draft model, a diarizer for known
        speakers); InputError otherwise."""
        self.models.asr.validate(options.asr)
        if options.known and (self.models.diarizer is None or not self.models.diarizer.can_name):
            raise InputError(
                "known speakers need a diarization model with a speaker-embedding model; this deployment has none "
                "(set DIARIZATION_MODEL)"
            )

    def references(self, clips: list[tuple[str, Waveform]]) -> tuple[Reference, ...]:
        """Decoded reference clips -> references with their speech regions (the VAD's, when the deployment has
        one); InputError naming the clip when it holds less than MIN_REFERENCE_SPEECH_S of speech."""
        out = []
        for (name, waveform), regions in zip(clips, self.speech_of([w for _, w in clips])):
            speech = tuple(regions)
            seconds = sum(s.end - s.start for s in speech)
            if seconds < MIN_REFERENCE_SPEECH_S:
                raise InputError(
                    f"known speaker {name[:80]!r}: the reference clip has {seconds:.1f} s of speech; at least "
                    f"{MIN_REFERENCE_SPEECH_S:.0f} s of that person speaking alone is needed (2-30 s works best)"
                )
            out.append(Reference(name, waveform, speech))
        return tuple(out)

    def plan(self, options: RequestOptions, windows: list[Span]) -> DecodePlan:
        """How Whisper runs for this request.

        Word times are computed when asked for, and whenever speakers are attributed with ``speaker_entries:
        "split"`` (entries are cut at speaker changes between words); the response shows them only when asked.
        ``assisted: "auto"`` uses the draft model where speculative decoding pays off: batch 1 on a GPU, i.e.
        audio that fits one window.
        """
        attribution = options.attribution
        split = self.has_diarizer and attribution.entries == "split"
        assisted = options.asr.assisted
        if assisted == "auto":
            assisted = self.models.asr.assistant is not None and len(windows) == 1 and self.models.placement.is_cuda
        return DecodePlan(
            batch_size=options.asr.batch_size,
            assisted=bool(assisted),
            word_timestamps=attribution.show_words or split,
        )

    def speech_of(self, waveforms: list[Waveform]) -> list[list[Span]]:
        """Speech regions (seconds) of several short waveforms (reference clips), the VAD run on all of them at once;
        each whole waveform when the deployment has no VAD."""
        if self.models.vad is None:
            return [[Span(0.0, w.duration)] if w.duration > 0 else [] for w in waveforms]
        probabilities = self.models.vad.probabilities_of([w.samples for w in waveforms])
        return [speech_regions(p, w.duration, self.vad_options) for p, w in zip(probabilities, waveforms)]

    def hear(self, waveform: Waveform, options: SpeechOptions) -> Heard:
        """The audio Whisper hears: the speech regions, or the whole audio when the VAD heard speech only in moments
        too brief to make a region (:func:`speakerscribe.audio.vad.heard_only_briefly`; then Whisper's own no-speech and
        log-probability tests decide, as without the VAD). Silence and steady noise never reach the threshold and
        still give nothing. With ``vad_filter`` off Whisper hears the whole audio, and the VAD (when the deployment
        has one) still runs: speech it heard that Whisper's windows skipped is decoded again (the tails and the
        follow-ups), as with the filter on; without it a window that stops early lost its last words (festival
        long-form set, tiny.en: 43 words against none)."""
        whole = [Span(0.0, waveform.duration)] if waveform.duration > 0 else []
        if self.models.vad is None:
            return Heard(whole, False, None)
        probs = self.models.vad.probabilities(waveform.samples)
        regions = speech_regions(probs, waveform.duration, self.vad_options)
        if not options.vad_filter:  # Whisper hears everything; what the VAD heard must still come back as words
            return Heard(whole, False, probs, regions)
        if heard_only_briefly(probs, regions, self.vad_options):
            return Heard(whole, True, None)
        return Heard(regions, False, probs)

    def speech_for_whisper(self, waveform: Waveform, options: SpeechOptions) -> tuple[list[Span], bool]:
        """:meth:`hear`'s regions, and whether they are the whole audio because the VAD heard speech only briefly."""
        heard = self.hear(waveform, options)
        return heard.regions, heard.whole

    @staticmethod
    def attribute(
        chunks: tuple[Chunk, ...],
        turns: tuple[SpeakerTurn, ...],
        options: AttributionOptions,
        words: bool,
        heard: tuple[SpeakerTurn | Span, ...] = (),
    ) -> list[Utterance]:
        """Speaker entries: cut at speaker changes between words (``entries: "split"``, when word times exist),
        cut down to the time where speech was ``heard`` (any diarized turn or speech region; nothing is cut when
        none is given) and widened to the speakers' turns; or one per chunk. Then grouped if asked."""
        split = words and (options.show_words or options.entries == "split")
        if split:
            utterances = attribute_words(chunks, turns)
            if heard:
                starts = np.array([h.start for h in heard], dtype=np.float64)
                ends = np.array([h.end for h in heard], dtype=np.float64)
                utterances = trim_to_speech(utterances, *union_intervals(starts, ends))
            utterances = widen_to_turns(utterances, turns)
        else:
            utterances = attribute_chunks(chunks, turns)
        return group_by_speaker(utterances) if options.group_by_speaker else utterances

    def run(
        self,
        waveform: Waveform,
        options: RequestOptions = RequestOptions(),
        hook: StageHook | None = None,
        progress: ProgressHook | None = None,
        cancel: CancelToken | None = None,
        references: tuple[Reference, ...] = (),
    ) -> Result:
        """The whole job; ``references`` (from :meth:`references`) name the speakers they match. ``cancel`` is
        checked at every step, Whisper sub-stage and diarizer batch; when it fires the work stops there with
        RequestCancelled (diarization running alongside stops too). ``hook(stage, seconds)`` is called as each step
        ends; ``progress(stage, done, total)`` as work advances."""
        warnings: list[str] = []
        cancel = cancel or CancelToken()
        timer = StageTimer(cancel=cancel, hook=hook)
        self._admit(waveform, options, warnings)
        report = _reporter(cancel, progress)
        report("speech", 0, 1)
        with timer("vad"):
            heard = self.hear(waveform, options.speech)
        report("speech", 1, 1)
        windows = plan_windows(heard.regions, waveform.samples, options.windows.chunk_length_s)
        plan = self.plan(options, windows)
        diarization_timer = StageTimer(cancel=cancel)  # merged after the wait: the keys keep the pipeline's order
        future = self._start_diarization(waveform, windows, options, diarization_timer, references)
        with timer("asr"):
            try:
                progress_of = lambda done, total: report("transcribe", done, total)  # noqa: E731
                speech = self._speech_map(heard)
                transcript, plan = self._transcribe(waveform, windows, options, plan, progress_of, timer, speech)
                transcript = self._follow_up(waveform, heard, transcript, options, plan, timer)
            except BaseException:
                cancel.cancel("failed")  # diarization running alongside stops at its next batch
                raise
        diarization = None
        if future is not None:
            report("diarize", 0, 1)
            with timer("diarization_wait"):
                diarization = self._diarization_result(future, warnings)
            if diarization is not None and (note := options.speakers.unmet(len(diarization.speakers))):
                warnings.append(note)
            timer.timings.update(diarization_timer.timings)
            report("diarize", 1, 1)
        if diarization is not None and self.second_look:
            transcript = self._second_look(waveform, diarization, transcript, options, plan, timer)
        if heard.whole and transcript.text.strip():
            warnings.append(WHOLE_AUDIO_WARNING)
        with timer("merge"):
            utterances = self._attributed(transcript, diarization, heard.regions, options, plan)
        return Result(
            transcript=transcript,
            duration=waveform.duration,
            utterances=tuple(utterances),
            diarization=diarization,
            warnings=tuple(warnings),
            timings={name: round(seconds, 4) for name, seconds in timer.timings.items()},
        )

    def _admit(self, waveform: Waveform, options: RequestOptions, warnings: list[str]) -> None:
        """Refuse what this deployment cannot do (InputError); note speaker counts that nothing will use."""
        self.check(options)
        if waveform.duration > self.max_audio_seconds:
            raise InputError(
                f"the audio is {waveform.duration:.0f} s long; this deployment accepts up to "
                f"{self.max_audio_seconds:.0f} s (MAX_AUDIO_SECONDS)"
            )
        if self.models.diarizer is None and options.speakers.given:
            warnings.append(
                "num_speakers/min_speakers/max_speakers were ignored: no diarization model is loaded "
                "(set DIARIZATION_MODEL)"
            )

    def _start_diarization(self, waveform, windows, options, timer: StageTimer, references):
        """Diarization started in a thread of its own that ends with the request (see
        :func:`speakerscribe.runtime.start_worker`: why not a pool); without overlap it has finished when this
        returns. None when there is no diarizer or no speech."""
        if self.models.diarizer is None or not windows:
            return None
        future = start_worker(self._diarize, waveform, options, timer, references, name="diarize")
        if not self.overlap:  # sequential: diarization first, then ASR
            future.result()
        return future

    @staticmethod
    def _diarization_result(future, warnings: list[str]) -> Diarization | None:
        diarization, error = future.result()
        if error:
            warnings.append(f"diarization failed ({error}); the transcript is complete but has no speakers")
        return diarization

    def _attributed(self, transcript, diarization, regions, options: RequestOptions, plan) -> list[Utterance]:
        """The transcript's pieces attributed to the diarized speakers (exclusive turns where pyannote gives them);
        empty without a diarization."""
        if diarization is None or not transcript.chunks:
            return []
        turns = diarization.exclusive or diarization.turns
        heard = tuple(diarization.turns) + tuple(regions)
        return self.attribute(transcript.chunks, turns, options.attribution, plan.word_timestamps, heard=heard)

    def _follow_up(
        self,
        waveform: Waveform,
        heard: Heard,
        transcript: Transcript,
        options: RequestOptions,
        plan: DecodePlan,
        timer: StageTimer,
    ) -> Transcript:
        """Speech the VAD heard that no chunk covers is decoded again, in windows of its own, all in one batch, in
        the language already found; up to ``MAX_FOLLOW_UP_ROUNDS`` times, since a follow-up window may stop early
        too. A window that gives nothing, or only chunks decoded with a mean log-probability under ``logprob_threshold``
        (Whisper: not speech, or not sure), is not decoded again (:mod:`speakerscribe.asr.coverage`).
        """
        if heard.probabilities is None or not transcript.chunks:
            return transcript
        declined: list[Span] = list(transcript.declined)  # tails the windows' own encodings gave nothing sure for
        # no retries at higher temperatures (_again): a follow-up Whisper is not sure of is what it makes up in a
        # pause between turns ("Thank you.", "Bye."), and it is dropped below
        again = _again(options, transcript)
        threshold = self.vad_options.threshold
        for round_ in range(MAX_FOLLOW_UP_ROUNDS):
            covered = covered_spans(transcript.chunks) + declined
            windows = follow_up_windows(
                heard.speech_regions,
                covered,
                heard.probabilities,
                threshold,
                waveform.samples,
                options.windows.chunk_length_s,
            )
            if not windows:
                break
            with timer("asr_follow_up"):
                more, _ = self._transcribe(waveform, windows, again, plan, None, timer)
            more = dataclasses.replace(more, chunks=confident(more.chunks, again.asr.logprob_threshold))
            declined += [w for w in windows if not chunks_in(w, more.chunks)]
            logger.info(
                "follow-up %d: %d window(s), %.1f s of uncovered speech, %d chunk(s) found",
                round_ + 1,
                len(windows),
                sum(w.end - w.start for w in windows),
                len(more.chunks),
            )
            transcript = _joined(transcript, more)
        return transcript

    def _second_look(
        self,
        waveform: Waveform,
        diarization: Diarization,
        transcript: Transcript,
        options: RequestOptions,
        plan: DecodePlan,
        timer: StageTimer,
    ) -> Transcript:
        """Whisper skips words inside a window now and then (overlapped, quiet or far-field speech, a short reply
        after a long turn). Where the diarizer heard someone speak for at least ``SECOND_LOOK_MIN_S`` and no word
        lies within ``HEARD_PAD_S``, that stretch is decoded again on its own, in the language already found; the
        new chunks join the transcript in time order. Nothing is re-decoded when every stretch of diarized speech
        has words."""
        extra = uncovered(
            [Span(t.start, t.end) for t in diarization.exclusive or diarization.turns],
            covered_spans(transcript.chunks, HEARD_PAD_S),
            SECOND_LOOK_MIN_S,
            SECOND_LOOK_PAD_S,
        )
        extra = [Span(s.start, min(s.end, waveform.duration)) for s in extra if s.start < waveform.duration]
        if not extra:
            return transcript
        # each piece is a window of its own: packing would span the speech between pieces, decoded already
        more_windows = [w for s in extra for w in plan_windows([s], waveform.samples, options.windows.chunk_length_s)]
        with timer("asr_second_look"):
            more, _ = self._transcribe(waveform, more_windows, _again(options, transcript), plan, None, timer)
        logger.info(
            "second look: %d window(s), %.1f s of diarized speech without words, %d chunk(s) found",
            len(more_windows),
            sum(w.end - w.start for w in more_windows),
            len(more.chunks),
        )
        return _joined(transcript, more)

    def _transcribe(
        self,
        waveform: Waveform,
        windows: list[Span],
        options: RequestOptions,
        plan: DecodePlan,
        progress,
        timer: StageTimer,
        speech: SpeechMap | None = None,
    ) -> tuple[Transcript, DecodePlan]:
        """ASR with an automatic smaller batch on accelerator out-of-memory; returns the plan that worked. ``speech``:
        windows that stop early are decoded again from there (:mod:`speakerscribe.asr.refill`)."""
        import torch

        oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
        batch = plan.batch_size
        while True:
            try:
                attempt = dataclasses.replace(plan, batch_size=batch)
                clock = timer.nested(cuda=self.models.placement.is_cuda)
                asr = self.models.asr
                return asr.transcribe(waveform, windows, options.asr, attempt, progress, clock, speech), attempt
            except oom as exc:
                torch.cuda.empty_cache()
                if batch == 1 or plan.assisted:
                    logger.error("out of accelerator memory at batch size 1: %s", short_message(exc))
                    raise CapacityError(
                        "out of accelerator memory even at batch size 1; retry later or send shorter audio"
                    ) from exc
                batch = max(1, batch // 2)
                logger.warning("out of memory; retrying with batch_size=%d", batch)

    def _speech_map(self, heard: Heard) -> SpeechMap | None:
        """What the VAD heard, for the tails (None without its probabilities: no VAD, or the whole audio heard)."""
        if heard.probabilities is None:
            return None
        return SpeechMap(heard.speech_regions, heard.probabilities, self.vad_options.threshold)

    def _diarize(
        self, waveform: Waveform, options: RequestOptions, timer: StageTimer, references: tuple[Reference, ...]
    ) -> tuple[Diarization | None, str | None]:
        """Runs in the worker thread: (turns, None), or (None, reason) when diarization fails."""
        try:
            with timer("diarization"):
                diarization = self.models.diarizer(
                    waveform,
                    options.speakers,
                    checkpoint=timer.cancel.check,
                    references=references,
                    threshold=options.known.threshold,
                    timer=timer,
                )
                return diarization, None
        except RequestCancelled:
            raise
        except Exception as exc:  # reported in the response; the transcript must survive
            logger.exception("diarization failed")
            return None, f"{type(exc).__name__}: {short_message(exc, 300)}"


def _again(options: RequestOptions, transcript: Transcript) -> RequestOptions:
    """The options for decoding stretches again (follow-ups, second look): in the language already found, and
    without retries for low confidence (loops are still decoded again; on these short pieces the temperature ladder
    cost more than the first pass and found nothing the greedy pass did not)."""
    asr = dataclasses.replace(options.asr, retry_low_confidence=False)
    if transcript.language and asr.language is None:
        asr = dataclasses.replace(asr, language=transcript.language)
    return dataclasses.replace(options, asr=asr)


def _joined(transcript: Transcript, more: Transcript) -> Transcript:
    """``transcript`` with the chunks decoded again joined in time order (unchanged when there are none)."""
    if not more.chunks:
        return transcript
    return dataclasses.replace(
        transcript,
        chunks=tuple(sorted(transcript.chunks + more.chunks, key=lambda c: (c.start, c.end))),
        language=transcript.language or more.language,
        language_probability=transcript.language_probability or more.language_probability,
    )
