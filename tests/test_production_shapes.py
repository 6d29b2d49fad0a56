"""The models users deploy, by Hub id, offline: openai/whisper-large-v3 (-turbo), distil-whisper/distil-large-v3 as
the assistant, pyannote/speaker-diarization-community-1 and -3.1, written from random weights in their published
layouts and configs (real vocabulary, mel bins, tokenizer and generation ids; reduced networks) into a throwaway
Hugging Face cache (``models--org--name/snapshots/<rev>/`` + ``refs/main``; speakerscribe_dev.random_models), then
run through the handler, the server's OpenAI route, a live session and the image's bake step with
``HF_HUB_OFFLINE=1``. Random weights: these test shapes and plumbing, never accuracy."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub.constants
import pytest
import requests
from audio_helpers import wav_bytes
from conftest import CACHE, REPO, _stamp, make_handler
from test_handler import speechlike

pytestmark = pytest.mark.slow

LARGE_V3 = "openai/whisper-large-v3"
TURBO = "openai/whisper-large-v3-turbo"
DISTIL = "distil-whisper/distil-large-v3"
COMMUNITY_1 = "pyannote/speaker-diarization-community-1"
PIPELINE_31 = "pyannote/speaker-diarization-3.1"

# Published ids, taken from the published files (not from our writers): openai/whisper-large-v3
# generation_config.json (decoder_start_token_id, bos/eos/pad, no_timestamps_token_id, prev_sot_token_id,
# task_to_id, begin_suppress_tokens, max_initial_timestamp_index, max_length; the same in -large-v3-turbo's and
# distil-large-v3's), its config.json (vocab_size 51866, num_mel_bins 128) and added_tokens.json (the specials and
# <|0.00|> .. <|30.00|>). large-v3 inserted <|yue|> at 50358: translate, transcribe, startoflm, startofprev,
# nospeech, notimestamps and every timestamp sit one id higher than in whisper-base (50358 .. 50363 there).
VOCAB_SIZE = 51866
MEL_BINS = 128
GENERATION_IDS = {
    "decoder_start_token_id": 50258,
    "bos_token_id": 50257,
    "eos_token_id": 50257,
    "pad_token_id": 50257,
    "no_timestamps_token_id": 50364,
    "prev_sot_token_id": 50362,
    "max_initial_timestamp_index": 50,
    "max_length": 448,
    "is_multilingual": True,
    "begin_suppress_tokens": [220, 50257],
}
TASK_TO_ID = {"translate": 50359, "transcribe": 50360}
TOKEN_IDS = {
    "<|endoftext|>": 50257,
    "<|startoftranscript|>": 50258,
    "<|en|>": 50259,
    "<|zh|>": 50260,
    "<|de|>": 50261,
    "<|su|>": 50357,
    "<|yue|>": 50358,
    "<|translate|>": 50359,
    "<|transcribe|>": 50360,
    "<|startoflm|>": 50361,
    "<|startofprev|>": 50362,
    "<|nospeech|>": 50363,
    "<|notimestamps|>": 50364,
    "<|0.00|>": 50365,
    "<|0.02|>": 50366,
    "<|30.00|>": 51865,
}
LANGUAGES = 100  # 99 of large-v2 + Cantonese


def _cache(name: str, write) -> str:
    """A cache folder written once per version of the writers (kept under .cache between runs)."""
    from speakerscribe.models import pyannote_folder, whisper_convert
    from speakerscribe_dev import random_models

    sources = [random_models.__file__, whisper_convert.__file__, pyannote_folder.__file__]
    root = CACHE / "production-shapes" / f"{name}-{_stamp(*map(Path, sources))}"
    if not (root / "done").is_file():
        write(root / "hub", REPO / "models", root / "work")
        (root / "done").write_text("ok")
    return str(root / "hub")


@pytest.fixture(scope="module")
def hub_cache(real_models) -> str:
    from speakerscribe_dev.random_models import write_production_cache

    return _cache("deploy", write_production_cache)


@pytest.fixture(scope="module")
def cache_31(real_models) -> str:
    from speakerscribe_dev.random_models import write_31_cache

    return _cache("pyannote-3.1", write_31_cache)


@pytest.fixture
def offline(monkeypatch):
    """Point this process's Hub lookups at a cache, offline (transformers and pyannote read these at call time)."""

    def use(cache: str) -> None:
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", cache)
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)

    return use


