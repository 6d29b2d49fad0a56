"""The tight greedy loop (speakerscribe.asr.greedy) against transformers' own ``generate`` with Whisper's timestamp
processor: token for token the same sequences, on random weights (timestamps land anywhere, so every rule is hit)
and on real weights and speech; and the engine really uses it."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.asr.greedy import TimestampRules, greedy_decode


def _hf_generate(
    model, encoder_states, prompt, max_new, stop=None, temperature=0.0, min_new=None, begin_index=None, suppress=True
):
    """``GenerationMixin.generate`` as the engine called it before the tight loop: greedy, or sampled at
    ``temperature`` from the process-wide generator; ``min_new`` forbids end-of-text for that many tokens.
    ``begin_index``: where the timestamp rules start reading (tokens of ``prompt`` from there on count as generated);
    ``suppress=False`` leaves out the tokens suppressed at the first step."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
    from transformers.generation.logits_process import WhisperTimeStampLogitsProcessor
    from transformers.generation.utils import GenerationMixin
    from transformers.modeling_outputs import BaseModelOutput

    gen = model.generation_config
    eos = gen.eos_token_id if not isinstance(gen.eos_token_id, list) else gen.eos_token_id[0]
    config = GenerationConfig(
        decoder_start_token_id=gen.decoder_start_token_id,
        eos_token_id=eos,
        pad_token_id=eos,
        bos_token_id=eos,
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_k=0 if temperature > 0 else None,
        num_beams=1,
        max_length=prompt.shape[1] + max_new,
        min_new_tokens=min_new,
        suppress_tokens=list(gen.suppress_tokens or []) or None,
        begin_suppress_tokens=(list(gen.begin_suppress_tokens or []) or None) if suppress else None,
    )
    kwargs = {"stopping_criteria": StoppingCriteriaList([stop])} if stop is not None else {}
    with torch.inference_mode():
        return GenerationMixin.generate(
            model,
            encoder_outputs=BaseModelOutput(last_hidden_state=encoder_states),
            decoder_input_ids=prompt,
            generation_config=config,
            logits_processor=LogitsProcessorList(
                [WhisperTimeStampLogitsProcessor(gen, begin_index=begin_index or prompt.shape[1])]
            ),
            **kwargs,
        )


def _load(path):
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(str(path), attn_implementation="sdpa", dtype=torch.float32)
    return model.eval()


def _prompt(model, batch, extra=()):
    import torch

    gen = model.generation_config
    ids = [int(gen.decoder_start_token_id)]
    if getattr(gen, "is_multilingual", False):
        ids += [int(gen.lang_to_id["<|en|>"]), int(gen.task_to_id["transcribe"])]
    return torch.tensor([list(extra) + ids], dtype=torch.long).repeat(batch, 1)


def _random_states(model, seed: int, rows: int = 3):
    """Random encoder states for ``rows`` windows, scaled by the seed so that both timestamps and text come out."""
    import torch

    g = torch.Generator().manual_seed(seed)
    return torch.randn(rows, model.config.max_source_positions, model.config.d_model, generator=g) * (0.5 + seed)


@pytest.mark.parametrize("which", ["whisper_en", "whisper_ml"])
def test_same_tokens_as_generate_on_random_weights(random_models, which):
    import torch

    model = _load(getattr(random_models, which))
    rules = TimestampRules.from_generation_config(model.generation_config)
    compared = timestamps = 0
    for seed in range(6):
        states = _random_states(model, seed)
        prompt = _prompt(model, 3)
        with torch.inference_mode():
            ours = greedy_decode(model, states, prompt, rules, 40)
        theirs = _hf_generate(model, states, prompt, 40)
        assert ours.tolist() == theirs.tolist(), f"seed {seed}"
        compared += ours.numel()
        timestamps += int((ours[:, prompt.shape[1] :] >= rules.timestamp_begin).sum())
    # the comparison means something only if both kinds of token were generated
    assert timestamps > 10 and compared - timestamps > 10


