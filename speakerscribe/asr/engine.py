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

* a row stops decoding as soon as its text ends in a repetition loop (:func:`~.tokens.ends_in_loop`);
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

import numpy as np

from ..errors import InputError, ModelLoadError, short_message
from ..options import AsrOptions
from ..records import SAMPLE_RATE, Chunk, Span, Transcript, Waveform
from ..runtime import OwnThread, Placement, quiet_generation_warnings, quiet_transformers
from ..timing import StageTimer
from . import assembly, decoding, recovery, refill
from . import features as window_inputs
from .attention import STEP_ATTENTIONS, use_step_attention
from .coverage import SpeechMap
from .decoded import Decoded, DecodePlan
from .greedy import TimestampRules, VocabProjection
from .languages import normalise_language
from .packed import pack_decoder_linears
from .quantized import Int8Steps, use_int8_steps, use_screening
from .quantized import int8_steps as build_int8_steps
from .screened import ScreenedProjection

logger = logging.getLogger(__name__)

WINDOW_S = 30.0


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
        int8_steps: Int8Steps | None = None,
    ):
        self.model = model
        self.int8_steps = int8_steps  # the decoding steps' int8 copy of the decoder (:mod:`.quantized`), or None
        self.static_cache = static_cache
        # transformers keeps ONE static KV cache on the model and reuses it across generate() calls, so concurrent
        # requests (MAX_CONCURRENCY > 1) must take turns decoding when it is on; encoders still run in parallel
        self._generate_lock = threading.Lock() if static_cache else contextlib.nullcontext()
        # ... and on CUDA, where the decoder step is compiled with CUDA graphs, all of that decoding (the warm-up's
        # too) runs in one thread of its own: the graphs belong to the thread that made them (runtime.OwnThread)
        compiled = static_cache and placement.is_cuda
        self.decoder_thread = OwnThread("static-cache decoder", setup=own_cuda_graph_state) if compiled else None
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
        decoder_quantization: str = "screened",
    ) -> WhisperEngine:
        from transformers import (
            AutoModelForCausalLM,
            AutoTokenizer,
            WhisperFeatureExtractor,
            WhisperForConditionalGeneration,
        )

        int8 = use_int8_steps(decoder_quantization, placement.device, greedy_loop=not static_cache)
        screened = use_screening(decoder_quantization, placement.device, greedy_loop=not static_cache)
        kwargs = dict(dtype=placement.dtype, attn_implementation=placement.attn_implementation, token=token)
        try:
            model = WhisperForConditionalGeneration.from_pretrained(model_id, **kwargs)
            feature_extractor = WhisperFeatureExtractor.from_pretrained(model_id, token=token)
            tokenizer = AutoTokenizer.from_pretrained(model_id, token=token)
        except Exception as exc:
            raise ModelLoadError(f"could not load ASR_MODEL {model_id!r}: {short_message(exc)}") from exc
        model.to(placement.device).eval()
        if placement.device == "cpu" and placement.attn_implementation == "sdpa" and not static_cache:
            use_step_attention(model)
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
        steps = build_int8_steps(model, greedy=decoder_quantization == "int8") if int8 else None
        if placement.device == "cpu" and not static_cache:
            pack_decoder_linears(model)  # after the int8 copy, which quantizes plain linears
        engine = cls(model, feature_extractor, tokenizer, placement, assistant, max_new_tokens, static_cache, steps)
        if screened:
            engine.projection = ScreenedProjection.of(
                model.proj_out, engine.projection, engine.timestamp_rules, engine.no_speech_id
            )
        return engine

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
        speech: SpeechMap | None = None,
    ) -> Transcript:
        """Decode ``windows`` of ``waveform``; returns chunks in time order with absolute times. With ``speech``
        (what the VAD heard), windows whose transcript stops before their speech does are decoded again from there on
        their own encoder states (:mod:`.refill`); the tails that gave nothing sure are the transcript's
        ``declined``.

        ``progress(done, total)`` is called after each batch; ``timer`` (a :class:`~speakerscribe.timing.StageTimer`)
        times the sub-stages ``asr_features``, ``asr_encode``, ``asr_generate``, ``asr_score``, ``asr_language``, and
        its cancellation token is checked as each one starts.
        """
        import torch

        clock = timer or StageTimer(cuda=self.placement.is_cuda)
        with torch.inference_mode():
            return self._transcribe(waveform, windows, opts, plan, progress, clock, speech)

    def _transcribe(
        self, waveform: Waveform, windows: list[Span], opts: AsrOptions, plan: DecodePlan, progress, clock, speech
    ) -> Transcript:
        language, language_prob = self.language_code(opts.language) or (None if self.multilingual else "en"), None
        if not windows:
            return Transcript(chunks=(), language=language)
        if self.min_new_tokens is not None:  # forced token counts (benchmarks): no tails decoded again
            speech = None
        tails: tuple[list[Decoded], list[Span]] = ([], [])
        decoded, language, detected = self._decode_windows(
            waveform, windows, opts, plan, language, progress, clock, speech, tails
        )
        language_prob = detected if detected is not None else language_prob
        if self.min_new_tokens is None and opts.fallback_temperatures:
            decoded = recovery.split_loops(self, waveform, decoded, opts, plan, language, clock)
        chunks: list[Chunk] = []
        # a window's tail decoded again follows the window's own chunks (the sort keeps that order)
        for d in sorted(decoded + tails[0], key=lambda d: d.window.start):
            chunks.extend(assembly.window_chunks(self, d, waveform.duration, language, opts, plan.word_timestamps))
        return Transcript(
            chunks=tuple(chunks), language=language, language_probability=language_prob, declined=tuple(tails[1])
        )

    def _decode_windows(
        self,
        waveform: Waveform,
        windows: list[Span],
        opts: AsrOptions,
        plan: DecodePlan,
        language: str | None,
        progress,
        clock,
        speech: SpeechMap | None = None,
        tails: tuple[list[Decoded], list[Span]] | None = None,
    ) -> tuple[list[Decoded], str, float | None]:
        """Every window decoded (longest first, in batches); returns them in ``windows`` order, the language, and
        its probability when it was detected here. Tails decoded again (:mod:`.refill`) go to ``tails``: (kept,
        declined)."""
        order = sorted(range(len(windows)), key=lambda i: windows[i].end - windows[i].start, reverse=True)
        step = 1 if plan.assisted else max(1, plan.batch_size)
        decoded: dict[int, Decoded] = {}
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
            done = recovery.decode_batch(self, enc, batch, language, opts, plan, clock)
            for i, d in zip(idx, done):
                decoded[i] = d
            kept, declined = refill.refill_tails(
                self, enc, batch, done, waveform.duration, language, opts, plan, clock, speech
            )
            if tails is not None:
                tails[0].extend(kept)
                tails[1].extend(declined)
            if progress is not None:
                progress(len(decoded), len(windows))
        return [decoded[i] for i in range(len(windows))], language, probability

    def tight_loop(self, assistant=None) -> bool:
        """Whether decodings run in the tight loop (:func:`.greedy.greedy_decode`): not with a draft model or the
        static cache, which go through transformers' ``generate``."""
        return assistant is None and not self.static_cache

    def shares_windows(self) -> bool:
        """Whether rows decoding the same window can share its encoder states and cross-attention keys in the tight
        loop: the model attends through :func:`.attention.step_attention` (the CPU, the dynamic cache)."""
        return self.tight_loop() and self.model.config._attn_implementation in STEP_ATTENTIONS

    def ends_in_loop(self, generated: list[int]) -> bool:
        """Whether a row's generated tokens end in a repetition loop (:func:`.decoding.row_ends_in_loop`)."""
        return decoding.row_ends_in_loop(generated, self.eos)

    # ------------------------------------------------------------------------- the jobs, one module each
    def features(self, waveform: Waveform, windows: list[Span]):
        """(B, mel, 3000) log-mel features of ``windows`` (:func:`.features.window_features`)."""
        return window_inputs.window_features(self, waveform, windows)

    def encode(self, features):
        return window_inputs.encode(self, features)

    def detect_language(self, encoder_outputs, windows: list[Span]) -> tuple[str, float]:
        return window_inputs.detect_language(self, encoder_outputs, windows)

    def prompt_ids(self, language: str, task: str, text: str | None = None) -> list[int]:
        return window_inputs.prompt_ids(self, language, task, text)

    def generate(self, encoder_outputs, prompt: list[int], assistant=None, temperature: float = 0.0, check=None):
        """(B, len(prompt) + new) token ids (:func:`.decoding.generate`)."""
        return decoding.generate(self, encoder_outputs, prompt, assistant, temperature, check)

    def generate_with_transformers(self, encoder_outputs, ids, new_tokens: int, assistant=None, temperature=0.0):
        return decoding.generate_with_transformers(self, encoder_outputs, ids, new_tokens, assistant, temperature)


