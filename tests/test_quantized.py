"""int8 decoding steps on a CPU (speakerscribe.asr.quantized): when they are used, that the model itself is left
as it is, that the int8 decoder computes what the model's decoder computes (within int8's rounding), that the
engine's tight loop runs on it, and the words on real weights."""

from __future__ import annotations

import pytest
from conftest import make_handler

from speakerscribe.asr import quantized
from speakerscribe.errors import ModelLoadError
from speakerscribe_dev.conversation import MEETING, synthesize
from speakerscribe_dev.evaluation import normalise, wer


def test_sampled_is_for_the_fallbacks_sampled_attempts_and_int8_for_every_step(random_models):
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(str(random_models.whisper_en), dtype=torch.float32)
    sampled, every = quantized.int8_steps(model), quantized.int8_steps(model, greedy=True)
    assert not sampled.used_for(0.0) and sampled.used_for(0.2) and sampled.used_for(1.0)
    assert every.used_for(0.0) and every.used_for(0.4)


@pytest.mark.parametrize("choice, used", [("none", False), ("screened", False), ("sampled", True), ("int8", True)])
def test_on_a_cpu_int8_weights_are_made_unless_none(choice, used):
    assert quantized.use_int8_steps(choice, "cpu", True) is used


@pytest.mark.parametrize("choice", ["sampled", "int8"])
@pytest.mark.parametrize(
    "device, greedy_loop, needle",
    [("cuda", True, "runs on cuda"), ("mps", True, "runs on mps"), ("cpu", False, "STATIC_CACHE")],
)
def test_int8_asked_where_it_cannot_run_is_an_error_saying_why(choice, device, greedy_loop, needle):
    with pytest.raises(ModelLoadError, match=needle):
        quantized.use_int8_steps(choice, device, greedy_loop)
    assert quantized.use_int8_steps("none", device, greedy_loop) is False


def test_no_quantized_kernels_is_an_error_saying_so(monkeypatch):
    monkeypatch.setattr(quantized, "int8_engine", lambda: None)
    with pytest.raises(ModelLoadError, match="no quantized CPU kernels"):
        quantized.use_int8_steps("int8", "cpu", True)


def test_an_unknown_choice_names_the_accepted_ones():
    with pytest.raises(ModelLoadError, match="screened, none, sampled, int8"):
        quantized.use_int8_steps("fp8", "cpu", True)


def test_the_setting_is_validated_with_the_accepted_values_and_defaults_to_screened():
    from pydantic import ValidationError

    from speakerscribe.models.settings import ModelSettings

    with pytest.raises(ValidationError, match="'screened', 'none', 'sampled' or 'int8'"):
        ModelSettings.given(decoder_quantization="fp4")
    assert ModelSettings.given().decoder_quantization == "screened"


def test_int8_decoder_computes_what_the_models_decoder_does_and_leaves_the_model(random_models):
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(str(random_models.whisper_en), dtype=torch.float32).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    steps = quantized.int8_steps(model)
    # the model is untouched: same weights, still plain linear layers
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert type(model.model.decoder.layers[0].fc1) is torch.nn.Linear
    assert type(steps.decoder.layers[0].fc1) is not torch.nn.Linear
    torch.manual_seed(0)
    states = torch.randn(2, 1500, model.config.d_model)
    ids = torch.tensor([[model.generation_config.decoder_start_token_id, 5, 9, 11]] * 2)
    with torch.inference_mode():
        ref = model.model.decoder(input_ids=ids, encoder_hidden_states=states).last_hidden_state
        got = steps.decoder(input_ids=ids, encoder_hidden_states=states).last_hidden_state
        ref_logits, got_logits = model.proj_out(ref[:, -1]), steps.projection(got[:, -1])
    assert got.dtype == torch.float32 and got_logits.shape == ref_logits.shape
    cos = torch.nn.functional.cosine_similarity(ref.flatten(1), got.flatten(1)).min().item()
    assert cos > 0.99, cos
    assert torch.nn.functional.cosine_similarity(ref_logits, got_logits).min().item() > 0.99
    # and the int8 rounding is real (this is not the float decoder under another name)
    assert not torch.allclose(ref, got)


