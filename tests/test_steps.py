"""speakerscribe.asr.steps: Whisper's decoder one step at a time over the model's own weights gives transformers'
decoder's hidden states (to the last bit in float32 on these CPUs), the tight loop on it gives ``generate``'s tokens
on real recordings, and it is used only where it is right."""

from __future__ import annotations

import pytest
import torch
from conftest import REPO
from test_greedy import _hf_generate, _load, _prompt

import speakerscribe.asr.greedy as greedy
from speakerscribe.asr.attention import use_step_attention
from speakerscribe.asr.greedy import TimestampRules, greedy_decode
from speakerscribe.asr.steps import DecoderSteps, StepCache


def _stepped(path, dtype=torch.float32):
    model = _load(path).to(dtype)
    assert use_step_attention(model, by_sdpa=False)
    return model


def _real_recordings(model, path, seconds=30):
    """Encoder states of the first ``seconds`` of three real-voice conversations (recorded people; one over the
    telephone channel where the set has one), in the model's precision."""
    import soundfile as sf
    from transformers import WhisperFeatureExtractor

    from speakerscribe_dev import real_voices

    folder = real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")
    conversations = sorted(real_voices.load(folder), key=lambda c: c.uri)
    telephone = [c for c in conversations if "telephone" in str(c.wav)]
    chosen = conversations[:2] + (telephone[:1] or conversations[2:3])
    clips = []
    for conv in chosen:
        audio, rate = sf.read(str(conv.wav), dtype="float32")
        assert rate == 16_000
        clips.append(audio[: seconds * rate])
    fe = WhisperFeatureExtractor.from_pretrained(str(path))
    features = fe(clips, sampling_rate=16_000, return_tensors="pt").input_features
    with torch.inference_mode():
        return model.model.encoder(features.to(model.dtype)).last_hidden_state


def _teacher_forced(decoder, steps, states, prompt, tokens):
    """Hidden states of the prompt and of every token of ``tokens`` (rows, n), step by step, both ways: transformers'
    decoder with its cache, and :class:`DecoderSteps`."""
    theirs, ours = [], []
    cache = own = None
    with torch.inference_mode():
        inputs = [prompt] + [tokens[:, i : i + 1] for i in range(tokens.shape[1])]
        for ids in inputs:
            out = decoder(input_ids=ids, encoder_hidden_states=states, past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            theirs.append(out.last_hidden_state)
            hidden, own = steps(ids, states, own)
            ours.append(hidden)
    return theirs, ours, own


@pytest.mark.parametrize("model_name", ["whisper-tiny.en", "whisper-base"])
def test_hidden_states_equal_transformers_decoder_on_real_recordings(real_models, model_name):
    """Three real recordings, one row each and all three at once, 100 steps (the self-attention buffers grow past
    their first 64 positions): every step's hidden states equal transformers' decoder's to the last bit in float32;
    the query, key and value projections run as one fused product."""
    path = real_models / model_name
    model = _stepped(path)
    states = _real_recordings(model, path)
    rules = TimestampRules.from_generation_config(model.generation_config)
    prompt = _prompt(model, states.shape[0])
    with torch.inference_mode():
        decoded = greedy_decode(model, states, prompt, rules, 100, min_new_tokens=100)
    tokens = decoded[:, prompt.shape[1] :]
    assert tokens.shape[1] == 100 and int((tokens < rules.eos).sum()) > 150  # real words were decoded
    steps = DecoderSteps.of(model.model.decoder)
    assert all(record.qkv is not None for record in steps.layers)
    for rows in (slice(0, 1), slice(0, 3)):
        theirs, ours, cache = _teacher_forced(model.model.decoder, steps, states[rows], prompt[rows], tokens[rows, :-1])
        assert cache.length == prompt.shape[1] + 99 and cache.self_keys[0].shape[2] > 64
        for step, (a, b) in enumerate(zip(theirs, ours)):
            assert torch.equal(a, b), f"{model_name}, rows {rows}, step {step}: {float((a - b).abs().max())}"


def test_the_tight_loop_on_steps_gives_generates_tokens_on_real_recordings(real_models, monkeypatch):
    """Rows of different lengths leave the batch as they finish; every decoding call went through the steps."""
    path = real_models / "whisper-tiny.en"
    model = _stepped(path)
    calls = []
    call = DecoderSteps.__call__
    monkeypatch.setattr(DecoderSteps, "__call__", lambda self, *a, **k: (calls.append(1), call(self, *a, **k))[1])
    kept = []
    keep = greedy._keep
    monkeypatch.setattr(greedy, "_keep", lambda cache, rows, w: (kept.append(type(cache)), keep(cache, rows, w)))
    states = torch.cat([_real_recordings(model, path), _real_recordings(model, path, seconds=6)[:1]])
    rules = TimestampRules.from_generation_config(model.generation_config)
    prompt = _prompt(model, states.shape[0])
    with torch.inference_mode():
        ours = greedy_decode(model, states, prompt, rules, 160)
    theirs = _hf_generate(model, states, prompt, 160)
    assert ours.tolist() == theirs.tolist()
    assert len(calls) >= 20 and kept and set(kept) == {StepCache}  # a 6 s row finished first and left
    assert min(sum(t < rules.eos for t in row) for row in ours[:3].tolist()) > 40


@pytest.mark.parametrize("which", ["whisper_en", "whisper_ml"])
def test_the_tight_loop_on_steps_gives_generates_tokens_on_random_weights(random_models, which):
    model = _stepped(getattr(random_models, which))
    assert DecoderSteps.of(model.model.decoder) is not None
    rules = TimestampRules.from_generation_config(model.generation_config)
    timestamps = 0
    for seed in range(4):
        g = torch.Generator().manual_seed(seed)
        shape = (3, model.config.max_source_positions, model.config.d_model)
        states = torch.randn(*shape, generator=g) * (0.5 + seed)
        prompt = _prompt(model, 3)
        with torch.inference_mode():
            ours = greedy_decode(model, states, prompt, rules, 80)
        assert ours.tolist() == _hf_generate(model, states, prompt, 80).tolist(), f"seed {seed}"
        timestamps += int((ours[:, prompt.shape[1] :] >= rules.timestamp_begin).sum())
    assert timestamps > 10


def test_an_int8_copy_is_stepped_through_its_own_layers(real_models):
    """The int8 decoder copy (DECODER_QUANTIZATION=int8) is not fused (its linears are quantized modules) and its
    steps equal transformers' decoder over the same copy."""
    from speakerscribe.asr.quantized import int8_steps

    path = real_models / "whisper-tiny.en"
    model = _stepped(path)
    copy = int8_steps(model, greedy=True).decoder
    steps = DecoderSteps.of(copy)
    assert steps is not None and all(record.qkv is None for record in steps.layers)
    states = _real_recordings(model, path)[:2]
    prompt = _prompt(model, 2)
    tokens = torch.arange(1000, 1024, 2, dtype=torch.long).repeat(2, 1)  # text tokens, teacher-forced
    theirs, ours, _ = _teacher_forced(copy, steps, states, prompt, tokens)
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours))


