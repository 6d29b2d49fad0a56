"""The int8-screened vocabulary projection of greedy steps (speakerscribe/asr/projection.py): its bound holds, it
chooses the full projection's token, its special and timestamp logits are the model's, unsure steps and large
batches take the full product, and real speech decodes to the same words either way."""

from __future__ import annotations

import pytest
from conftest import make_handler

from speakerscribe.asr.greedy import VocabProjection
from speakerscribe.asr.projection import ScreenedProjection
from speakerscribe_dev.conversation import MEETING, synthesize


def _model(random_models, dtype):
    from transformers import WhisperForConditionalGeneration

    return WhisperForConditionalGeneration.from_pretrained(str(random_models.whisper_en), dtype=dtype).eval()


def _text_end(model) -> int:
    """End-of-text: the tokens below it are text."""
    return int(model.generation_config.eos_token_id)


def _peaked_rows(model, n: int, seed: int, dtype):
    """Hidden rows pointing at one text token's embedding each, plus noise: confident steps, as real decoding's
    mostly are (random weights alone give flat rows, which take the full product)."""
    import torch

    g = torch.Generator().manual_seed(seed)
    weight = model.proj_out.weight.detach().float()
    tokens = torch.randint(0, _text_end(model), (n,), generator=g)
    direction = weight[tokens] / weight[tokens].norm(dim=1, keepdim=True)
    strength = torch.linspace(0.5, 60.0, n)[:, None]  # from barely ahead of the rest to far ahead
    noise = torch.randn(n, weight.shape[1], generator=g)
    return (direction * strength + noise).to(dtype)


@pytest.mark.parametrize("dtype_name", ["float32", "bfloat16"])
def test_the_bound_holds_and_the_chosen_token_is_the_full_projections(random_models, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    model = _model(random_models, dtype)
    text_end = _text_end(model)
    full = VocabProjection(model.proj_out)
    blocked = [11, 13, 30]  # some suppressed text tokens
    screened = ScreenedProjection(model.proj_out, text_end, blocked, full, max_rows=1)
    weight64 = model.proj_out.weight.detach().double()
    agree = 0
    with torch.inference_mode():
        for k, h in enumerate(_peaked_rows(model, 40, 1, dtype)):
            row = h[None]
            rough = screened._screen(row)
            truth = row.double() @ weight64.T
            assert bool(((rough.double() - truth).abs() <= screened.bound(row, rough).double()[:, None]).all()), k
            got, want = screened(row), full(row).float()
            allowed = torch.ones(want.shape[1], dtype=torch.bool)
            allowed[blocked] = False
            allowed[text_end:] = False
            best_got = int(got[0].masked_fill(~allowed, float("-inf")).argmax())
            best_want = int(want[0].masked_fill(~allowed, float("-inf")).argmax())
            assert best_got == best_want, k
            # special and timestamp tokens: the model's own logits (another product's rounding at most)
            tol = 1e-4 if dtype == torch.float32 else 0.02 * float(want[0, text_end:].abs().max())
            assert torch.allclose(got[0, text_end:], want[0, text_end:], atol=tol)
            agree += 1
    assert agree == 40 and screened.screened >= 20  # most rows were screened, not sent to the full product


def test_unsure_rows_and_large_batches_take_the_full_product(random_models):
    import torch

    model = _model(random_models, torch.float32)
    full = VocabProjection(model.proj_out)
    screened = ScreenedProjection(model.proj_out, _text_end(model), [], full, max_rows=2)
    with torch.inference_mode():
        flat = torch.zeros(1, model.config.d_model)  # every logit alike: every token could be the best
        assert torch.equal(screened(flat), full(flat).float()) and screened.full_steps == 1
        many = _peaked_rows(model, 3, 2, torch.float32)
        assert torch.equal(screened(many), full(many).float()) and screened.full_steps == 2
        assert screened.screened == 0


def test_a_suppressed_token_is_never_the_candidate_that_wins(random_models):
    """A confident row whose best token is suppressed: the best allowed token is still the full projection's."""
    import torch

    model = _model(random_models, torch.float32)
    end = _text_end(model)
    full = VocabProjection(model.proj_out)
    h = _peaked_rows(model, 40, 3, torch.float32)[-1:]  # the strongest row
    with torch.inference_mode():
        top = int(full(h)[0, :end].argmax())
        screened = ScreenedProjection(model.proj_out, end, [top], full, max_rows=1)
        got, want = screened(h).clone(), full(h).float().clone()
        got[0, top] = want[0, top] = float("-inf")
        assert screened.screened == 1  # the row was screened, not sent to the full product
        best = int(want[0, :end].argmax())
        assert int(got[0, :end].argmax()) == best
        assert abs(float(got[0, best]) - float(want[0, best])) < 1e-4  # its logit is exact, not screened


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_real_speech_decodes_to_the_same_words_screened_or_not(real_models, speech_dir, dtype):
    """tiny.en through the whole handler on the festival meeting: the screened steps write what the full
    projection writes, chunk for chunk, and most steps of few rows were screened."""
    conv = synthesize(MEETING, speech_dir, "meeting")
    handler = make_handler(ASR_MODEL=str(real_models / "whisper-tiny.en"), TORCH_DTYPE=dtype)
    asr = handler.transcriber.models.asr
    screened = asr.step_projection
    assert isinstance(screened, ScreenedProjection)
    request = {"inputs": conv.wav.read_bytes(), "parameters": {"batch_size": 1}}
    with_screen = handler(request)
    asr.step_projection = asr.projection
    try:
        without = handler(request)
    finally:
        asr.step_projection = screened
    assert with_screen["chunks"] == without["chunks"]
    assert screened.screened > 2 * screened.full_steps
