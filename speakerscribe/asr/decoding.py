"""One decoding of a batch of encoded windows: the tight greedy/sampling loop (:mod:`.greedy`) or transformers'
``generate`` (draft model, static cache, forced token counts), stopped at repetition loops, then scored
(:mod:`.scoring`) into :class:`~.decoded.Decoded` records."""

from __future__ import annotations

import contextlib
import threading

from ..options import AsrOptions
from ..records import Span
from ..runtime import quiet_transformers
from . import scoring
from .decoded import Decoded
from .greedy import TokenLogprobs, greedy_decode
from .tokens import compression_ratio, ends_in_loop, find_loop, split_segments, text_token_ids

_LOOP_TAIL = 160  # generated tokens (text and timestamps) examined for a loop at each step


def row_ends_in_loop(generated: list[int], eos: int) -> bool:
    """Whether a row's generated tokens (timestamps included) end in a repetition loop, over the last
    ``_LOOP_TAIL`` tokens: the stop criterion of both decoding paths."""
    return ends_in_loop(text_token_ids(generated[-_LOOP_TAIL:], eos))


FALLBACK_SEED = 0  # sampling is seeded, so a request gives the same words every time
# transformers' generate samples from the process-wide generator: its samplings take turns seeding and drawing
_GLOBAL_SAMPLING = threading.Lock()


def generate(
    engine,
    encoder_outputs,
    prompt: list[int],
    assistant=None,
    temperature: float | tuple[float, ...] = 0.0,
    check=None,
    logprobs=None,
    first_tokens: list[int] | None = None,
    shared: list[int] | None = None,
):
    """Decoding with timestamps from ``prompt``, for every row of ``encoder_outputs`` at once.

    Greedy decoding and sampling run in :func:`~speakerscribe.asr.greedy.greedy_decode` (the same tokens, a
    fraction of the per-step overhead), on the engine's int8 copy of the decoder where it has one and it is meant
    for this ``temperature`` (:mod:`.quantized`); sampling draws from a generator of this call's own, seeded with
    ``FALLBACK_SEED``, so the same request samples the same words however many others sample beside it; forced
    token counts (benchmarks) run there too. The draft model and the static cache go through
    :meth:`generate_with_transformers`, which can only sample from the process-wide generator: such samplings take
    turns (seeding it, drawing, putting its state back). ``check()`` (the tight loop only) runs before every
    decoding step and may raise to stop it. The tight loop only: ``temperature`` as a tuple, one a row (the
    fallback's temperatures), ``first_tokens`` (tails), ``shared`` (rows of a window). Returns (B, P + new) ids."""
    import torch

    hottest = max(temperature) if isinstance(temperature, tuple) else temperature
    batch = encoder_outputs.last_hidden_state.shape[0] if shared is None else len(shared)
    ids = torch.tensor([prompt], device=engine.placement.device, dtype=torch.long).repeat(batch, 1)
    # one position stays free for the end-of-text token the scoring pass appends
    limit = engine.model.config.max_target_positions - 1
    new_tokens = min(engine.max_new_tokens or limit, limit - len(prompt))
    if engine.tight_loop(assistant):
        generator = None
        if hottest > 0:
            generator = torch.Generator(device=engine.placement.device).manual_seed(FALLBACK_SEED)
        steps = engine.int8_steps if engine.int8_steps and engine.int8_steps.used_for(hottest) else None
        return greedy_decode(
            engine.model,
            encoder_outputs.last_hidden_state,
            ids,
            engine.timestamp_rules,
            new_tokens,
            # forced token counts (benchmarks on random weights) must not stop at a loop
            stop_row=engine.ends_in_loop if engine.min_new_tokens is None else None,
            projection=engine.projection if steps is None else steps.projection,
            check=check,
            temperature=temperature,
            generator=generator,
            min_new_tokens=engine.min_new_tokens or 0,
            decoder=None if steps is None else steps.decoder,
            logprobs=logprobs if steps is None else None,  # int8 steps: confidence stays the model's
            first_tokens=None if first_tokens is None else torch.tensor(first_tokens, device=ids.device),
            shared=shared,
        )
    if isinstance(temperature, tuple) or first_tokens is not None or shared is not None:
        raise ValueError("a temperature or first token a row, or shared windows, need the tight loop")
    if temperature <= 0:
        return generate_with_transformers(engine, encoder_outputs, ids, new_tokens, assistant, temperature)
    with _GLOBAL_SAMPLING, torch.random.fork_rng(devices=[]):
        torch.manual_seed(FALLBACK_SEED)
        return generate_with_transformers(engine, encoder_outputs, ids, new_tokens, assistant, temperature)