def test_fusing_adds_no_memory_and_follows_weights_moved_since(random_models):
    """The three projections read views of one block (their old tensors are freed); a decoder cast since is fused
    again, and weights loaded in place reach the block."""
    model = _stepped(random_models.whisper_en)
    decoder = model.model.decoder
    before = sum(p.numel() for p in decoder.parameters())
    steps = DecoderSteps.of(decoder)
    attn = decoder.layers[0].self_attn
    weight, bias = steps.layers[0].qkv
    d = attn.q_proj.weight.shape[0]
    assert attn.q_proj.weight.data_ptr() == weight.data_ptr()
    assert attn.v_proj.weight.data_ptr() == weight[2 * d].data_ptr()
    assert sum(p.numel() for p in decoder.parameters()) == before
    assert torch.equal(bias[d : 2 * d], torch.zeros(d))  # k_proj has no bias
    assert DecoderSteps.of(decoder).layers[0].qkv[0] is weight  # made once

    model.double()
    assert all(record.qkv is None for record in DecoderSteps.of(decoder).layers)  # float64: not fused
    model.float()
    again = DecoderSteps.of(decoder).layers[0].qkv[0]
    assert again is not weight and attn.q_proj.weight.data_ptr() == again.data_ptr()

    with torch.no_grad():
        attn.k_proj.weight.mul_(2.0)  # in place, as load_state_dict copies
    assert torch.equal(again[d : 2 * d], attn.k_proj.weight)

    states = torch.randn(2, model.config.max_source_positions, model.config.d_model)
    prompt = _prompt(model, 2)
    theirs, ours, _ = _teacher_forced(decoder, DecoderSteps.of(decoder), states, prompt, prompt[:, -1:].repeat(1, 5))
    assert all(torch.equal(a, b) for a, b in zip(theirs, ours))


def test_used_only_for_a_cpu_decoder_set_to_the_step_attention(random_models):
    model = _load(random_models.whisper_en)  # transformers' sdpa: a deployer's choice, or the static cache
    assert DecoderSteps.of(model.model.decoder) is None
    model.config._attn_implementation = "eager"
    assert DecoderSteps.of(model.model.decoder) is None
    assert use_step_attention(model, by_sdpa=True)
    steps = DecoderSteps.of(model.model.decoder)
    assert steps is not None and steps.single_by_sdpa
    assert DecoderSteps.of(torch.nn.Linear(4, 4)) is None  # not Whisper's layout
    model.to("meta")
    assert DecoderSteps.of(model.model.decoder) is None  # not on the CPU


def test_the_cache_grows_and_keeps_rows_without_losing_positions():
    g = torch.Generator().manual_seed(0)
    cache = StepCache([torch.randn(2, 2, 5, 3, generator=g)], [torch.randn(2, 2, 5, 3, generator=g)])
    written = [torch.randn(2, 2, 4, 3, generator=g)]  # a 4-token prompt
    keys, _ = cache.append(0, written[0], written[0] * 2)
    cache.length = 4
    for _ in range(150):
        written.append(torch.randn(2, 2, 1, 3, generator=g))
        keys, values = cache.append(0, written[-1], written[-1] * 2)
        cache.length += 1
    expected = torch.cat(written, dim=2)
    assert torch.equal(keys, expected) and torch.equal(values, expected * 2)
    assert cache.self_keys[0].shape[2] >= 154
    cache.keep_rows(torch.tensor([1, 1, 0]))  # a row repeated: rows that share a window's prompt
    keys, _ = cache.append(0, torch.zeros(3, 2, 1, 3), torch.zeros(3, 2, 1, 3))
    assert torch.equal(keys[:, :, :154], expected[[1, 1, 0]]) and keys.shape[2] == 155
    assert cache.self_keys[0].shape[:2] == (3, 2)
    cross = cache.cross_keys[0]
    cache.keep_windows(torch.tensor([1]))
    assert torch.equal(cache.cross_keys[0], cross[1:2])
