"""The pyannote pipelines users deploy, by Hub id from an offline Hugging Face cache (random weights in the published
layouts, speakerscribe_dev.hub_pipelines): 3.1 loads from its own repositories alone (its clustering never uses a
PLDA, which pyannote.audio 4 would otherwise fetch from community-1); a VBx pipeline whose PLDA is missing fails
naming the file, the repository and what the token must reach."""

from __future__ import annotations

import base64

import huggingface_hub.constants
import pytest
from audio_helpers import wav_bytes
from conftest import make_handler
from test_handler import speechlike

from speakerscribe.errors import ModelLoadError
from speakerscribe_dev.hub_pipelines import COMMUNITY_1, write_3_1, write_community_1


@pytest.fixture(scope="module")
def wespeaker_weights(tmp_path_factory):
    from speakerscribe_dev.random_models import write_random_pipeline

    return write_random_pipeline(tmp_path_factory.mktemp("weights") / "pipeline", seed=0, embedding="wespeaker")


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty Hugging Face cache of this test's own, offline, as HF_HOME/HF_HUB_CACHE would name it (huggingface_hub
    read those when it was imported, so its constant is pointed here too)."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    assert huggingface_hub.constants.HF_HUB_OFFLINE, "these tests must not reach the Hub: HF_HUB_OFFLINE=1"
    return cache


def request(handler, seconds: float = 6.0) -> dict:
    audio = base64.b64encode(wav_bytes(speechlike(seconds))).decode()
    return handler({"inputs": audio, "parameters": {"vad_filter": False}})


def test_3_1_loads_from_its_own_repositories_and_diarizes(hub_cache, wespeaker_weights, random_models):
    from speakerscribe.diarization.pyannote_loading import UnusedPLDA

    model_id = write_3_1(hub_cache, wespeaker_weights)
    handler = make_handler(ASR_MODEL=str(random_models.whisper_en), DIARIZATION_MODEL=model_id, MAX_NEW_TOKENS="8")
    pipeline = handler.transcriber.models.diarizer.pipeline
    assert type(pipeline.clustering).__name__ == "BoundedAgglomerativeClustering"
    assert isinstance(pipeline._plda, UnusedPLDA)
    assert type(pipeline._embedding.model_).__name__ == "WeSpeakerResNet34"
    response = request(handler)
    assert response["speakers"], "3.1 should attribute the random model's text to speakers"
    assert all(u["speaker"].startswith("SPEAKER_") for u in response["speakers"])
    assert sorted(p.name for p in hub_cache.iterdir()) == [
        "models--pyannote--segmentation-3.0",
        "models--pyannote--speaker-diarization-3.1",
        "models--pyannote--wespeaker-voxceleb-resnet34-LM",
    ], "nothing else was fetched or looked for"


def test_community_1_loads_its_own_plda_and_diarizes(hub_cache, wespeaker_weights, random_models):
    model_id = write_community_1(hub_cache, wespeaker_weights)
    handler = make_handler(ASR_MODEL=str(random_models.whisper_en), DIARIZATION_MODEL=model_id, MAX_NEW_TOKENS="8")
    pipeline = handler.transcriber.models.diarizer.pipeline
    assert type(pipeline.clustering).__name__ == "BoundedVBxClustering"
    assert pipeline.clustering.plda.lda_dimension == 128
    assert request(handler)["speakers"]


def test_a_missing_plda_names_the_file_the_repository_and_the_token(hub_cache, wespeaker_weights, random_models):
    model_id = write_community_1(hub_cache, wespeaker_weights, plda=False)
    with pytest.raises(ModelLoadError) as caught:
        make_handler(ASR_MODEL=str(random_models.whisper_en), DIARIZATION_MODEL=model_id)
    message = str(caught.value)
    assert "plda/xvec_transform.npz" in message
    assert f"repository {COMMUNITY_1}" in message
    assert f"HF_TOKEN must reach {COMMUNITY_1}" in message and f"https://hf.co/{COMMUNITY_1}" in message
