"""Confidence from the decoding loop (speakerscribe.asr.greedy.TokenLogprobs): the log-probabilities the loop
reports equal a teacher-forced pass over the same tokens, rows it could not finish scoring are left to that pass,
and without word times no second decoder pass runs."""

from __future__ import annotations

import numpy as np

from speakerscribe.asr.greedy import TimestampRules, TokenLogprobs, greedy_decode
from speakerscribe.asr.tokens import ends_in_loop, text_token_ids


def _load(path):
    import torch
    from transformers import WhisperForConditionalGeneration

    model = WhisperForConditionalGeneration.from_pretrained(str(path), attn_implementation="sdpa", dtype=torch.float32)
    return model.eval()


def _teacher_forced(model, states, prompt: list[int], tokens: list[int], eos: int):
    """log p(token | everything before) for ``tokens`` + end-of-text, and the log-softmax at position 0."""
    import torch

    ids = torch.tensor([prompt + tokens + [eos]])
    with torch.inference_mode():
        hidden = model.model.decoder(input_ids=ids, encoder_hidden_states=states[None], use_cache=False)
        logits = model.proj_out(hidden.last_hidden_state[0]).float()
    logprobs = torch.log_softmax(logits, dim=-1)
    p = len(prompt)
    chosen = logprobs[p - 1 : -1].gather(1, ids[0, p:, None])[:, 0]
    return chosen.numpy(), logprobs[0].numpy()


def _decode(model, states, rules, limit, record, stop=False):
    import torch

    prompt = [int(model.generation_config.decoder_start_token_id)]
    stop_row = (lambda t: ends_in_loop(text_token_ids(t[-160:], rules.eos))) if stop else None
    with torch.inference_mode():
        out = greedy_decode(
            model, states, torch.tensor([prompt] * states.shape[0]), rules, limit, stop_row=stop_row, logprobs=record
        )
    return prompt, [seq[: seq.index(rules.eos)] if rules.eos in seq else seq for seq in out[:, 1:].tolist()]


def test_loop_log_probabilities_equal_a_teacher_forced_pass_on_random_weights(random_models):
    """Random weights never say end-of-text: rows end at a repetition loop (the loop stop; finished rows leave the
    batch) or at the token limit. Every token's log-probability the loop saw equals the teacher-forced pass's; the
    rows, their end-of-text unscored, are reported as None (the scoring pass takes them)."""
    import torch

    model = _load(random_models.whisper_en)
    rules = TimestampRules.from_generation_config(model.generation_config)
    compared = 0
    for seed in range(3):
        g = torch.Generator().manual_seed(300 + seed)
        states = torch.randn(4, model.config.max_source_positions, model.config.d_model, generator=g) * (1 + seed)
        record = TokenLogprobs(rules.eos, 0, None)
        prompt, rows = _decode(model, states, rules, 40, record, stop=seed > 0)
        table = torch.stack(record.per_step, dim=1).numpy()
        for i, tokens in enumerate(rows):
            seen = table[i, : len(tokens)]
            want, _ = _teacher_forced(model, states[i], prompt, tokens, rules.eos)
            np.testing.assert_allclose(seen[~np.isnan(seen)], want[: len(tokens)][~np.isnan(seen)], atol=2e-4)
            compared += int((~np.isnan(seen)).sum())
        assert record.rows([len(r) for r in rows]) == [None] * len(rows)
    assert compared > 200


def test_loop_log_probabilities_equal_a_teacher_forced_pass_on_real_speech(real_models):
    """tiny.en on three stretches of a meeting (30, 12 and 4 s: the short rows finish first and leave the batch):
    every row is reported, its tokens' and end-of-text's log-probabilities and its no-speech probability those of
    the teacher-forced pass."""
    import soundfile as sf
    import torch
    from test_greedy import _speech_dir
    from transformers import WhisperFeatureExtractor

    from speakerscribe_dev.conversation import MEETING, synthesize

    path = real_models / "whisper-tiny.en"
    model = _load(path)
    rules = TimestampRules.from_generation_config(model.generation_config)
    no_speech = model.generation_config.no_timestamps_token_id - 1  # <|nospeech|> sits just before it
    audio, rate = sf.read(str(synthesize(MEETING, _speech_dir(), "meeting").wav), dtype="float32")
    clips = [audio[: 30 * rate], audio[10 * rate : 22 * rate], audio[30 * rate : 34 * rate]]
    features = WhisperFeatureExtractor.from_pretrained(str(path))(clips, sampling_rate=rate, return_tensors="pt")
    with torch.inference_mode():
        states = model.model.encoder(features.input_features).last_hidden_state
    record = TokenLogprobs(rules.eos, 0, no_speech)
    prompt, rows = _decode(model, states, rules, 200, record)
    reported = record.rows([len(r) for r in rows])
    assert all(r is not None for r in reported) and min(len(r) for r in rows) >= 5
    for i, (tokens, (values, no_speech_prob)) in enumerate(zip(rows, reported)):
        want, first = _teacher_forced(model, states[i], prompt, tokens, rules.eos)
        assert len(values) == len(tokens) + 1
        np.testing.assert_allclose(values, want, atol=2e-4)
        assert abs(no_speech_prob - float(np.exp(first[no_speech]))) < 1e-5


def test_no_second_decoder_pass_without_word_times(real_models, monkeypatch):
    """Through the engine (tiny.en, float32, a meeting): without word times no teacher-forced pass runs (every row
    ended at end-of-text), with word times one runs over every row; words and confidence are the same either way."""
    import soundfile as sf
    from test_greedy import _speech_dir

    import speakerscribe.asr.scoring as scoring
    from speakerscribe.asr.decoded import DecodePlan
    from speakerscribe.asr.engine import WhisperEngine
    from speakerscribe.options import AsrOptions
    from speakerscribe.records import Span, Waveform
    from speakerscribe.runtime import resolve_placement
    from speakerscribe_dev.conversation import MEETING, synthesize

    engine = WhisperEngine.load(str(real_models / "whisper-tiny.en"), resolve_placement("cpu", "float32"))
    passes = []
    real = scoring._teacher_forced

    def spy(engine, states, prompt, generated, rows, todo, want_words, out, windows, given=0, state_rows=None):
        passes.append((len(generated), list(rows), want_words))
        return real(engine, states, prompt, generated, rows, todo, want_words, out, windows, given, state_rows)

    monkeypatch.setattr(scoring, "_teacher_forced", spy)
    samples, _ = sf.read(str(synthesize(MEETING, _speech_dir(), "meeting").wav), dtype="float32")
    audio = Waveform(samples[: 16000 * 20])
    windows = [Span(0.0, 8.0), Span(8.0, 14.0), Span(14.0, 20.0)]
    opts = AsrOptions(temperature=0.0, fallback_temperatures=())
    plain = engine.transcribe(audio, windows, opts, DecodePlan(word_timestamps=False))
    assert passes == []
    passes.clear()
    worded = engine.transcribe(audio, windows, opts, DecodePlan(word_timestamps=True))
    assert passes and all(words and len(rows) == total for total, rows, words in passes)
    assert [c.text for c in plain.chunks] == [c.text for c in worded.chunks]
    np.testing.assert_allclose([c.avg_logprob for c in plain.chunks], [c.avg_logprob for c in worded.chunks], atol=1e-4)
    assert len(plain.chunks) >= 3 and all(c.avg_logprob is not None for c in plain.chunks)