def test_which_decodings_step_on_int8_sampled_ones_or_all_or_none(random_models, monkeypatch):
    import io

    import numpy as np
    import soundfile as sf

    from speakerscribe.asr import decoding

    handlers = {
        choice: make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8", DECODER_QUANTIZATION=choice)
        for choice in ("sampled", "int8", "none")
    }
    assert handlers["none"].transcriber.models.asr.int8_steps is None
    seen, real = [], decoding.greedy_decode

    def spy(model, states, *args, decoder=None, temperature=0.0, **kwargs):
        seen.append((decoder, temperature, states.dtype, model.dtype))
        return real(model, states, *args, decoder=decoder, temperature=temperature, **kwargs)

    monkeypatch.setattr(decoding, "greedy_decode", spy)
    buf = io.BytesIO()
    sf.write(buf, np.random.default_rng(0).normal(0, 0.1, 32000).astype(np.float32), 16000, format="WAV")
    # random weights fail every window (loops, low confidence), so greedy attempts are followed by sampled ones
    request = {"inputs": buf.getvalue(), "parameters": {"vad_filter": False}}
    for choice, handler in handlers.items():
        seen.clear()
        handler(request)
        steps = handler.transcriber.models.asr.int8_steps
        # the fallback's temperatures go side by side, a tuple of one a row
        greedy = [d for d, t, _, _ in seen if t == 0]
        sampled = [d for d, t, _, _ in seen if (min(t) if isinstance(t, tuple) else t) > 0]
        assert greedy and sampled, choice
        assert all(s == m for _, _, s, m in seen)  # attention stays in the model's precision
        if choice == "none":
            assert all(d is None for d in greedy + sampled)
        else:
            assert all(d is steps.decoder for d in sampled)
            assert all(d is (steps.decoder if choice == "int8" else None) for d in greedy), choice


def test_int8_steps_write_the_words_of_the_models_own_weights(real_models, speech_dir):
    """tiny.en through the whole handler on the festival meeting, in float32 on both sides so only the int8 steps
    differ. The encoder, the scoring pass and the word times stay on the model's weights."""
    conv = synthesize(MEETING, speech_dir, "meeting")
    texts = {}
    for choice in ("none", "int8"):
        handler = make_handler(
            ASR_MODEL=str(real_models / "whisper-tiny.en"), TORCH_DTYPE="float32", DECODER_QUANTIZATION=choice
        )
        assert (handler.transcriber.models.asr.int8_steps is not None) == (choice == "int8")
        texts[choice] = handler({"inputs": conv.wav.read_bytes()})["text"]
    # measured: 0.082 both, differing in a few words each way ("joining them today" / "joining the call today")
    assert wer(conv.reference_text, texts["int8"]) <= wer(conv.reference_text, texts["none"]) + 0.02
    assert wer(normalise(texts["none"]), normalise(texts["int8"])) <= 0.10


def test_in_bfloat16_only_the_linears_are_int8_and_the_rest_keeps_the_models_precision(random_models):
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(str(random_models.whisper_en), dtype=torch.bfloat16).eval()
    steps = quantized.int8_steps(model)
    floats = {p.dtype for p in steps.decoder.parameters()}
    assert floats == {torch.bfloat16}  # embeddings and layer norms; the int8 weights are packed, not parameters
    assert not any(isinstance(m, torch.nn.Linear) for m in steps.decoder.modules())
    states = torch.randn(1, 1500, model.config.d_model, dtype=torch.bfloat16)
    ids = torch.tensor([[model.generation_config.decoder_start_token_id, 5]])
    with torch.inference_mode():
        hidden = steps.decoder(input_ids=ids, encoder_hidden_states=states).last_hidden_state
        logits = steps.projection(hidden[:, -1])
    assert hidden.dtype == torch.bfloat16 and logits.dtype == torch.float32
    assert logits.shape == (1, model.proj_out.out_features) and bool(torch.isfinite(logits).all())
