"""Whisper transcription over planned windows: batched features and encoder, greedy decoding with timestamps,
optional speculative decoding with a draft model, a scoring pass for no-speech gating and word timing.

Per batch of windows (longest first, so similar lengths decode together):

1. log-mel features for the batch at once (on the GPU when there is one), padded to 30 s: (B, mel, 3000);
2. the encoder once: (B, 1500, d_model);
3. greedy decoding with timestamps (:mod:`.greedy`); with ``assisted`` each window runs alone with the draft model;
4. one teacher-forced decoder pass over [prompt + generated tokens]: the no-speech probability at the first
   position, the mean log-probability of the generated tokens and, for word timestamps, the cross-attention of
   the alignment heads;
5. segments and words placed at the window's real start time.

A window whose no-speech probability is above ``no_speech_threshold`` while its mean log-probability is below
``logprob_threshold`` is treated as silence (Whisper's own rule).

Failures are recovered, never dropped (openai-whisper's and faster-whisper's rules):

* a row stops decoding as soon as its text ends in a repetition loop (:func:`~.whisper_tokens.ends_in_loop`);
* a window that loops, whose compression ratio is above ``compression_ratio_threshold`` or whose mean
  log-probability is below ``logprob_threshold`` is decoded again by sampling at each temperature of
  ``fallback_temperatures`` in turn, until one passes; if none does, the best attempt is kept (the most likely
  one that does not loop, else the least repetitive);
* a window that still loops keeps its segments before the loop, and the rest of it is decoded again as shorter
  windows cut at the quietest points (halving, ``MAX_SPLIT_DEPTH`` times); what still loops after that is cut
  after the first copy of the repeated text.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass, field

import numpy as np

from ..audio.windows import plan_windows
from ..errors import InputError, ModelLoadError, short_message
from ..options import AsrOptions
from ..records import SAMPLE_RATE, Chunk, Span, Transcript, Waveform, Word
from ..runtime import Placement, quiet_generation_warnings, quiet_transformers
from ..timing import StageTimer
from .alignment import capture_cross_attention, token_start_times
from .greedy import TimestampRules, VocabProjection, greedy_decode
from .languages import normalise_language
from .tokens import (
    RawSegment,
    compression_ratio,
    ends_in_loop,
    find_loop,
    group_words,
    split_segments,
    text_token_ids,
)

logger = logging.getLogger(__name__)

WINDOW_S = 30.0
DETECT_WINDOWS = 8  # longest windows used to detect the language
_LOGIT_ROWS = 2048  # rows of (tokens x vocab) logits computed at a time in the scoring pass
MAX_SPLIT_DEPTH = 2  # a looping window is re-decoded in halves at most this many times
MIN_SPLIT_S = 2.0  # a looping remainder shorter than this is not re-decoded, only cut after the loop
_LOOP_TAIL = 160  # generated tokens (text and timestamps) examined for a loop at each step
FALLBACK_SEED = 0  # sampling is seeded, so a request gives the same words every time
# transformers' generate samples from the process-wide generator: its samplings take turns seeding and drawing
_GLOBAL_SAMPLING = threading.Lock()


@dataclass(frozen=True)
class DecodePlan:
    """What one ``transcribe`` call does, decided by the pipeline from the request's options and what is loaded:
    the batch size (smaller after running out of accelerator memory), whether the draft model decodes (one window
    at a time), and whether word times are computed (asked for, or needed to cut speaker entries at words)."""

    batch_size: int = 24
    assisted: bool = False
    word_timestamps: bool = False


@dataclass
class _Decoded:
    """What one window produced, in window-relative seconds."""

    window: Span
    segments: list[RawSegment] = field(default_factory=list)
    token_times: dict[int, float] = field(default_factory=dict)  # text-token position -> seconds
    text_positions: list[int] = field(default_factory=list)
    no_speech_prob: float = 0.0
    avg_logprob: float = 0.0
    temperature: float = 0.0
    text: str = ""
    compression_ratio: float = 0.0
    loops: bool = False  # the text holds a repetition loop (find_loop)

    def is_silence(self, opts: AsrOptions) -> bool:
        """Whisper's no-speech rule: likely silence, and nothing was decoded with confidence."""
        return self.no_speech_prob > opts.no_speech_threshold and self.avg_logprob < opts.logprob_threshold

    def repeats(self, opts: AsrOptions) -> bool:
        return self.loops or self.compression_ratio > opts.compression_ratio_threshold

    def failed(self, opts: AsrOptions) -> bool:
        """Needs another attempt: a loop, repetitive text, or low confidence (and not silence)."""
        if self.is_silence(opts) or not self.segments:
            return False
        return self.repeats(opts) or (opts.retry_low_confidence and self.avg_logprob < opts.logprob_threshold)


