"""Per-request parameters and deployment settings: names, defaults, validation messages, secrets."""

from __future__ import annotations

import pytest
from conftest import environment

from speakerscribe.errors import InputError
from speakerscribe.models.settings import VALID_PARAMETERS, InferenceConfig, ModelSettings, parse_parameters

ORIGINAL = {
    "task": "transcribe",
    "batch_size": 24,
    "assisted": False,
    "chunk_length_s": 30,
    "sampling_rate": 16000,
    "language": None,
    "num_speakers": None,
    "min_speakers": None,
    "max_speakers": None,
}


def test_original_names_and_defaults():
    cfg = parse_parameters({})
    for name, default in ORIGINAL.items():
        assert getattr(cfg, name) == default, name
    assert list(VALID_PARAMETERS)[: len(ORIGINAL)] == list(ORIGINAL)


def test_none_parameters_mean_defaults():
    assert parse_parameters(None) == InferenceConfig()


def test_unknown_parameters_are_named_with_the_valid_ones():
    with pytest.raises(InputError) as err:
        parse_parameters({"batch_size": 2, "beam_size": 5, "diarize": True})
    msg = str(err.value)
    assert "'beam_size'" in msg and "'diarize'" in msg
    for name in ORIGINAL:
        assert name in msg


@pytest.mark.parametrize(
    "params, needle",
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 1000}, "batch_size"),
        ({"chunk_length_s": 45}, "chunk_length_s"),
        ({"chunk_length_s": 0}, "chunk_length_s"),
        ({"task": "summarise"}, "task"),
        ({"sampling_rate": 0}, "sampling_rate"),
        ({"num_speakers": 0}, "num_speakers"),
        ({"num_speakers": 2, "min_speakers": 1}, "num_speakers"),
        ({"min_speakers": 3, "max_speakers": 2}, "min_speakers"),
        ({"max_speakers": 0}, "max_speakers"),
        ({"assisted": True, "batch_size": 8}, "batch_size"),
        ({"assisted": "sometimes"}, "assisted"),
        ({"return_timestamps": "sentence"}, "return_timestamps"),
    ],
)
def test_invalid_values_say_what_is_wrong(params, needle):
    with pytest.raises(InputError) as err:
        parse_parameters(params)
    assert needle in str(err.value)


def test_query_string_values_are_coerced_like_the_runtime_sends_them():
    cfg = parse_parameters({"batch_size": "4", "assisted": "false", "num_speakers": "2"})
    assert (cfg.batch_size, cfg.assisted, cfg.num_speakers) == (4, False, 2)


def test_assisted_alone_is_valid_and_auto_is_accepted():
    assert parse_parameters({"assisted": True}).assisted is True
    assert parse_parameters({"assisted": "auto", "batch_size": 16}).assisted == "auto"


def test_parameters_must_be_an_object():
    with pytest.raises(InputError, match="JSON object"):
        parse_parameters(["task"])


def test_word_timestamps_switch():
    assert parse_parameters({"return_timestamps": "word"}).word_timestamps
    assert not parse_parameters({"return_timestamps": True}).word_timestamps


def test_model_settings_read_at_construction_and_token_is_secret():
    with environment(
        ASR_MODEL="some/model", ASSISTANT_MODEL="", DIARIZATION_MODEL=None, HF_TOKEN="hf_topsecret", DEVICE="CPU"
    ):
        s = ModelSettings()
    assert s.asr_model == "some/model"
    assert s.assistant_model is None  # blank env var = not set
    assert s.device == "cpu"
    assert s.token() == "hf_topsecret"
    assert "hf_topsecret" not in repr(s) and "hf_topsecret" not in str(s)
    assert "hf_topsecret" not in s.model_dump_json()


def test_bad_device_setting_is_rejected():
    with environment(DEVICE="gpu"), pytest.raises(ValueError, match="DEVICE"):
        ModelSettings()


def test_config_module_keeps_the_original_import_path():
    import config

    assert config.InferenceConfig is InferenceConfig and config.ModelSettings is ModelSettings
    # nothing is read from the environment at import time
    assert not hasattr(config, "model_settings")


def test_every_field_error_is_reported_together_with_pydantics_words():
    with pytest.raises(InputError) as err:
        parse_parameters({"num_speakers": 0, "batch_size": 0, "max_speakers": 100})
    message = str(err.value)
    for name in ("num_speakers", "batch_size", "max_speakers"):
        assert f"`{name}`" in message
    assert "greater than or equal to 1" in message and "less than or equal to 64" in message