def test_same_tokens_as_generate_on_real_speech(real_models, monkeypatch):
    """Rows of different lengths (30 s, 12 s and 4 s of speech): the short ones finish first and leave the batch,
    and the tokens are still generate's."""
    import torch

    import speakerscribe.asr.greedy as greedy

    kept = []
    keep_rows = greedy._keep
    monkeypatch.setattr(
        greedy, "_keep", lambda cache, rows, windows: (kept.append(rows.tolist()), keep_rows(cache, rows, windows))
    )

    path = real_models / "whisper-tiny.en"
    model = _load(path)
    rules = TimestampRules.from_generation_config(model.generation_config)
    states = _meeting_states(model, path)
    prompt = _prompt(model, states.shape[0])
    with torch.inference_mode():
        ours = greedy_decode(model, states, prompt, rules, 120)
    theirs = _hf_generate(model, states, prompt, 120)
    assert ours.tolist() == theirs.tolist()
    assert kept and len(kept[-1]) < states.shape[0]  # finished rows were dropped on the way
    text = [t for t in ours[0].tolist() if t < rules.eos]
    assert len(text) > 30  # real words were decoded


def test_stops_on_loops_where_generate_stops(random_models):
    """With the engine's stop-on-loop criterion both ways: the same rows stop at the same token."""
    import torch

    from speakerscribe.asr.decoding import StopOnLoop as _StopOnLoop
    from speakerscribe.asr.tokens import ends_in_loop, text_token_ids

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    prompt = _prompt(model, 4)
    stopped_early = 0
    for seed in range(4):
        g = torch.Generator().manual_seed(100 + seed)
        states = torch.randn(4, model.config.max_source_positions, model.config.d_model, generator=g)
        with torch.inference_mode():
            ours = greedy_decode(
                model, states, prompt, rules, 120, stop_row=lambda t: ends_in_loop(text_token_ids(t[-160:], rules.eos))
            )
        theirs = _hf_generate(model, states, prompt, 120, stop=_StopOnLoop(prompt.shape[1], rules.eos))
        assert ours.tolist() == theirs.tolist(), f"seed {seed}"
        for row in ours[:, prompt.shape[1] :].tolist():
            stopped_early += ends_in_loop(text_token_ids(row, rules.eos))
    assert stopped_early > 0  # random weights loop: the criterion was exercised


def _speech_dir():
    from conftest import CACHE

    path = CACHE / "speech"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _meeting_states(model, path):
    """The encoder states of three windows of the festival meeting (30 s, 12 s and 4 s of speech), in the model's
    precision: rows that finish at different times."""
    import soundfile as sf
    import torch
    from transformers import WhisperFeatureExtractor

    from speakerscribe_dev.conversation import MEETING, synthesize

    fe = WhisperFeatureExtractor.from_pretrained(str(path))
    audio, rate = sf.read(str(synthesize(MEETING, _speech_dir(), "meeting").wav), dtype="float32")
    clips = [audio[: 30 * rate], audio[10 * rate : 22 * rate], audio[30 * rate : 34 * rate]]
    features = fe(clips, sampling_rate=rate, return_tensors="pt").input_features
    with torch.inference_mode():
        return model.model.encoder(features.to(model.dtype)).last_hidden_state


def test_sampling_draws_what_generate_draws_from_the_same_seed(random_models):
    """Sampled, the loop takes its own generator; seeded like the global one, the tokens are generate's with
    do_sample, so the loop samples from the same distribution (rules, then temperature) in the same order."""
    import torch

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    prompt = _prompt(model, 3)
    differs_from_greedy = 0
    for seed, temperature in [(0, 0.2), (1, 0.6), (2, 1.0), (3, 1.0)]:
        g = torch.Generator().manual_seed(50 + seed)
        states = torch.randn(3, model.config.max_source_positions, model.config.d_model, generator=g)
        with torch.inference_mode():
            ours = greedy_decode(
                model, states, prompt, rules, 40, temperature=temperature, generator=torch.Generator().manual_seed(seed)
            )
            greedy = greedy_decode(model, states, prompt, rules, 40)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            theirs = _hf_generate(model, states, prompt, 40, temperature=temperature)
        assert ours.tolist() == theirs.tolist(), f"seed {seed}, temperature {temperature}"
        differs_from_greedy += ours.tolist() != greedy.tolist()
    assert differs_from_greedy >= 2  # the draws mattered
    with pytest.raises(ValueError, match="Generator"):
        greedy_decode(model, states, prompt, rules, 4, temperature=0.5)