def own_cuda_graph_state() -> None:
    """Give the calling thread its own CUDA-graph-tree state. PyTorch up to 2.11 creates that state only in the
    thread that first imports ``torch._inductor.cudagraph_trees`` and asserts in any other (pytorch/pytorch#123177;
    later releases create it per thread on first use, as this does): whichever thread imported it first, the
    static-cache decoder thread compiles and replays its graphs with state of its own."""
    import torch

    try:
        from torch._inductor import cudagraph_trees
    except ImportError:  # a PyTorch without inductor compiles nothing
        return
    local = cudagraph_trees.local
    if hasattr(local, "tree_manager_containers") or torch._C._is_key_in_tls("tree_manager_containers"):
        return  # this thread has it already (it imported the module, or PyTorch made it)
    if hasattr(cudagraph_trees, "_initialize_tls"):  # releases with the fix expose what they run per thread
        cudagraph_trees._initialize_tls(local)
        return
    # older releases run these at import only: the same for this thread (per device: a container, a lock)
    from collections import defaultdict

    local.tree_manager_containers = {}
    local.tree_manager_locks = defaultdict(threading.Lock)
    torch._C._stash_obj_in_tls("tree_manager_containers", local.tree_manager_containers)
    torch._C._stash_obj_in_tls("tree_manager_locks", local.tree_manager_locks)


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
