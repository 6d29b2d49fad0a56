"""The int8 screen of a greedy step's vocabulary projection (speakerscribe.asr.screened): the scores that decide
a step are the model's own, the tail is int8's rounding of them, greedy tokens on real speech are the model's,
sampled steps and large batches never use it, and DECODER_QUANTIZATION chooses it (the default on a CPU)."""

from __future__ import annotations

import dataclasses

import pytest
from conftest import make_handler

from speakerscribe.asr import quantized
from speakerscribe.asr.greedy import TimestampRules, VocabProjection, greedy_decode
from speakerscribe.asr.screened import MARGIN, MAX_ROWS, ScreenedProjection, exact_projection


def _tiny(real_models, dtype: str):
    import torch
    from transformers import WhisperForConditionalGeneration

    path = real_models / "whisper-tiny.en"
    model = WhisperForConditionalGeneration.from_pretrained(str(path), dtype=getattr(torch, dtype))
    return model.eval(), path


def _screen(model):
    rules = TimestampRules.from_generation_config(model.generation_config)
    no_speech = 50361  # tiny.en's <|nocaptions|>
    return ScreenedProjection.of(model.proj_out, VocabProjection(model.proj_out), rules, no_speech), rules


def _decoded_hidden(model, states, prompt, rules):
    """The hidden states a greedy decoding of real speech projects, one row at a time (what the screen sees)."""
    seen = []
    exact = VocabProjection(model.proj_out)

    def recording(hidden):
        seen.append(hidden.clone())
        return exact(hidden)

    for row in range(states.shape[0]):
        greedy_decode(model, states[row : row + 1], prompt[:1], rules, 60, projection=recording)
    return seen


def test_the_scores_that_decide_a_greedy_step_are_the_models_and_the_tail_is_int8s(real_models):
    """float32, so that the model's scores are comparable to the last digits: timestamps, end-of-text, no-speech and
    the best text token equal the full projection's; the other scores differ by int8's rounding, within the margin
    the best candidate must clear, or the whole row is the model's (an unsure step)."""
    import torch
    from test_greedy import _meeting_states, _prompt

    model, path = _tiny(real_models, "float32")
    screen, rules = _screen(model)
    tb = rules.timestamp_begin
    with torch.inference_mode():
        hidden = _decoded_hidden(model, _meeting_states(model, path), _prompt(model, 1), rules)
        suppressed = torch.tensor(sorted(t for t in rules.suppress if t < tb))
        screened = 0
        for h in hidden:
            full, got = model.proj_out(h).float(), screen(h)
            assert got.dtype == torch.float32 and got.shape == full.shape
            decide = [*range(tb, full.shape[1]), rules.eos, 50361]
            torch.testing.assert_close(got[:, decide], full[:, decide], rtol=0, atol=1e-4)
            text = full[:, :tb].clone()
            text[:, suppressed] = float("-inf")
            best = text.argmax(dim=-1)
            torch.testing.assert_close(got.gather(1, best[:, None]), full.gather(1, best[:, None]), rtol=0, atol=1e-4)
            assert int(got[:, :tb].masked_fill(torch.isinf(text), float("-inf")).argmax()) == int(best)
            tail = (got - full).abs()
            assert float(tail.max()) < MARGIN * float(h.norm())  # int8 rounding, one scale per vocabulary row
            screened += int((tail > 1e-3).sum()) > 1000  # ... and real: not the full projection renamed
        assert len(hidden) > 100 and screened > 0.8 * len(hidden)