def generate_with_transformers(engine, encoder_outputs, ids, new_tokens: int, assistant=None, temperature=0.0):
    """The generic ``GenerationMixin.generate`` from ``ids`` (B, P) for ``new_tokens`` at most, with Whisper's
    timestamp rules as a logits processor (timestamps in pairs, never decreasing, the first one within 1 s), the
    model's suppressed tokens and the stop-on-loop criterion, instead of Whisper's own ``generate``, whose
    long-form machinery <= 30 s windows do not need. Greedy, it is what the tight loop must equal
    (``tests/test_greedy.py``, ``benchmarks/greedy_loop.py``)."""
    import torch
    from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
    from transformers.generation.logits_process import WhisperTimeStampLogitsProcessor
    from transformers.generation.utils import GenerationMixin

    gen = engine.model.generation_config
    prompt_length = ids.shape[1]
    config = GenerationConfig(
        decoder_start_token_id=engine.sot,
        eos_token_id=engine.eos,
        pad_token_id=engine.eos,
        bos_token_id=engine.eos,
        do_sample=temperature > 0,
        temperature=temperature if temperature > 0 else None,
        top_k=0 if temperature > 0 else None,
        num_beams=1,
        max_length=prompt_length + new_tokens,
        min_new_tokens=engine.min_new_tokens,
        suppress_tokens=list(gen.suppress_tokens or []) or None,
        begin_suppress_tokens=list(gen.begin_suppress_tokens or []) or None,
    )
    timestamps = WhisperTimeStampLogitsProcessor(gen, begin_index=prompt_length)
    if engine.static_cache and assistant is None:
        # a fixed-size KV cache: with CUDA, transformers compiles the decoder step for it (CUDA graphs)
        config.cache_implementation = "static"
    kwargs = {"assistant_model": assistant} if assistant is not None else {}
    if engine.min_new_tokens is None:  # forced token counts (benchmarks) must not stop early
        kwargs["stopping_criteria"] = StoppingCriteriaList([StopOnLoop(prompt_length, engine.eos)])
    # a draft model's generate, run by transformers for us, logs a generation-config deprecation and duplicated
    # SuppressTokens processor notices (about its own internal call): quiet for the assisted call only
    quiet = quiet_transformers() if assistant is not None else contextlib.nullcontext()

    def call():
        with engine._generate_lock, quiet, torch.inference_mode():  # (grad mode is per thread: set it here)
            return GenerationMixin.generate(
                engine.model,
                encoder_outputs=encoder_outputs,
                decoder_input_ids=ids,
                generation_config=config,
                logits_processor=LogitsProcessorList([timestamps]),
                **kwargs,
            )

    if engine.decoder_thread is not None and engine.static_cache and assistant is None:
        return engine.decoder_thread.run(call)  # compiled CUDA graphs: the thread that made them replays them
    return call()


def attempt(
    engine,
    enc,
    windows: list[Span],
    prompt: list[int],
    opts: AsrOptions,
    words: bool,
    clock,
    temperature: float | tuple[float, ...],
    assistant=None,
    first_tokens: list[int] | None = None,
    shared: list[int] | None = None,
) -> list[Decoded]:
    """One decoding of every row at ``temperature`` (seeded when sampling; a tuple: one a row), scored; each row
    starting with its ``first_tokens`` when given; ``shared``: the row of ``enc`` each row decodes (several rows a
    window, :func:`generate`), else one row of ``enc`` a row."""

    with clock("asr_generate"):
        check = clock.cancel.check if clock.cancel is not None else None
        logprobs = TokenLogprobs(engine.eos, prompt.index(engine.sot), engine.no_speech_id)
        sequences = generate(engine, enc, prompt, assistant, temperature, check, logprobs, first_tokens, shared)
        generated = [strip_prompt(engine, s.tolist()[len(prompt) :]) for s in sequences]
    out = []
    row_temperatures = temperature if isinstance(temperature, tuple) else (temperature,) * len(windows)
    for w, g, t in zip(windows, generated, row_temperatures):
        text_tokens = text_token_ids(g, engine.eos)
        text = engine.tokenizer.decode(text_tokens, skip_special_tokens=True) if text_tokens else ""
        out.append(
            Decoded(
                window=w,
                segments=split_segments(g, engine.timestamp_begin, engine.eos),
                temperature=t,
                text=text,
                compression_ratio=compression_ratio(text) if text.strip() else 0.0,
                loops=find_loop(text_tokens) is not None,
            )
        )
    with clock("asr_score"):
        given = 0 if first_tokens is None else 1
        scoring.score(engine, enc.last_hidden_state, prompt, generated, words, out, windows, logprobs, given, shared)
    return out


def strip_prompt(engine, ids: list[int]) -> list[int]:
    """Drop any leading prompt tokens (start/language/task) that ``generate`` returned; cut at end-of-text."""
    k = 0
    while k < len(ids) and engine.eos < ids[k] < engine.timestamp_begin:
        k += 1
    body = ids[k:]
    if engine.eos in body:
        body = body[: body.index(engine.eos)]
    return body


class StopOnLoop:
    """Stopping criterion: a row is finished once its generated text tokens end in a repetition loop."""

    def __init__(self, prompt_length: int, eos: int):
        self.prompt_length = prompt_length
        self.eos = eos

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        rows = input_ids[:, max(self.prompt_length, input_ids.shape[1] - _LOOP_TAIL) :].tolist()
        done = [row_ends_in_loop(row, self.eos) for row in rows]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
