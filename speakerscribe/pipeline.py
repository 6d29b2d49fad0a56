"""The job, as named steps: speech regions -> windows -> (ASR || diarization) -> attribution -> Result.

Diarization runs in a worker thread while Whisper decodes (both release the GIL inside PyTorch), and its failure
never costs the transcript: the result carries a warning instead of speakers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .asr import AsrOptions, WhisperEngine, looks_like_whisper_folder
from .cancel import CancelToken
from .diarize import SpeakerDiarizer
from .errors import CapacityError, InputError, RequestCancelled, short_message
from .merge import attribute_chunks, attribute_words, group_by_speaker, widen_to_turns
from .records import Diarization, Result, Span, Transcript, Waveform
from .runtime import Placement, apply_tf32, resolve_placement
from .settings import DEFAULT_ASR_MODEL, InferenceConfig, ModelSettings
from .vad import SileroVAD, VadOptions, speech_regions
from .windows import plan_windows

logger = logging.getLogger(__name__)

StageHook = Callable[[str, float], None]  # (stage name, seconds) when a stage ends
ProgressHook = Callable[[str, int, int], None]  # (stage name, units done, units in total)


@dataclass(frozen=True)
class Models:
    asr: WhisperEngine
    diarizer: SpeakerDiarizer | None
    vad: SileroVAD | None
    placement: Placement


def resolve_asr_model(settings: ModelSettings, model_dir: str | None) -> str:
    """ASR_MODEL if set; else the repository folder when it holds a Whisper model; else Whisper large-v3."""
    if settings.asr_model:
        return settings.asr_model
    if model_dir and Path(model_dir).is_dir() and looks_like_whisper_folder(model_dir):
        return str(model_dir)
    return DEFAULT_ASR_MODEL


def load_models(settings: ModelSettings, model_dir: str | None = None) -> Models:
    placement = resolve_placement(settings.device, settings.torch_dtype, settings.attn_implementation)
    apply_tf32(settings.allow_tf32)
    asr_id = resolve_asr_model(settings, model_dir)
    logger.info(
        "loading ASR model %s (assistant: %s) on %s/%s/%s",
        asr_id,
        settings.assistant_model or "none",
        placement.device,
        placement.dtype_name,
        placement.attn_implementation,
    )
    asr = WhisperEngine.load(
        asr_id, placement, settings.assistant_model, settings.token(), settings.max_new_tokens, settings.static_cache
    )
    if settings.static_cache:
        logger.info("warming up the static-cache decoder at batch size %d", settings.warmup_batch_size)
        asr.warmup(settings.warmup_batch_size)
    diarizer = None
    if settings.diarization_model:
        logger.info("loading diarization pipeline %s", settings.diarization_model)
        diarizer = SpeakerDiarizer.load(
            settings.diarization_model,
            placement,
            settings.token(),
            settings.allow_tf32,
            settings.diarization_shared_frames,
            settings.diarization_recluster,
        )
    vad = SileroVAD() if settings.vad == "silero" else None
    return Models(asr=asr, diarizer=diarizer, vad=vad, placement=placement)


class Transcriber:
    """Runs requests against loaded models. Holds no per-request state, so concurrent calls are safe."""

    def __init__(
        self,
        models: Models,
        max_audio_seconds: float = 4 * 3600.0,
        vad_options: VadOptions = VadOptions(),
        overlap: bool = True,
    ):
        self.models = models
        self.overlap = overlap
        self.max_audio_seconds = max_audio_seconds
        self.vad_options = vad_options
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="diarize")

    @classmethod
    def from_settings(cls, settings: ModelSettings, model_dir: str | None = None) -> Transcriber:
        return cls(load_models(settings, model_dir), settings.max_audio_seconds, overlap=settings.overlap_diarization)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------------------------------------ steps
    def check(self, cfg: InferenceConfig) -> AsrOptions:
        """Request options against what is loaded (language, task, draft model) -> ASR options.

        Word times are computed when asked for, and whenever speakers are attributed with ``speaker_entries:
        "split"`` (entries are cut at speaker changes between words); the response shows them only when asked.
        """
        split = self.models.diarizer is not None and cfg.speaker_entries == "split"
        return self.models.asr.validate(
            AsrOptions(
                task=cfg.task,
                language=cfg.language,
                prompt=cfg.prompt,
                temperature=cfg.temperature,
                batch_size=cfg.batch_size,
                assisted=cfg.assisted is True,
                word_timestamps=cfg.word_timestamps or split,
            )
        )

    def speech(self, waveform: Waveform, cfg: InferenceConfig) -> list[Span]:
        """Speech regions (seconds); the whole audio when the VAD is off."""
        if self.models.vad is None or not cfg.vad_filter:
            return [Span(0.0, waveform.duration)] if waveform.duration > 0 else []
        return speech_regions(self.models.vad.probabilities(waveform.samples), waveform.duration, self.vad_options)

    def run(
        self,
        waveform: Waveform,
        cfg: InferenceConfig,
        hook: StageHook | None = None,
        progress: ProgressHook | None = None,
        cancel: CancelToken | None = None,
    ) -> Result:
        """The whole job. ``cancel`` is checked at every step, Whisper sub-stage and diarizer batch; when it fires
        the work stops there with RequestCancelled (diarization running alongside stops too)."""
        timings: dict[str, float] = {}
        warnings: list[str] = []
        cancel = cancel or CancelToken()

        @contextmanager
        def stage(name: str):
            cancel.check()
            t0 = time.perf_counter()
            yield
            timings[name] = round(time.perf_counter() - t0, 4)
            if hook:
                hook(name, timings[name])

        opts = self.check(cfg)
        if waveform.duration > self.max_audio_seconds:
            raise InputError(
                f"the audio is {waveform.duration:.0f} s long; this deployment accepts up to "
                f"{self.max_audio_seconds:.0f} s (MAX_AUDIO_SECONDS)"
            )
        diarizer = self.models.diarizer
        wants_speakers = any(v is not None for v in (cfg.num_speakers, cfg.min_speakers, cfg.max_speakers))
        if diarizer is None and wants_speakers:
            warnings.append(
                "num_speakers/min_speakers/max_speakers were ignored: no diarization model is loaded "
                "(set DIARIZATION_MODEL)"
            )

        def report(name: str, done: int, total: int) -> None:
            cancel.check()
            if progress:
                progress(name, done, total)

        report("speech", 0, 1)
        with stage("vad"):
            regions = self.speech(waveform, cfg)
        report("speech", 1, 1)
        windows = plan_windows(regions, waveform.samples, float(cfg.chunk_length_s))
        if cfg.assisted == "auto":
            # speculative decoding pays off at batch 1 on a GPU, i.e. for audio that fits one window
            wins = self.models.asr.assistant is not None and len(windows) == 1 and self.models.placement.is_cuda
            opts = AsrOptions(**{**opts.__dict__, "assisted": wins})

        future = None
        if diarizer is not None and windows:
            future = self._pool.submit(self._diarize, waveform, cfg, cancel)
            if not self.overlap:  # sequential: diarization first, then ASR
                future.result()
        with stage("asr"):
            try:
                transcript = self._transcribe(
                    waveform, windows, opts, lambda done, total: report("transcribe", done, total), timings, cancel
                )
            except BaseException:
                cancel.cancel("failed")  # diarization running alongside stops at its next batch
                raise
        diarization = None
        if future is not None:
            report("diarize", 0, 1)
            with stage("diarization_wait"):
                diarization, seconds, error = future.result()
            timings["diarization"] = round(seconds, 4)
            report("diarize", 1, 1)
            if error:
                warnings.append(f"diarization failed ({error}); the transcript is complete but has no speakers")
        with stage("merge"):
            utterances = []
            if diarization is not None and transcript.chunks:
                turns = diarization.exclusive or diarization.turns
                split = opts.word_timestamps and (cfg.word_timestamps or cfg.speaker_entries == "split")
                attribute = attribute_words if split else attribute_chunks
                utterances = attribute(transcript.chunks, turns)
                if split:
                    utterances = widen_to_turns(utterances, turns)
                if cfg.group_by_speaker:
                    utterances = group_by_speaker(utterances)
        return Result(
            transcript=transcript,
            duration=waveform.duration,
            utterances=tuple(utterances),
            diarization=diarization,
            warnings=tuple(warnings),
            timings=timings,
        )

    def _transcribe(
        self, waveform: Waveform, windows: list[Span], opts: AsrOptions, progress=None, timings=None, cancel=None
    ) -> Transcript:
        """ASR with an automatic smaller batch on accelerator out-of-memory."""
        import torch

        oom = getattr(torch, "OutOfMemoryError", torch.cuda.OutOfMemoryError)
        batch = opts.batch_size
        while True:
            try:
                return self.models.asr.transcribe(
                    waveform, windows, AsrOptions(**{**opts.__dict__, "batch_size": batch}), progress, timings, cancel
                )
            except oom as exc:
                torch.cuda.empty_cache()
                if batch == 1 or opts.assisted:
                    logger.error("out of accelerator memory at batch size 1: %s", short_message(exc))
                    raise CapacityError(
                        "out of accelerator memory even at batch size 1; retry later or send shorter audio"
                    ) from exc
                batch = max(1, batch // 2)
                logger.warning("out of memory; retrying with batch_size=%d", batch)

    def _diarize(
        self, waveform: Waveform, cfg: InferenceConfig, cancel: CancelToken
    ) -> tuple[Diarization | None, float, str | None]:
        t0 = time.perf_counter()
        try:
            result = self.models.diarizer(
                waveform, cfg.num_speakers, cfg.min_speakers, cfg.max_speakers, checkpoint=cancel.check
            )
            return result, time.perf_counter() - t0, None
        except RequestCancelled:
            raise
        except Exception as exc:  # reported in the response; the transcript must survive
            logger.exception("diarization failed")
            return None, time.perf_counter() - t0, f"{type(exc).__name__}: {short_message(exc, 300)}"
