"""Whisper's decoder linears packed for oneDNN in bfloat16 (speakerscribe.asr.packed): the same products as
``nn.Linear``, hooks still see them, only the decoder of a bfloat16 CPU model is packed, and greedy tokens on real
speech are those of the plain layers. On a CPU whose oneDNN has no bfloat16 kernels nothing is packed, and the
tests check that instead."""

from __future__ import annotations

import pytest

from speakerscribe.asr import packed


def _can_pack() -> bool:
    import torch

    return packed.packing_available(torch.nn.Linear(2, 2).to(torch.bfloat16).weight)


def test_a_packed_linear_computes_what_the_linear_does_and_its_hooks_fire():
    import torch

    if not _can_pack():
        pytest.skip("this CPU's oneDNN has no bfloat16 kernels: nothing is packed here (the next test checks that)")

    layer = packed._packed_linear_class()
    g = torch.Generator().manual_seed(0)
    seen = []
    for bias in (True, False):
        linear = torch.nn.Linear(384, 1536, bias=bias).to(torch.bfloat16)
        twin = layer(linear)
        twin.register_forward_hook(lambda m, i, o: seen.append(o.shape))
        for shape in ((1, 384), (3, 1, 384), (2, 5, 384)):
            x = torch.randn(*shape, generator=g).to(torch.bfloat16)
            with torch.inference_mode():
                want, got = linear(x), twin(x)
            assert got.shape == want.shape and got.dtype == torch.bfloat16
            torch.testing.assert_close(got.float(), want.float(), rtol=0.02, atol=0.05)
    assert seen == [(1, 1536), (3, 1, 1536), (2, 5, 1536)] * 2


def test_only_the_decoder_of_a_bfloat16_cpu_model_is_packed(random_models):
    import torch
    from transformers import WhisperForConditionalGeneration

    path = str(random_models.whisper_en)
    full = WhisperForConditionalGeneration.from_pretrained(path, dtype=torch.float32)
    assert packed.pack_decoder_linears(full) == 0 and not packed.packing_available(full)
    model = WhisperForConditionalGeneration.from_pretrained(path, dtype=torch.bfloat16)
    linears = sum(type(m) is torch.nn.Linear for m in model.model.decoder.modules())
    if not _can_pack():
        assert packed.pack_decoder_linears(model) == 0 and linears == 10 * model.config.decoder_layers
        return
    assert packed.pack_decoder_linears(model) == linears == 10 * model.config.decoder_layers
    assert not any(type(m) is torch.nn.Linear for m in model.model.decoder.modules())
    assert any(type(m) is torch.nn.Linear for m in model.model.encoder.modules())
    assert type(model.proj_out) is torch.nn.Linear


def test_greedy_tokens_on_real_speech_are_those_of_the_plain_layers(real_models):
    """tiny.en in bfloat16 on three windows of the festival meeting, through the tight loop."""
    import torch
    from test_greedy import _meeting_states, _prompt
    from transformers import WhisperForConditionalGeneration

    from speakerscribe.asr.greedy import TimestampRules, greedy_decode

    path = real_models / "whisper-tiny.en"
    model = WhisperForConditionalGeneration.from_pretrained(str(path), dtype=torch.bfloat16).eval()
    rules = TimestampRules.from_generation_config(model.generation_config)
    states = _meeting_states(model, path)
    prompt = _prompt(model, states.shape[0])
    with torch.inference_mode():
        plain = greedy_decode(model, states, prompt, rules, 160)
        assert (packed.pack_decoder_linears(model) > 0) == _can_pack()
        ours = greedy_decode(model, states, prompt, rules, 160)
    assert ours.tolist() == plain.tolist()
    assert sum(t < rules.eos for t in ours[0].tolist()) > 30  # real words


def test_the_engine_packs_a_bfloat16_cpu_decoder(random_models):
    import torch

    from speakerscribe.asr.engine import WhisperEngine
    from speakerscribe.runtime import resolve_placement

    bf16 = WhisperEngine.load(str(random_models.whisper_en), resolve_placement("cpu", "bfloat16"))
    fp32 = WhisperEngine.load(str(random_models.whisper_en), resolve_placement("cpu", "float32"))
    assert any(type(m) is torch.nn.Linear for m in bf16.model.model.decoder.modules()) != _can_pack()
    assert any(type(m) is torch.nn.Linear for m in fp32.model.model.decoder.modules())