def _best_attempt(attempts: list[_Decoded], opts: AsrOptions) -> _Decoded:
    """The most likely attempt that does not repeat itself; if all do, the least repetitive."""
    clean = [d for d in attempts if not d.repeats(opts)]
    if clean:
        return max(clean, key=lambda d: d.avg_logprob)
    return min(attempts, key=lambda d: (d.loops, d.compression_ratio))


class _StopOnLoop:
    """Stopping criterion: a row is finished once its generated text tokens end in a repetition loop."""

    def __init__(self, prompt_length: int, eos: int):
        self.prompt_length = prompt_length
        self.eos = eos

    def __call__(self, input_ids, scores, **kwargs):
        import torch

        tail = input_ids[:, max(self.prompt_length, input_ids.shape[1] - _LOOP_TAIL) :].tolist()
        done = [ends_in_loop(text_token_ids(row, self.eos)) for row in tail]
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)


class WhisperEngine:
    """A loaded Whisper model (+ optional draft model) and the code to run it over windows."""

    def __init__(
        self,
        model,
        feature_extractor,
        tokenizer,
        placement: Placement,
        assistant=None,
        max_new_tokens: int | None = None,
        static_cache: bool = False,
    ):
        self.model = model
        self.static_cache = static_cache
        # transformers keeps ONE static KV cache on the model and reuses it across generate() calls, so concurrent
        # requests (MAX_CONCURRENCY > 1) must take turns decoding when it is on; encoders still run in parallel
        self._generate_lock = threading.Lock() if static_cache else contextlib.nullcontext()
        self.min_new_tokens: int | None = None  # benchmarks force a token count per window
        self.feature_extractor = feature_extractor
        self.tokenizer = tokenizer
        self.assistant = assistant
        self.placement = placement
        self.max_new_tokens = max_new_tokens
        gen = model.generation_config
        self.eos = int(gen.eos_token_id if not isinstance(gen.eos_token_id, list) else gen.eos_token_id[0])
        self.sot = int(gen.decoder_start_token_id)
        prev = getattr(gen, "prev_sot_token_id", None)
        self.prev_sot = int(prev) if prev is not None else None
        self.timestamp_begin = int(gen.no_timestamps_token_id) + 1
        self.timestamp_rules = TimestampRules.from_generation_config(gen)
        self.projection = VocabProjection(model.proj_out)
        self.multilingual = bool(getattr(gen, "is_multilingual", False))
        self.lang_to_id: dict[str, int] = {
            k.strip("<|>"): int(v) for k, v in (getattr(gen, "lang_to_id", None) or {}).items()
        }
        self.task_to_id: dict[str, int] = dict(getattr(gen, "task_to_id", None) or {})
        self.alignment_heads = [tuple(h) for h in (getattr(gen, "alignment_heads", None) or [])]
        vocab = tokenizer.get_vocab()
        nospeech = vocab.get("<|nospeech|>", vocab.get("<|nocaptions|>"))
        self.no_speech_id = int(nospeech) if nospeech is not None else None

    # ----------------------------------------------------------------------------------------------- loading
    @classmethod
    def load(
        cls,
        model_id: str,
        placement: Placement,
        assistant_id: str | None = None,
        token: str | None = None,
        max_new_tokens: int | None = None,
        static_cache: bool = False,
    ) -> WhisperEngine:
        from transformers import (
            AutoModelForCausalLM,
            AutoTokenizer,
            WhisperFeatureExtractor,
            WhisperForConditionalGeneration,
        )

        kwargs = dict(dtype=placement.dtype, attn_implementation=placement.attn_implementation, token=token)
        try:
            model = WhisperForConditionalGeneration.from_pretrained(model_id, **kwargs)
            feature_extractor = WhisperFeatureExtractor.from_pretrained(model_id, token=token)
            tokenizer = AutoTokenizer.from_pretrained(model_id, token=token)
        except Exception as exc:
            raise ModelLoadError(f"could not load ASR_MODEL {model_id!r}: {short_message(exc)}") from exc
        model.to(placement.device).eval()
        assistant = None
        if assistant_id:
            assistant = load_assistant(AutoModelForCausalLM, assistant_id, kwargs)
            if assistant.config.vocab_size != model.config.vocab_size:
                raise ModelLoadError(
                    f"ASSISTANT_MODEL {assistant_id!r} has vocabulary size {assistant.config.vocab_size}, "
                    f"ASR_MODEL has {model.config.vocab_size}: a draft model must share the tokenizer"
                )
            assistant.to(placement.device).eval()
            # speculative decoding gives the draft a token budget per step (max_new_tokens); a max_length in its
            # generation config too (Whisper checkpoints set 448) makes transformers warn on every draft step
            assistant.generation_config.max_length = None
        quiet_generation_warnings()
        return cls(model, feature_extractor, tokenizer, placement, assistant, max_new_tokens, static_cache)

    def warmup(self, batch_size: int) -> None:
        """Run one full batch of silent windows, so a compiled static-cache decoder is built before requests."""
        import torch

        silence = Waveform(np.zeros(int(WINDOW_S * SAMPLE_RATE), dtype=np.float32))
        windows = [Span(0.0, WINDOW_S)] * batch_size
        with torch.inference_mode():
            enc = self.encode(self.features(silence, windows))
            language = next(iter(sorted(self.languages)))
            self.generate(enc, self.prompt_ids(language if self.multilingual else "en", "transcribe"))

    # ------------------------------------------------------------------------------------------ capabilities
    @property
    def languages(self) -> frozenset[str]:
        return frozenset(self.lang_to_id) if self.multilingual else frozenset({"en"})

    def language_code(self, language: str | None) -> str | None:
        """A requested language as the loaded model's code ("English" -> "en"); None detects. InputError if the
        model does not know it."""
        return None if language is None else normalise_language(language, self.languages)

    def validate(self, opts: AsrOptions) -> None:
        """Check request options against the loaded models; InputError names what cannot be served."""
        self.language_code(opts.language)
        if opts.task == "translate" and not self.multilingual:
            raise InputError(
                "task 'translate' needs a multilingual Whisper model; the loaded ASR model is English-only"
            )
        if opts.assisted is True and self.assistant is None:
            raise InputError(
                "`assisted: true` needs a draft model, and none is loaded: set the ASSISTANT_MODEL environment "
                "variable, or send `assisted: false` (or 'auto')"
            )

    # ------------------------------------------------------------------------------------------- inference
    def transcribe(
        self,
        waveform: Waveform,
        windows: list[Span],
        opts: AsrOptions,
        plan: DecodePlan = DecodePlan(),
        progress=None,
        timer: StageTimer | None = None,
    ) -> Transcript:
        """Decode ``windows`` of ``waveform``; returns chunks in time order with absolute times.

        ``progress(done, total)`` is called after each batch; ``timer`` (a :class:`~speakerscribe.timing.StageTimer`)
        times the sub-stages ``asr_features``, ``asr_encode``, ``asr_generate``, ``asr_score``, ``asr_language``, and
        its cancellation token is checked as each one starts.
        """
        import torch

        clock = timer or StageTimer(cuda=self.placement.is_cuda)
        with torch.inference_mode():
            return self._transcribe(waveform, windows, opts, plan, progress, clock)

    def _transcribe(
        self, waveform: Waveform, windows: list[Span], opts: AsrOptions, plan: DecodePlan, progress, clock
    ) -> Transcript:
        language, language_prob = self.language_code(opts.language) or (None if self.multilingual else "en"), None
        if not windows:
            return Transcript(chunks=(), language=language)
        decoded, language, detected = self._decode_windows(waveform, windows, opts, plan, language, progress, clock)
        language_prob = detected if detected is not None else language_prob
        if self.min_new_tokens is None and opts.fallback_temperatures:
            decoded = self._split_loops(waveform, decoded, opts, plan, language, clock)
        chunks: list[Chunk] = []
        for d in sorted(decoded, key=lambda d: d.window.start):
            chunks.extend(self._chunks(d, waveform.duration, language, opts, plan.word_timestamps))
        return Transcript(chunks=tuple(chunks), language=language, language_probability=language_prob)

    def _decode_windows(
        self,
        waveform: Waveform,
        windows: list[Span],
        opts: AsrOptions,
        plan: DecodePlan,
        language: str | None,
        progress,
        clock,
    ) -> tuple[list[_Decoded], str, float | None]:
        """Every window decoded (longest first, in batches); returns them in ``windows`` order, the language, and
        its probability when it was detected here."""
        order = sorted(range(len(windows)), key=lambda i: windows[i].end - windows[i].start, reverse=True)
        step = 1 if plan.assisted else max(1, plan.batch_size)
        decoded: dict[int, _Decoded] = {}
        probability = None
        for b in range(0, len(order), step):
            idx = order[b : b + step]
            batch = [windows[i] for i in idx]
            with clock("asr_features"):
                features = self.features(waveform, batch)
            with clock("asr_encode"):
                enc = self.encode(features)
            if language is None:  # the first batch holds the longest windows: detect from their encodings
                with clock("asr_language"):
                    language, probability = self.detect_language(enc, batch)
            for i, d in zip(idx, self._decode_batch(enc, batch, language, opts, plan, clock)):
                decoded[i] = d
            if progress is not None:
                progress(len(decoded), len(windows))
        return [decoded[i] for i in range(len(windows))], language, probability

    def _split_loops(
        self, waveform: Waveform, decoded: list[_Decoded], opts: AsrOptions, plan: DecodePlan, language: str, clock
    ) -> list[_Decoded]:
        """Windows that still loop keep their text before the loop; the rest is decoded again in shorter windows
        cut at the quietest points. After ``MAX_SPLIT_DEPTH`` halvings a loop is cut after its first copy."""
        done = list(decoded)
        for depth in range(1, MAX_SPLIT_DEPTH + 1):
            retry: list[Span] = []
            for d in done:
                if not d.repeats(opts) or d.is_silence(opts):
                    continue
                rest = _keep_before_loop(d)
                if rest is not None and rest.end - rest.start >= MIN_SPLIT_S:
                    half = max(MIN_SPLIT_S, (rest.end - rest.start) / 2)
                    retry.extend(plan_windows([rest], waveform.samples, half))
            if not retry:
                break
            logger.info("re-decoding %d shorter window(s) after a repetition loop (depth %d)", len(retry), depth)
            again, _, _ = self._decode_windows(waveform, retry, opts, plan, language, None, clock)
            done.extend(again)
        for d in done:
            if d.loops:
                _cut_loop(d)
        return done

    def features(self, waveform: Waveform, windows: list[Span]):
        slices = [waveform.samples[int(w.start * SAMPLE_RATE) : int(round(w.end * SAMPLE_RATE))] for w in windows]
        kwargs = {"device": self.placement.device} if self.placement.is_cuda else {}
        feats = self.feature_extractor(
            slices, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding="max_length", **kwargs
        ).input_features
        return feats.to(self.placement.device, self.placement.dtype)

    def encode(self, features):
        return self.model.model.encoder(features)

    def detect_language(self, encoder_outputs, windows: list[Span]) -> tuple[str, float]:
        """Language from the first (longest) ``DETECT_WINDOWS`` encoded windows: their language probabilities
        averaged with weights = window duration. Returns (code, probability)."""
        import torch
        from transformers.modeling_outputs import BaseModelOutput

        longest = windows[:DETECT_WINDOWS]
        enc = BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[: len(longest)])
        with torch.inference_mode():
            sot = torch.full((len(longest), 1), self.sot, device=self.placement.device, dtype=torch.long)
            logits = self.model(encoder_outputs=enc, decoder_input_ids=sot, use_cache=False).logits[:, 0].float()
        codes = list(self.lang_to_id)
        ids = torch.tensor([self.lang_to_id[c] for c in codes], device=logits.device)
        probs = torch.softmax(logits[:, ids], dim=-1).cpu().numpy()
        weights = np.array([w.end - w.start for w in longest])
        mean = (probs * weights[:, None]).sum(0) / weights.sum()
        k = int(np.argmax(mean))
        return codes[k], float(mean[k])

    def prompt_ids(self, language: str, task: str, text: str | None = None) -> list[int]:
        """Decoder prefix: [<|startofprev|> prompt tokens]? <|startoftranscript|> [language, task]."""
        head: list[int] = []
        if text and text.strip() and self.prev_sot is not None:
            tokens = self.tokenizer.encode(" " + text.strip(), add_special_tokens=False)
            limit = self.model.config.max_target_positions // 2 - 1  # Whisper keeps the last 223 prompt tokens
            head = [self.prev_sot, *tokens[-limit:]]
        if not self.multilingual:
            return [*head, self.sot]
        return [*head, self.sot, self.lang_to_id[language], int(self.task_to_id[task])]

    def generate(self, encoder_outputs, prompt: list[int], assistant=None, temperature: float = 0.0, check=None):
        """Decoding with timestamps from ``prompt``, for every row of ``encoder_outputs`` at once.

        Greedy decoding and sampling run in :func:`~speakerscribe.asr.greedy.greedy_decode` (the same tokens, a
        fraction of the per-step overhead); sampling draws from a generator of this call's own, seeded with
        ``FALLBACK_SEED``, so the same request samples the same words however many others sample beside it. The
        draft model, the static cache and forced token counts go through :meth:`generate_with_transformers`, which
        can only sample from the process-wide generator: such samplings take turns (seeding it, drawing, putting
        its state back). ``check()`` (the tight loop only) runs before every decoding step and may raise to stop it.
        Returns (B, len(prompt) + new) token ids.
        """
        import torch

        batch = encoder_outputs.last_hidden_state.shape[0]
        ids = torch.tensor([prompt], device=self.placement.device, dtype=torch.long).repeat(batch, 1)
        # one position stays free for the end-of-text token the scoring pass appends
        limit = self.model.config.max_target_positions - 1
        new_tokens = min(self.max_new_tokens or limit, limit - len(prompt))
        if assistant is None and not self.static_cache and self.min_new_tokens is None:
            generator = None
            if temperature > 0:
                generator = torch.Generator(device=self.placement.device).manual_seed(FALLBACK_SEED)
            return greedy_decode(
                self.model,
                encoder_outputs.last_hidden_state,
                ids,
                self.timestamp_rules,
                new_tokens,
                stop_row=self.ends_in_loop,
                projection=self.projection,
                check=check,
                temperature=temperature,
                generator=generator,
            )
        if temperature <= 0:
            return self.generate_with_transformers(encoder_outputs, ids, new_tokens, assistant, temperature)
        with _GLOBAL_SAMPLING, torch.random.fork_rng(devices=[]):
            torch.manual_seed(FALLBACK_SEED)
            return self.generate_with_transformers(encoder_outputs, ids, new_tokens, assistant, temperature)

    def ends_in_loop(self, generated: list[int]) -> bool:
        """Whether a row's generated tokens (timestamps included) end in a repetition loop: the stop criterion of
        both decoding paths, over the last ``_LOOP_TAIL`` tokens."""
        return ends_in_loop(text_token_ids(generated[-_LOOP_TAIL:], self.eos))

    def generate_with_transformers(self, encoder_outputs, ids, new_tokens: int, assistant=None, temperature=0.0):
        """The generic ``GenerationMixin.generate`` from ``ids`` (B, P) for ``new_tokens`` at most, with Whisper's
        timestamp rules as a logits processor (timestamps in pairs, never decreasing, the first one within 1 s), the
        model's suppressed tokens and the stop-on-loop criterion, instead of Whisper's own ``generate``, whose
        long-form machinery <= 30 s windows do not need. Greedy, it is what the tight loop must equal
        (``tests/test_greedy.py``, ``benchmarks/greedy_loop.py``)."""
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList
        from transformers.generation.logits_process import WhisperTimeStampLogitsProcessor
        from transformers.generation.utils import GenerationMixin

        gen = self.model.generation_config
        prompt_length = ids.shape[1]
        config = GenerationConfig(
            decoder_start_token_id=self.sot,
            eos_token_id=self.eos,
            pad_token_id=self.eos,
            bos_token_id=self.eos,
            do_sample=temperature > 0,
            temperature=temperature if temperature > 0 else None,
            top_k=0 if temperature > 0 else None,
            num_beams=1,
            max_length=prompt_length + new_tokens,
            min_new_tokens=self.min_new_tokens,
            suppress_tokens=list(gen.suppress_tokens or []) or None,
            begin_suppress_tokens=list(gen.begin_suppress_tokens or []) or None,
        )
        timestamps = WhisperTimeStampLogitsProcessor(gen, begin_index=prompt_length)
        if self.static_cache and assistant is None:
            # a fixed-size KV cache: with CUDA, transformers compiles the decoder step for it (CUDA graphs)
            config.cache_implementation = "static"
        kwargs = {"assistant_model": assistant} if assistant is not None else {}
        if self.min_new_tokens is None:  # forced token counts (benchmarks) must not stop early
            kwargs["stopping_criteria"] = StoppingCriteriaList([_StopOnLoop(prompt_length, self.eos)])
        # a draft model's generate, run by transformers for us, logs a generation-config deprecation and duplicated
        # SuppressTokens processor notices (about its own internal call): quiet for the assisted call only
        quiet = quiet_transformers() if assistant is not None else contextlib.nullcontext()
        with self._generate_lock, quiet:
            return GenerationMixin.generate(
                self.model,
                encoder_outputs=encoder_outputs,
                decoder_input_ids=ids,
                generation_config=config,
                logits_processor=LogitsProcessorList([timestamps]),
                **kwargs,
            )

    def _decode_batch(
        self, enc, windows: list[Span], language: str, opts: AsrOptions, plan: DecodePlan, clock
    ) -> list[_Decoded]:
        """Decode a batch of encoded windows; windows that fail are decoded again at higher temperatures."""
        prompt = self.prompt_ids(language, opts.task, opts.prompt)
        assistant = self.assistant if plan.assisted else None
        words = plan.word_timestamps
        out = self._attempt(enc, windows, prompt, opts, words, clock, opts.temperature, assistant)
        if self.min_new_tokens is not None:  # forced token counts (benchmarks): no recovery
            return out
        attempts = {i: [d] for i, d in enumerate(out) if d.failed(opts)}
        failing = list(attempts)
        for temperature in (t for t in opts.fallback_temperatures if t > opts.temperature):
            if not failing:
                break
            sub = _select_rows(enc, failing)
            retry = self._attempt(sub, [windows[i] for i in failing], prompt, opts, words, clock, temperature)
            for i, d in zip(failing, retry):
                attempts[i].append(d)
            failing = [i for i, d in zip(failing, retry) if d.failed(opts)]
        for i, tries in attempts.items():
            out[i] = tries[-1] if i not in failing else _best_attempt(tries, opts)
            if len(tries) > 1:
                logger.info(
                    "window %.1f-%.1f s: %d attempts, kept temperature %.1f (avg log-prob %.2f, compression %.2f%s)",
                    windows[i].start,
                    windows[i].end,
                    len(tries),
                    out[i].temperature,
                    out[i].avg_logprob,
                    out[i].compression_ratio,
                    ", loops" if out[i].loops else "",
                )
        return out

    def _attempt(
        self,
        enc,
        windows: list[Span],
        prompt: list[int],
        opts: AsrOptions,
        words: bool,
        clock,
        temperature: float,
        assistant=None,
    ) -> list[_Decoded]:
        """One decoding of every row at ``temperature`` (seeded when sampling), scored."""

        with clock("asr_generate"):
            check = clock.cancel.check if clock.cancel is not None else None
            sequences = self.generate(enc, prompt, assistant, temperature, check=check)
            generated = [self._strip_prompt(s.tolist()[len(prompt) :]) for s in sequences]
        out = []
        for w, g in zip(windows, generated):
            text_tokens = text_token_ids(g, self.eos)
            text = self.tokenizer.decode(text_tokens, skip_special_tokens=True) if text_tokens else ""
            out.append(
                _Decoded(
                    window=w,
                    segments=split_segments(g, self.timestamp_begin, self.eos),
                    temperature=temperature,
                    text=text,
                    compression_ratio=compression_ratio(text) if text.strip() else 0.0,
                    loops=find_loop(text_tokens) is not None,
                )
            )
        with clock("asr_score"):
            self._score(enc.last_hidden_state, prompt, generated, words, out, windows)
        return out

    def _strip_prompt(self, ids: list[int]) -> list[int]:
        """Drop any leading prompt tokens (start/language/task) that ``generate`` returned; cut at end-of-text."""
        k = 0
        while k < len(ids) and self.eos < ids[k] < self.timestamp_begin:
            k += 1
        body = ids[k:]
        if self.eos in body:
            body = body[: body.index(self.eos)]
        return body

    def _score(
        self,
        encoder_states,
        prompt: list[int],
        generated: list[list[int]],
        words: bool,
        out: list[_Decoded],
        windows: list[Span],
    ) -> None:
        """Teacher-forced pass over ``prompt`` + each generated row: no-speech probability, mean log-probability,
        and cross-attention for words."""
        import torch

        p = len(prompt)
        sot_at = prompt.index(self.sot)
        rows = [prompt + g + [self.eos] for g in generated]
        longest = max(len(r) for r in rows)
        ids = torch.full((len(rows), longest), self.eos, dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, : len(r)] = torch.tensor(r)
        ids = ids.to(self.placement.device)
        want_words = words and bool(self.alignment_heads)
        decoder = self.model.model.decoder
        if want_words:
            with capture_cross_attention(self.model, self.alignment_heads) as attention:
                hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
                attn = attention().float().cpu().numpy()  # (B, heads, T, frames)
        else:
            hidden = decoder(input_ids=ids, encoder_hidden_states=encoder_states, use_cache=False).last_hidden_state
        for i, (d, g) in enumerate(zip(out, generated)):
            n = p + len(g)  # positions 0..n-1 predict rows[1..n]
            logprobs = self._logprobs(hidden[i, :n], ids[i, 1 : n + 1])
            first = self._log_softmax_row(hidden[i, sot_at])
            if self.no_speech_id is not None:
                d.no_speech_prob = float(np.exp(first[self.no_speech_id]))
            # mean over the generated tokens and the closing end-of-text, as Whisper does
            d.avg_logprob = float(np.mean(logprobs[p - 1 :])) if n > p - 1 else 0.0
            if want_words:
                text_pos = [k for k, t in enumerate(g) if t < self.eos]
                if text_pos:
                    # row (p - 1 + k) predicts generated token k; add the end-of-text row for the last word's end
                    att_rows = [p - 1 + k for k in text_pos] + [p - 1 + len(g)]
                    n_frames = int(np.ceil((windows[i].end - windows[i].start) / 0.02))
                    times = token_start_times(attn[i][:, att_rows, :], n_frames)
                    d.text_positions = text_pos
                    d.token_times = {k: float(t) for k, t in zip(text_pos + [len(g)], times)}

    def _logprobs(self, hidden, targets) -> np.ndarray:
        import torch

        out = []
        for a in range(0, hidden.shape[0], _LOGIT_ROWS):
            logits = self.projection(hidden[a : a + _LOGIT_ROWS]).float()
            lp = logits.gather(-1, targets[a : a + _LOGIT_ROWS, None])[:, 0] - torch.logsumexp(logits, dim=-1)
            out.append(lp.cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    def _log_softmax_row(self, hidden_row) -> np.ndarray:
        import torch

        logits = self.projection(hidden_row[None]).float()[0]
        return torch.log_softmax(logits, dim=-1).cpu().numpy()

    # ------------------------------------------------------------------------------------------- assembly
    def _chunks(self, d: _Decoded, duration: float, language: str, opts: AsrOptions, with_words: bool) -> list[Chunk]:
        if not d.segments or d.is_silence(opts):
            return []
        w0 = d.window.start
        wlen = d.window.end - d.window.start
        chunks = []
        position = 0  # index into the window's generated-token list of the segment's first token
        gen_positions = d.text_positions
        floor = 0.0  # segments never start before the previous one ended: times stay monotonic
        for seg in d.segments:
            text = self.tokenizer.decode(list(seg.token_ids), skip_special_tokens=True)
            start = min(max(seg.start, floor), wlen)
            end = min(seg.end if seg.end is not None else wlen, wlen)
            end = max(end, start)
            floor = end
            words: tuple[Word, ...] = ()
            if with_words and gen_positions:
                seg_pos = gen_positions[position : position + len(seg.token_ids)]
                words = self._words(list(seg.token_ids), seg_pos, d.token_times, start, end, w0, language)
                if seg.end is None and words:  # never closed (a cut loop, the token limit): end at its last word
                    end = floor = max(start, words[-1].end - w0)
            position += len(seg.token_ids)
            if not text.strip():
                continue
            chunks.append(
                Chunk(
                    start=round(w0 + start, 3),
                    end=round(min(w0 + end, duration), 3),
                    text=text,
                    words=words,
                    avg_logprob=round(d.avg_logprob, 4),
                    no_speech_prob=round(d.no_speech_prob, 4),
                )
            )
        return chunks

    def _words(
        self,
        token_ids: list[int],
        positions: list[int],
        times: dict[int, float],
        seg_start: float,
        seg_end: float,
        offset: float,
        language: str,
    ) -> tuple[Word, ...]:
        words = []
        all_positions = sorted(times)
        for text, a, b in group_words(token_ids, self.tokenizer, language):
            start_pos = positions[a]
            end_pos = positions[b] if b < len(positions) else _next(all_positions, positions[b - 1])
            start = min(max(times.get(start_pos, seg_start), seg_start), seg_end)
            end = min(max(times.get(end_pos, seg_end), start), seg_end)
            words.append(Word(text=text, start=round(offset + start, 3), end=round(offset + end, 3)))
        return tuple(words)


def _select_rows(encoder_outputs, rows: list[int]):
    """The encoder outputs of some rows of a batch."""
    from transformers.modeling_outputs import BaseModelOutput

    return BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[rows])