def test_int8_errors_within_the_margin_never_change_the_choice(real_models):
    """The worst int8 could do within the margin: every score off by 0.99 of it, the best text token down and every
    other up. Where that pushes the best token out of the candidates, the step must fall back to the model's
    projection; the choice is the full projection's at every step of real decoding."""
    import torch
    from test_greedy import _meeting_states, _prompt

    model, path = _tiny(real_models, "float32")
    screen, rules = _screen(model)
    tb = rules.timestamp_begin
    with torch.inference_mode():
        hidden = torch.cat(_decoded_hidden(model, _meeting_states(model, path), _prompt(model, 1), rules))
        full = model.proj_out(hidden).float()
        text = full[:, :tb].clone()
        text[:, screen.never] = float("-inf")
        best = text.argmax(dim=-1)
        push = 0.99 * MARGIN * hidden.norm(dim=-1, keepdim=True)
        worst = full + push
        worst.scatter_(1, best[:, None], full.gather(1, best[:, None]) - push)
        left_out = 0
        for row in range(hidden.shape[0]):
            rows = slice(row, row + 1)
            adversary = dataclasses.replace(screen, int8=lambda x, rows=rows: worst[rows].clone())
            got = adversary(hidden[rows])[:, :tb].masked_fill(torch.isinf(text[rows]), float("-inf"))
            assert int(got.argmax()) == int(best[row]), row
            cut = worst[rows, :tb].masked_fill(torch.isinf(text[rows]), float("-inf"))
            left_out += int(best[row]) not in cut.topk(screen.candidates).indices.tolist()
        assert left_out > 0  # the adversary did push the best token out of the candidates somewhere


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_greedy_tokens_through_the_screen_are_the_models_on_real_speech(real_models, dtype):
    """tiny.en on three windows of the festival meeting, decoded together (rows leave as they finish: batches of
    3, 2 and 1) and one at a time: the same tokens as the full projection's, in both precisions."""
    import torch
    from test_greedy import _meeting_states, _prompt

    model, path = _tiny(real_models, dtype)
    screen, rules = _screen(model)
    calls = []
    counting = dataclasses.replace(screen, int8=lambda x: (calls.append(x.shape[0]), screen.int8(x))[1])
    states = _meeting_states(model, path)
    with torch.inference_mode():
        for rows in (slice(0, 3), slice(0, 1), slice(1, 2), slice(2, 3)):
            prompt = _prompt(model, states[rows].shape[0])
            full = greedy_decode(model, states[rows], prompt, rules, 160, projection=VocabProjection(model.proj_out))
            ours = greedy_decode(model, states[rows], prompt, rules, 160, projection=counting)
            assert ours.tolist() == full.tolist(), (dtype, rows)
    assert len(calls) > 150 and set(calls) == {1, 2}  # the batch of three went on as two, then one
    assert sum(t < rules.eos for t in full[0].tolist()) > 5  # real words


def test_sampled_steps_and_large_batches_take_the_models_projection(real_models):
    import torch

    model, _ = _tiny(real_models, "float32")
    screen, rules = _screen(model)
    assert exact_projection(screen) is screen.exact and exact_projection(screen.exact) is screen.exact

    def never(x):
        raise AssertionError("the int8 screen was used")

    banned = dataclasses.replace(screen, int8=never)
    g = torch.Generator().manual_seed(0)
    states = torch.randn(2, model.config.max_source_positions, model.config.d_model, generator=g)
    prompt = torch.tensor([[model.generation_config.decoder_start_token_id]] * 2)
    with torch.inference_mode():
        for temperature in (0.6, (0.0, 0.8)):
            out = greedy_decode(
                model,
                states,
                prompt,
                rules,
                8,
                projection=banned,
                temperature=temperature,
                generator=g,
            )
            assert out.shape[0] == 2
        wide = torch.randn(MAX_ROWS + 1, model.config.d_model)
        torch.testing.assert_close(banned(wide), screen.exact(wide).float())
        with pytest.raises(AssertionError, match="int8 screen"):
            banned(wide[:MAX_ROWS])


@pytest.mark.parametrize(
    "choice, device, greedy_loop, used",
    [
        ("screened", "cpu", True, True),
        ("screened", "cuda", True, False),
        ("screened", "cpu", False, False),
        ("none", "cpu", True, False),
        ("int8", "cpu", True, False),
        ("sampled", "cpu", True, False),
    ],
)
def test_the_screen_is_used_on_a_cpu_tight_loop_when_chosen_and_never_an_error(choice, device, greedy_loop, used):
    assert quantized.use_screening(choice, device, greedy_loop) is used


def test_without_quantized_kernels_the_screen_is_quietly_left_out(monkeypatch):
    monkeypatch.setattr(quantized, "int8_engine", lambda: None)
    assert quantized.use_screening("screened", "cpu", True) is False
    with pytest.raises(Exception, match="screened, none, sampled, int8"):
        quantized.use_screening("fp8", "cpu", True)


def test_the_engine_screens_by_default_and_none_keeps_the_full_projection(random_models):
    default = make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8")
    exact = make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8", DECODER_QUANTIZATION="none")
    assert isinstance(default.transcriber.models.asr.projection, ScreenedProjection)
    assert type(exact.transcriber.models.asr.projection) is VocabProjection