def test_one_temperature_a_row_leaves_greedy_rows_greedy_and_samples_the_others(random_models):
    """The fallback's temperatures side by side: rows at 0 are exactly the greedy rows of a greedy decoding of the
    same batch, while rows leave the batch (a row whose first token is even stops after three), so each row keeps
    its own temperature as the batch shrinks; the sampled rows differ from greedy, and the draws are seeded."""
    import torch

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    prompt = _prompt(model, 6)
    states = torch.randn(
        6, model.config.max_source_positions, model.config.d_model, generator=torch.Generator().manual_seed(7)
    )
    temperatures = (0.0, 1.0, 0.0, 0.8, 0.0, 1.0)
    stopped_early = []

    def stop(row):
        if len(row) >= 3 and row[0] % 2 == 0:
            stopped_early.append(row[0])
            return True
        return False

    def run(temperature, seed=None):
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        with torch.inference_mode():
            return greedy_decode(
                model, states, prompt, rules, 30, stop, temperature=temperature, generator=generator
            ).tolist()

    greedy, mixed = run(0.0), run(temperatures, seed=5)
    assert stopped_early  # rows left the batch during the decoding
    for row, t in enumerate(temperatures):
        if t == 0:
            assert mixed[row] == greedy[row], row
    assert any(mixed[row] != greedy[row] for row, t in enumerate(temperatures) if t > 0)
    assert run(temperatures, seed=5) == mixed
    with pytest.raises(ValueError, match="Generator"):
        run(temperatures)


def test_engine_decodes_with_the_tight_loop(random_models, monkeypatch):
    """The engine's greedy and sampled decodings go through greedy_decode; sampling with a generator of its own."""
    import speakerscribe.asr.decoding as decoding
    import speakerscribe.asr.engine as asr
    from speakerscribe.options import AsrOptions
    from speakerscribe.records import Span, Waveform
    from speakerscribe.runtime import resolve_placement

    engine = asr.WhisperEngine.load(str(random_models.whisper_en), resolve_placement("cpu"))
    calls = []
    real = decoding.greedy_decode

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "greedy_decode", spy)
    audio = Waveform((0.1 * np.random.default_rng(0).standard_normal(16000 * 3)).astype(np.float32))
    no_retry = dict(fallback_temperatures=())
    engine.transcribe(audio, [Span(0.0, 3.0)], AsrOptions(temperature=0.0, **no_retry))
    assert calls and all(c["temperature"] == 0 and c["generator"] is None for c in calls)
    calls.clear()
    engine.transcribe(audio, [Span(0.0, 3.0)], AsrOptions(temperature=0.5, **no_retry))
    assert calls and all(c["temperature"] == 0.5 and c["generator"] is not None for c in calls)


def test_sampled_words_do_not_depend_on_other_threads_drawing_random_numbers(random_models):
    """A sampled request gives the same tokens whatever other threads do with torch's process-wide generator
    meanwhile: other requests sampling beside it (the concurrent-requests flake in CI) or anything else drawing.
    Seeding and drawing from the global generator, a thread drawing beside the decoding changes its tokens."""
    import threading

    import torch

    import speakerscribe.asr.engine as asr
    from speakerscribe.options import AsrOptions
    from speakerscribe.records import Span, Waveform
    from speakerscribe.runtime import resolve_placement

    engine = asr.WhisperEngine.load(str(random_models.whisper_en), resolve_placement("cpu"), max_new_tokens=48)
    audio = Waveform((0.1 * np.random.default_rng(3).standard_normal(16000 * 8)).astype(np.float32))
    windows = [Span(0.0, 4.0), Span(4.0, 8.0)]
    opts = AsrOptions(temperature=1.0, fallback_temperatures=())

    def tokens():
        return engine.transcribe(audio, windows, opts).chunks

    quiet = tokens()
    stop = threading.Event()

    def draw():
        while not stop.wait(0.001):  # a draw every millisecond: dozens during each decoding
            torch.rand(1)

    drawer = threading.Thread(target=draw)
    drawer.start()
    try:
        busy = [tokens() for _ in range(2)]
    finally:
        stop.set()
        drawer.join()
    assert all(b == quiet for b in busy)
    assert "".join(c.text for c in quiet).strip()  # something was sampled