def _loop_segment(d: _Decoded) -> int:
    """Index of the first segment that takes part in a repetition: the one where a token loop starts, else the
    first segment whose text repeats the one before it; 0 when the repetition has no such structure."""
    tokens = [t for seg in d.segments for t in seg.token_ids]
    found = find_loop(tokens)
    if found is not None:
        ends = np.cumsum([len(seg.token_ids) for seg in d.segments])
        return int(np.searchsorted(ends, found[0], side="right"))
    for j in range(1, len(d.segments)):
        if d.segments[j].token_ids == d.segments[j - 1].token_ids:
            return j
    return 0


def _keep_before_loop(d: _Decoded) -> Span | None:
    """Drop the segments from the loop on; returns the rest of the window (absolute seconds) to decode again."""
    j = _loop_segment(d)
    start = d.window.start + (d.segments[j].start if j < len(d.segments) else 0.0)
    if j > 0:
        start = max(start, d.window.start + (d.segments[j - 1].end or d.segments[j - 1].start))
    d.segments = d.segments[:j]
    d.loops, d.compression_ratio = False, 0.0
    return Span(start, d.window.end) if start < d.window.end else None


def _cut_loop(d: _Decoded) -> None:
    """Keep the text up to the end of the repeated block's first copy."""
    tokens = [t for seg in d.segments for t in seg.token_ids]
    found = find_loop(tokens)
    if found is None:
        return
    keep = found[0] + found[1]
    out, used = [], 0
    for seg in d.segments:
        if used >= keep:
            break
        take = seg.token_ids[: keep - used]
        out.append(seg if len(take) == len(seg.token_ids) else RawSegment(seg.start, None, take))
        used += len(take)
    d.segments = out
    d.loops = False


