"""Model loading: deployment settings -> loaded models -> a :class:`~speakerscribe.pipeline.Transcriber`.

The settings are an argument: the endpoint reads them from the environment (``ModelSettings()``), the CLI overrides
some of them (``ModelSettings(asr_model=...)``, the environment for the rest), the tests give them all
(``ModelSettings.given(...)``, no environment), and nothing here reads or writes ``os.environ`` (pyannote's
telemetry switch aside, see :mod:`speakerscribe.runtime`).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..asr.engine import WhisperEngine
from ..audio.vad import SileroVAD
from ..diarization.diarizer import SpeakerDiarizer
from ..pipeline import Models, Transcriber
from ..runtime import apply_tf32, configure_logging, no_progress_bars, resolve_placement
from .settings import DEFAULT_ASR_MODEL, ModelSettings

logger = logging.getLogger(__name__)


def looks_like_whisper_folder(path: str | Path) -> bool:
    cfg = Path(path) / "config.json"
    return cfg.is_file() and '"whisper"' in cfg.read_text(errors="ignore")


def resolve_asr_model(settings: ModelSettings, model_dir: str | None) -> str:
    """ASR_MODEL if set; else the repository folder when it holds a Whisper model; else Whisper large-v3."""
    if settings.asr_model:
        return settings.asr_model
    if model_dir and Path(model_dir).is_dir() and looks_like_whisper_folder(model_dir):
        return str(model_dir)
    return DEFAULT_ASR_MODEL


def load_models(settings: ModelSettings, model_dir: str | None = None) -> Models:
    """Load what ``settings`` names (no library progress bars meanwhile: :func:`~.runtime.no_progress_bars`)."""
    with no_progress_bars():
        return _load_models(settings, model_dir)


def _load_models(settings: ModelSettings, model_dir: str | None) -> Models:
    placement = resolve_placement(settings.device, settings.torch_dtype, settings.attn_implementation)
    apply_tf32(settings.allow_tf32)
    asr_id = resolve_asr_model(settings, model_dir)
    logger.info(
        "loading ASR model %s (assistant: %s) on %s/%s/%s, decoder quantization %s",
        asr_id,
        settings.assistant_model or "none",
        placement.device,
        placement.dtype_name,
        placement.attn_implementation,
        settings.decoder_quantization,
    )
    asr = WhisperEngine.load(
        asr_id,
        placement,
        settings.assistant_model,
        settings.token(),
        settings.max_new_tokens,
        settings.static_cache,
        settings.decoder_quantization,
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
            settings.diarization_constrained,
        )
    vad = SileroVAD() if settings.vad == "silero" else None
    return Models(asr=asr, diarizer=diarizer, vad=vad, placement=placement)


def load_transcriber(settings: ModelSettings, model_dir: str | None = None) -> Transcriber:
    """Load what ``settings`` names and wrap it for requests."""
    models = load_models(settings, model_dir)
    return Transcriber(models, settings.max_audio_seconds, overlap=settings.overlap_diarization)


def main() -> int:
    """``python -m speakerscribe.models.loading``: load (and so download into the Hugging Face cache) the models the
    environment names, then exit. The Dockerfile runs it to bake models into an image; it is also a start-up check."""
    from ..errors import ModelLoadError

    configure_logging(logging.INFO, "%(asctime)s %(name)s %(message)s")
    try:
        models = load_models(ModelSettings())
    except (ModelLoadError, ValueError, RuntimeError) as exc:
        logger.error("%s", exc)
        return 1
    logger.info(
        "loaded: ASR on %s, draft model %s, diarization %s, VAD %s",
        models.placement.device,
        "yes" if models.asr.assistant is not None else "no",
        "yes" if models.diarizer is not None else "no",
        "yes" if models.vad is not None else "no",
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