def test_check_runs_before_every_step_and_its_exception_stops_decoding(random_models):
    import torch

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    states = torch.randn(2, model.config.max_source_positions, model.config.d_model)
    prompt = _prompt(model, 2)
    calls = []

    class Stop(Exception):
        pass

    def check():
        calls.append(1)
        if len(calls) == 5:
            raise Stop

    with torch.inference_mode(), pytest.raises(Stop):
        greedy_decode(model, states, prompt, rules, 40, check=check)
    assert len(calls) == 5
    calls.clear()
    with torch.inference_mode():
        out = greedy_decode(model, states, prompt, rules, 3, check=lambda: calls.append(1))
    assert len(calls) == out.shape[1] - prompt.shape[1] == 3


def test_forced_token_counts_run_the_tight_loop_and_equal_generate(random_models):
    """Benchmarks on random weights force a token count per window (``engine.min_new_tokens``): the tight loop
    forbids end-of-text for that many steps, decodes exactly that many tokens in every row, and gives what
    ``generate`` gives with ``min_new_tokens`` (which the engine used for them before, so GPU benchmarks measured
    transformers' loop instead of the one requests run)."""
    import torch

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    states = torch.randn(3, model.config.max_source_positions, model.config.d_model, generator=torch.manual_seed(3))
    prompt = _prompt(model, 3)
    with torch.inference_mode():
        chosen = greedy_decode(model, states, prompt, rules, 30)[:, prompt.shape[1] :]
    with torch.no_grad():  # end-of-text made likelier than the token these rows choose most: unforced, they end early
        text = chosen[chosen < rules.eos]  # (end-of-text counts as text against the timestamps' mass)
        model.proj_out.weight[rules.eos] = 3.0 * model.proj_out.weight[int(text.mode().values)]
    with torch.inference_mode():
        free = greedy_decode(model, states, prompt, rules, 30)
        forced = greedy_decode(model, states, prompt, rules, 30, min_new_tokens=30)
    new = forced[:, prompt.shape[1] :]
    assert new.shape == (3, 30) and not bool((new == rules.eos).any())
    # unforced, the rows end early: the forcing is what made every row 30 tokens long
    assert free.shape[1] < forced.shape[1]

    assert forced.tolist() == _hf_generate(model, states, prompt, 30, min_new=30).tolist()
    # fewer forced than allowed: end-of-text is forbidden for exactly min_new_tokens steps, as generate forbids it
    with torch.inference_mode():
        partly = greedy_decode(model, states, prompt, rules, 30, min_new_tokens=10)
    assert partly.tolist() == _hf_generate(model, states, prompt, 30, min_new=10).tolist()
    ends = [row.index(rules.eos) for row in partly[:, prompt.shape[1] :].tolist() if rules.eos in row]
    assert ends and min(ends) >= 10 and partly.shape[1] < forced.shape[1]


def test_forced_token_counts_reach_the_tight_loop_without_the_loop_stop(random_models, monkeypatch):
    """The engine routes forced counts (``min_new_tokens``) to greedy_decode, with no stop-on-loop (random
    weights loop, and a forced count must not stop early); requests (no forced count) keep the stop."""
    import speakerscribe.asr.decoding as decoding
    import speakerscribe.asr.engine as asr
    from speakerscribe.options import AsrOptions
    from speakerscribe.records import Span, Waveform
    from speakerscribe.runtime import resolve_placement

    engine = asr.WhisperEngine.load(str(random_models.whisper_en), resolve_placement("cpu"), max_new_tokens=12)
    calls, real = [], decoding.greedy_decode

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(decoding, "greedy_decode", spy)
    audio = Waveform((0.1 * np.random.default_rng(0).standard_normal(16000 * 3)).astype(np.float32))
    options = AsrOptions(temperature=0.0, fallback_temperatures=())
    engine.transcribe(audio, [Span(0.0, 3.0)], options)
    assert calls[-1]["min_new_tokens"] == 0 and calls[-1]["stop_row"] is not None
    engine.min_new_tokens = 12
    engine.transcribe(audio, [Span(0.0, 3.0)], options)
    assert calls[-1]["min_new_tokens"] == 12 and calls[-1]["stop_row"] is None