@pytest.fixture(scope="module")
def deployed(hub_cache):
    """The handler a deployment of large-v3 + distil-large-v3 + community-1 builds, by Hub ids."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", hub_cache)
        patch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
        yield make_handler(
            ASR_MODEL=LARGE_V3, ASSISTANT_MODEL=DISTIL, DIARIZATION_MODEL=COMMUNITY_1, MAX_NEW_TOKENS="6", VAD="none"
        )


@pytest.fixture(scope="module")
def clip() -> bytes:
    return wav_bytes(speechlike(9.0))


def test_tokenizers_and_generation_configs_carry_the_published_ids(hub_cache, offline):
    from transformers import AutoConfig, AutoFeatureExtractor, AutoTokenizer, GenerationConfig

    offline(hub_cache)
    for repo in (LARGE_V3, TURBO, DISTIL):
        tokenizer = AutoTokenizer.from_pretrained(repo)
        assert len(tokenizer) == VOCAB_SIZE, repo
        assert {t: tokenizer.convert_tokens_to_ids(t) for t in TOKEN_IDS} == TOKEN_IDS, repo
        generation = GenerationConfig.from_pretrained(repo).to_dict()
        assert {k: generation[k] for k in GENERATION_IDS} == GENERATION_IDS, repo
        assert generation["task_to_id"] == TASK_TO_ID, repo
        languages = generation["lang_to_id"]
        assert len(languages) == LANGUAGES and languages["<|yue|>"] == 50358 and languages["<|en|>"] == 50259
        assert all(languages[t] == tokenizer.convert_tokens_to_ids(t) for t in languages)
        config = AutoConfig.from_pretrained(repo)
        assert (config.vocab_size, config.num_mel_bins) == (VOCAB_SIZE, MEL_BINS), repo
        assert AutoFeatureExtractor.from_pretrained(repo).feature_size == MEL_BINS
        # text round-trips through the byte-level BPE, framed by large-v3's prompt ids
        ids = tokenizer("hello world").input_ids
        assert ids[:2] == [50258, 50364] and ids[-1] == 50257
        assert tokenizer.decode(ids, skip_special_tokens=True) == "hello world"


def test_handler_runs_large_v3_distil_and_community_1_by_hub_id(deployed, clip):
    from speakerscribe.diarization.pyannote_pipeline import SharedFrameDiarization

    models = deployed.transcriber.models
    assert models.asr.model.config.num_mel_bins == MEL_BINS and models.asr.assistant is not None
    assert isinstance(models.diarizer.pipeline, SharedFrameDiarization)  # ResNet34 embeddings, frames shared
    assert type(models.diarizer.pipeline.clustering).__name__ == "BoundedVBxClustering"

    plain = deployed({"inputs": clip, "parameters": {"batch_size": 1}})
    assert set(plain) >= {"text", "chunks", "speakers"} and plain["speakers"]
    assert all(s["speaker"].startswith("SPEAKER_") for s in plain["speakers"])
    assisted = deployed({"inputs": clip, "parameters": {"batch_size": 1, "assisted": True}})
    assert assisted["text"] == plain["text"] and assisted["chunks"] == plain["chunks"]

    french = deployed({"inputs": clip, "parameters": {"language": "fr", "return_timestamps": "word"}})
    words = [w for c in french["chunks"] for w in c.get("words", [])]
    assert all(0 <= w["start"] <= w["end"] <= 9.0 + 1e-6 for w in words)
    for counts, most in (({"num_speakers": 2}, 2), ({"min_speakers": 1, "max_speakers": 1}, 1)):
        out = deployed({"inputs": clip, "parameters": counts})
        assert 1 <= len({s["speaker"] for s in out["speakers"]}) <= most, counts

    known = {"Ann": base64.b64encode(wav_bytes(speechlike(4.0, seed=1))).decode()}
    named = deployed({"inputs": clip, "parameters": {"known_speakers": known, "known_speaker_threshold": -1}})
    assert "Ann" in {s["speaker"] for s in named["speakers"]}


def test_turbo_transcribes_by_hub_id(hub_cache, offline, clip):
    offline(hub_cache)
    handler = make_handler(ASR_MODEL=TURBO, MAX_NEW_TOKENS="6", VAD="none")
    assert handler.transcriber.models.asr.model.config.decoder_layers == 1
    out = handler({"inputs": clip, "parameters": {"language": "de", "return_timestamps": "word"}})
    assert set(out) >= {"text", "chunks", "speakers"} and out["speakers"] == []


def test_pyannote_31_loads_with_only_its_own_repositories(cache_31, offline, clip, random_models):
    """3.1 clusters agglomeratively and never uses a PLDA: a cache holding 3.1, segmentation-3.0 and
    wespeaker-voxceleb-resnet34-LM (what a token for 3.1 reaches) is enough."""
    from speakerscribe.diarization.pyannote_pipeline import SharedFrameDiarization

    offline(cache_31)
    # random Whisper: it always writes something, so there are speaker entries to check (tiny.en hears no words
    # in this clip's tones)
    handler = make_handler(
        ASR_MODEL=str(random_models.whisper_en), DIARIZATION_MODEL=PIPELINE_31, VAD="none", MAX_NEW_TOKENS="12"
    )
    diarizer = handler.transcriber.models.diarizer
    assert isinstance(diarizer.pipeline, SharedFrameDiarization)
    assert type(diarizer.pipeline.clustering).__name__ == "BoundedAgglomerativeClustering"
    out = handler({"inputs": clip, "parameters": {"max_speakers": 2}})
    assert out["speakers"] and all(s["speaker"].startswith("SPEAKER_") for s in out["speakers"])


def _deploy_env(hub_cache: str) -> dict[str, str]:
    return {
        "HF_HUB_CACHE": hub_cache,
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
        "ASR_MODEL": LARGE_V3,
        "ASSISTANT_MODEL": DISTIL,
        "DIARIZATION_MODEL": COMMUNITY_1,
        "MAX_NEW_TOKENS": "6",
        "VAD": "none",
    }


def test_bake_step_loads_every_deployed_model_offline(hub_cache, tmp_path):
    env = {**os.environ, **_deploy_env(hub_cache), "HF_HOME": str(tmp_path / "empty-home")}
    proc = subprocess.run(
        [sys.executable, "-m", "speakerscribe.models.loading"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-3000:]
    assert "draft model yes, diarization yes" in log, log[-3000:]


def test_server_openai_route_and_live_session_by_hub_id(hub_cache, clip, tmp_path):
    from test_server import Server
    from test_streaming import pcm16, receive_until, ws_connect

    server = Server(_deploy_env(hub_cache), tmp_path / "server.log")
    try:
        server.wait_ready(timeout=300)
        r = requests.post(
            server.url + "/v1/audio/transcriptions",
            files={"file": ("clip.wav", clip, "audio/wav")},
            data={"model": "whisper-1", "response_format": "diarized_json", "language": "en"},
            timeout=300,
        )
        assert r.status_code == 200, r.text
        segments = r.json()["segments"]
        assert segments and all(s["speaker"].startswith("SPEAKER_") for s in segments)
        with ws_connect(server, "/ws") as ws:
            assert json.loads(ws.recv())["type"] == "ready"
            data = pcm16(speechlike(6.0))
            for i in range(0, len(data), 4096):
                ws.send(data[i : i + 4096])
            ws.send("END_OF_AUDIO")
            messages = receive_until(ws, "summary", limit_s=300)
        assert not [m for m in messages if m["type"] == "error"], messages
        assert messages[-1]["type"] == "summary"
    finally:
        server.stop()
