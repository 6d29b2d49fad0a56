"""Deployment settings (environment variables) and per-request parameters, validated once.

``ModelSettings`` is read from the environment when a handler is built, never at import. ``InferenceConfig`` is the
``parameters`` object of a request: the original handler's names and defaults, plus additive options. Unknown
names are an error that lists the valid ones.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from ..asr.quantized import DecoderQuantization
from ..errors import InputError, quote
from ..options import (
    KNOWN_SPEAKER_THRESHOLD,
    MAX_SPEAKERS,
    AsrOptions,
    AttributionOptions,
    InputOptions,
    KnownSpeakers,
    RequestOptions,
    SpeakerCounts,
    SpeechOptions,
    WindowOptions,
)
from ..speakers.names import MAX_KNOWN_SPEAKERS, check_names

DEFAULT_ASR_MODEL = "openai/whisper-large-v3"
MIN_CHUNK_LENGTH_S = 1.0  # shorter windows give Whisper too little context and the request thousands of windows


class ModelSettings(BaseSettings):
    """Environment variables (case-insensitive). ``HF_TOKEN`` is a secret: it never appears in a repr or log."""

    model_config = SettingsConfigDict(env_file=None, extra="ignore", case_sensitive=False, hide_input_in_errors=True)

    asr_model: str | None = Field(None, description="Whisper checkpoint: Hub id or local folder")
    assistant_model: str | None = Field(None, description="draft model for speculative decoding")
    diarization_model: str | None = Field(None, description="pyannote pipeline: Hub id or local folder")
    hf_token: SecretStr | None = Field(None, description="token for gated/private models")
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N | mps")
    torch_dtype: Literal["auto", "float32", "float16", "bfloat16"] = "auto"
    attn_implementation: Literal["auto", "sdpa", "eager", "flash_attention_2"] = "auto"
    decoder_quantization: DecoderQuantization = Field(
        "screened",
        description="int8 weights for decoding steps on a CPU (not with STATIC_CACHE): screened (default) screens "
        "greedy steps' vocabulary projection in int8 and scores the tokens that decide the step with the model's "
        "weights; sampled for the temperature fallback's sampled attempts, int8 for every step; none keeps the "
        "model's weights throughout",
    )
    vad: Literal["silero", "none"] = Field("silero", description="speech activity gate before Whisper")
    max_new_tokens: int | None = Field(None, ge=1, le=448, description="cap on tokens per 30 s window")
    allow_tf32: bool = Field(True, description="TF32 matmul on Ampere+ GPUs (restored after pyannote calls)")
    overlap_diarization: bool = Field(True, description="run diarization alongside ASR instead of before it")
    static_cache: bool = Field(
        False, description="static KV cache (compiled decoder step on CUDA), warmed up at start; opt-in"
    )
    warmup_batch_size: int = Field(24, ge=1, le=256, description="batch size of the start-up warm-up")
    diarization_shared_frames: bool = Field(
        True, description="compute speaker-embedding frames once per file instead of once per 10 s window"
    )
    diarization_recluster: bool = Field(
        True,
        description="second clustering pass over ~2 s pieces of the turns (needs shared frames): tells apart "
        "similar voices that the segmentation model puts in one local speaker",
    )
    diarization_constrained: bool = Field(
        True,
        description="with a CAM++ embedding model: voices the segmentation model hears in the same window are never "
        "merged when the distance rule alone would merge them (telephone calls); false keeps pyannote's clustering",
    )
    max_audio_seconds: float = Field(4 * 3600.0, gt=0, description="longest accepted audio")

    @field_validator("asr_model", "assistant_model", "diarization_model", "hf_token", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            return None
        return value

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        value = value.strip().lower()
        head = value.split(":")[0]
        if head not in {"auto", "cpu", "cuda", "mps"} or (":" in value and not value.split(":")[1].isdigit()):
            raise ValueError("DEVICE must be auto, cpu, cuda, cuda:N or mps")
        return value

    def token(self) -> str | None:
        return self.hf_token.get_secret_value() if self.hf_token else None

    @classmethod
    def given(cls, **values: Any) -> ModelSettings:
        """Settings from ``values`` alone, every other one at its default: the environment is not read (tests,
        applications that configure the handler themselves). ``ModelSettings(**values)`` reads the environment
        for the rest."""
        return _GivenModelSettings(**values)


class _GivenModelSettings(ModelSettings):
    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, **other_sources):
        return (init_settings,)


class InferenceConfig(BaseModel):
    """The request's ``parameters``. Names and defaults of the original handler come first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task: Literal["transcribe", "translate"] = "transcribe"
    batch_size: int = Field(24, ge=1, le=256, description="windows decoded together")
    assisted: bool | Literal["auto"] = Field(
        False, description="speculative decoding with the draft model (batch 1); 'auto' uses it on single-window audio"
    )
    chunk_length_s: float = Field(
        30, ge=MIN_CHUNK_LENGTH_S, le=30, description="longest window sent to Whisper, seconds (1 to 30)"
    )
    sampling_rate: int = Field(16000, ge=1000, le=384000, description="rate of `inputs` given as a sample list")
    language: str | None = Field(
        None, max_length=40, description="force a language (ISO-639-1 code or name); null detects"
    )
    num_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="exact number of speakers")
    min_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="lower bound of the speaker count")
    max_speakers: int | None = Field(None, ge=1, le=MAX_SPEAKERS, description="upper bound of the speaker count")
    return_timestamps: Literal["chunk", "word"] = Field("chunk", description="speaker attribution granularity")
    group_by_speaker: bool = Field(False, description="merge consecutive entries of one speaker")
    speaker_entries: Literal["split", "chunk"] = Field(
        "split",
        description="'split': a `speakers` entry is cut wherever the speaker changes (from word times); "
        "'chunk': one entry per Whisper chunk, as the original handler",
    )
    vad_filter: bool = Field(True, description="skip non-speech audio (when the deployment has a VAD)")
    prompt: str | None = Field(None, max_length=4000, description="text that conditions decoding (names, style)")
    temperature: float = Field(0.0, ge=0.0, le=1.0, description="0 decodes greedily; above 0 samples")
    known_speakers: dict[str, str] | None = Field(
        None,
        description="people known to be in the recording, {name: reference clip}: each clip 1-60 s of that person "
        "alone, as base64 audio or a data: URL; matching speakers carry the name instead of SPEAKER_NN",
    )
    known_speaker_names: list[str] | None = Field(
        None, max_length=MAX_KNOWN_SPEAKERS, description="the same as two lists (OpenAI's form): names ..."
    )
    known_speaker_references: list[str] | None = Field(
        None, max_length=MAX_KNOWN_SPEAKERS, description="... and their reference clips, in the same order"
    )
    known_speaker_threshold: float = Field(
        KNOWN_SPEAKER_THRESHOLD,
        ge=-1.0,
        le=1.0,
        description="least cosine similarity between a speaker and a reference for the name to be given",
    )

    @field_validator("return_timestamps", mode="before")
    @classmethod
    def _timestamps(cls, value: Any) -> Any:
        if value is True or (isinstance(value, str) and value.lower() in {"true", "segment", "chunk"}):
            return "chunk"
        if isinstance(value, str) and value.lower() == "word":
            return "word"
        return value

    @field_validator("language", mode="before")
    @classmethod
    def _language(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip().lower() in {"", "auto", "none", "null"}:
            return None
        return value

    @model_validator(mode="after")
    def _speakers(self) -> InferenceConfig:
        try:
            self.speaker_counts()
            self.known()
        except InputError as exc:
            raise ValueError(str(exc)) from None
        if self.assisted is True and self.batch_size != 1 and "batch_size" in self.model_fields_set:
            raise ValueError(
                f"`assisted: true` decodes one window at a time, so `batch_size` must be 1 (got {self.batch_size}); "
                "omit `batch_size`, or use `assisted: 'auto'`"
            )
        return self

    @property
    def word_timestamps(self) -> bool:
        return self.return_timestamps == "word"

    def speaker_counts(self) -> SpeakerCounts:
        return SpeakerCounts(self.num_speakers, self.min_speakers, self.max_speakers)

    def known(self) -> KnownSpeakers:
        """The known speakers from either form; InputError when the forms are mixed or do not pair up."""
        lists = self.known_speaker_names is not None or self.known_speaker_references is not None
        if self.known_speakers is not None and lists:
            raise InputError(
                "send `known_speakers` ({name: clip}) or `known_speaker_names` + `known_speaker_references`, not both"
            )
        if self.known_speakers is not None:
            names, clips = list(self.known_speakers), list(self.known_speakers.values())
            where = "`known_speakers`"
        else:
            names, clips = list(self.known_speaker_names or ()), list(self.known_speaker_references or ())
            where = "`known_speaker_names`"
            if len(names) != len(clips):
                raise InputError(
                    f"`known_speaker_names` has {len(names)} name(s) but `known_speaker_references` has "
                    f"{len(clips)} clip(s); send one reference clip per name, in the same order"
                )
        checked = check_names(names, where)
        for name, clip in zip(checked, clips):
            if not clip.strip():
                raise InputError(f"known speaker {quote(name, 80)}: the reference clip is empty")
        return KnownSpeakers(checked, tuple(clips), self.known_speaker_threshold)

    def to_options(self) -> RequestOptions:
        """The request, per stage: the one place a request's parameters are translated (see
        :mod:`speakerscribe.options` for where each one acts)."""
        return RequestOptions(
            input=InputOptions(self.sampling_rate, sampling_rate_given="sampling_rate" in self.model_fields_set),
            speech=SpeechOptions(vad_filter=self.vad_filter),
            windows=WindowOptions(chunk_length_s=float(self.chunk_length_s)),
            asr=AsrOptions(
                task=self.task,
                language=self.language,
                prompt=self.prompt,
                temperature=self.temperature,
                batch_size=self.batch_size,
                assisted=self.assisted,
            ),
            speakers=self.speaker_counts(),
            attribution=AttributionOptions(
                entries=self.speaker_entries, group_by_speaker=self.group_by_speaker, show_words=self.word_timestamps
            ),
            known=self.known(),
        )


VALID_PARAMETERS = tuple(InferenceConfig.model_fields)


def parse_parameters(parameters: Any) -> InferenceConfig:
    """``parameters`` of a request -> InferenceConfig, or InputError with every problem spelled out."""
    if parameters is None:
        parameters = {}
    if not isinstance(parameters, dict):
        raise InputError(f"`parameters` must be a JSON object, got {type(parameters).__name__}")
    unknown = sorted(set(parameters) - set(VALID_PARAMETERS))
    if unknown:
        raise InputError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(quote(u, 60) for u in unknown[:5])}; "
            f"valid parameters: {', '.join(VALID_PARAMETERS)}"
        )
    try:
        return InferenceConfig.model_validate(parameters)
    except ValidationError as exc:
        raise InputError("invalid parameters: " + "; ".join(_describe(e) for e in exc.errors())) from None


def _describe(error: dict) -> str:
    where = ".".join(str(p) for p in error.get("loc", ()))[:100]
    msg = error.get("msg", "invalid value").removeprefix("Value error, ")[:300]
    if "input" in error and where:
        return f"`{where}`: {msg} (got {quote(error['input'])})"
    return msg