def test_greedy_choice_is_the_log_softmax_rule_on_masked_and_transposed_scores():
    """The greedy step's choice without a whole-vocabulary log-softmax picks what openai-whisper's rule picks
    (log-probabilities of the timestamps summed against the best text token, then the best token left), on scores
    with masked rows and columns, in the transposed layout the CPU projection returns."""
    import torch

    from speakerscribe.asr.greedy import _as_float_rows, _choose

    tb, vocab = 90, 120
    generator = torch.Generator().manual_seed(3)
    for trial in range(200):
        scores = torch.randn(vocab, 16, generator=generator).T * (1 + trial % 7)  # (16, vocab), transposed
        scores[0, tb:] = float("-inf")  # no timestamp allowed
        scores[1, :tb] = float("-inf")  # only timestamps
        scores[2, tb:] = scores[2, :tb].max() + 3  # timestamps far likelier
        scores[3, torch.randperm(vocab, generator=generator)[:60]] = float("-inf")
        rows = _as_float_rows(scores.to(torch.bfloat16))
        assert rows.is_contiguous() and torch.equal(rows, scores.to(torch.bfloat16).float())
        logprobs = torch.log_softmax(rows, dim=-1)
        timestamps_win = torch.logsumexp(logprobs[:, tb:], dim=-1) > logprobs[:, :tb].max(dim=-1).values
        expected = rows.clone()
        expected[:, :tb].masked_fill_(timestamps_win[:, None], float("-inf"))
        assert torch.equal(_choose(rows.clone(), tb, 0.0, None), expected.argmax(dim=-1)), trial


def test_first_tokens_given_are_kept_and_the_rules_go_on_from_them(random_models):
    """Rows started at a given timestamp (a window's tail decoded again, :mod:`speakerscribe.asr.refill`) decode
    what ``generate`` decodes after a prompt ending in that timestamp, its rules reading the timestamp as generated;
    the given token's log-probability is the model's own, though the first-step rule (at most 1 s) would mask it."""
    import dataclasses

    import torch

    from speakerscribe.asr.greedy import TokenLogprobs

    model = _load(random_models.whisper_en)
    rules = dataclasses.replace(TimestampRules.from_generation_config(model.generation_config), begin_suppress=())
    timestamps = texts = 0
    for seed in range(4):
        states = _random_states(model, seed)
        prompt = _prompt(model, 3)
        first = torch.tensor([rules.timestamp_begin + k for k in (250, 600, 1100)])  # 5 s, 12 s, 22 s
        logprobs = TokenLogprobs(rules.eos, 0, None)
        with torch.inference_mode():
            ours = greedy_decode(model, states, prompt, rules, 30, first_tokens=first, logprobs=logprobs)
            hidden = model.model.decoder(input_ids=prompt, encoder_hidden_states=states).last_hidden_state[:, -1]
            own = torch.log_softmax(model.proj_out(hidden).float(), dim=-1).gather(1, first[:, None])[:, 0]
        theirs = _hf_generate(
            model, states, torch.cat([prompt, first[:, None]], dim=1), 29, begin_index=prompt.shape[1], suppress=False
        )
        assert ours[:, prompt.shape[1]].tolist() == first.tolist()
        assert ours.tolist() == theirs.tolist(), f"seed {seed}"
        assert torch.allclose(logprobs.per_step[0], own, atol=1e-4), (logprobs.per_step[0], own)
        later = ours[:, prompt.shape[1] + 1 :]
        timestamps += int((later >= rules.timestamp_begin).sum())
        texts += int((later < rules.eos).sum())
        # timestamps never go back before the one given
        for row, start in zip(later.tolist(), first.tolist()):
            assert all(t >= start for t in row if t >= rules.timestamp_begin)
    assert timestamps > 3 and texts > 10, (timestamps, texts)