def _next(sorted_positions: list[int], pos: int) -> int:
    i = int(np.searchsorted(sorted_positions, pos, side="right"))
    return sorted_positions[i] if i < len(sorted_positions) else pos


def load_assistant(auto_class, assistant_id: str, kwargs: dict):
    """``ASSISTANT_MODEL`` as a causal-LM draft model. A distil-Whisper checkpoint holds an encoder too, which a
    draft (``WhisperForCausalLM``) does not use: the main model's encoder output feeds it. transformers reports
    those weights as unexpected in a ~30-line block; it is kept quiet and the weights the draft needs but the
    checkpoint lacks (which would be left random) are reported here instead."""
    try:
        with quiet_transformers():
            model, info = auto_class.from_pretrained(assistant_id, output_loading_info=True, **kwargs)
    except Exception as exc:
        raise ModelLoadError(f"could not load ASSISTANT_MODEL {assistant_id!r}: {short_message(exc)}") from exc
    missing = sorted(info.get("missing_keys") or ())
    if missing:
        logger.warning(
            "ASSISTANT_MODEL %r lacks %d weights of a %s (left random: the output stays right, drafts are rarely "
            "accepted): %s",
            assistant_id,
            len(missing),
            type(model).__name__,
            ", ".join(missing[:5]),
        )
    logger.debug("ASSISTANT_MODEL %r: %d unused weights", assistant_id, len(info.get("unexpected_keys") or ()))
    return model