@pytest.mark.parametrize("by_sdpa", [False, True])
def test_rows_sharing_a_window_decode_what_copies_of_it_decode(real_models, monkeypatch, by_sdpa):
    """The fallback's temperatures side by side: three windows (30 s, 12 s, 4 s of speech), three rows each, the
    rows of a window sharing its encoder states and its cross-attention keys (cached once a window), decode token
    for token what the same rows decode from a copy of the states each (float64, the same seed), while rows leave
    the batch; a window whose rows are all done leaves the cross-attention cache."""
    import torch

    import speakerscribe.asr.greedy as greedy
    from speakerscribe.asr.attention import use_step_attention

    path = real_models / "whisper-tiny.en"
    model = _load(path).double()  # float64: batches of other shapes round alike, so the tokens can be compared
    assert use_step_attention(model, by_sdpa=by_sdpa)
    rules = TimestampRules.from_generation_config(model.generation_config)
    states = _meeting_states(model, path)
    shared = [0, 0, 0, 1, 1, 1, 2, 2, 2]
    temperatures = (0.0, 0.6, 1.0) * 3
    prompt = _prompt(model, len(shared))

    caches, cross_kept = [], []
    shared_prompt, keep_rows = greedy._shared_prompt, greedy._keep

    def record_prompt(*args):
        hidden, cache = shared_prompt(*args)
        caches.append(cache)
        return hidden, cache

    def record_keep(cache, rows, windows):
        if caches and cache is caches[-1] and windows is not None:
            cross_kept.append(windows.tolist())
        return keep_rows(cache, rows, windows)

    monkeypatch.setattr(greedy, "_shared_prompt", record_prompt)
    monkeypatch.setattr(greedy, "_keep", record_keep)

    def run(encoder_states, rows=None):
        generator = torch.Generator().manual_seed(3)
        with torch.inference_mode():
            return greedy_decode(
                model, encoder_states, prompt, rules, 120, temperature=temperatures, generator=generator, shared=rows
            ).tolist()

    copies = run(states.index_select(0, torch.tensor(shared)))
    assert not caches  # no sharing asked for
    ours = run(states, shared)
    assert ours == copies
    assert len(caches) == 1 and cross_kept, cross_kept  # the 4 s window's rows finished first and left
    texts = [sum(t < rules.eos for t in row[prompt.shape[1] :]) for row in ours]
    assert min(texts[:3]) > 30 and texts[0] != texts[1] or ours[0] != ours[1]  # real words, and sampling happened
    with pytest.raises(ValueError, match="shared"):
        run(states, [0, 0, 1, 1, 1, 1, 2, 2, 2, 2])  # ten rows for a batch of nine
    with pytest.raises(ValueError, match="non-decreasing"):
        run(states, [0, 1, 0, 1, 1, 1, 2, 2, 2])


def test_draws_follow_the_probabilities_and_never_take_a_forbidden_token():
    """The per-row sampler (the cumulative sum inverted at one uniform number a row): a token of probability 0 is
    never drawn, the frequencies are the probabilities, the same seed draws the same tokens."""
    import torch

    from speakerscribe.asr.greedy import _draw

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.25, 0.25, 0.0], [0.1, 0.0, 0.0, 0.0, 0.0, 0.9], [0.0] * 5 + [1.0]])
    g = torch.Generator().manual_seed(11)
    draws = torch.stack([_draw(probs, g) for _ in range(20000)])  # (n, 3)
    for row in range(3):
        counts = torch.bincount(draws[:, row], minlength=6).float() / draws.shape[0]
        assert counts[probs[row] == 0].sum() == 0, (row, counts)
        assert torch.allclose(counts, probs[row], atol=0.015), (row, counts)
    again = torch.Generator().manual_seed(11)
    assert torch.equal(torch.stack([_draw(probs, again) for _ in range(50)]), draws[:50])
