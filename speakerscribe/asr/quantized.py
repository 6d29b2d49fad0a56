"""Decoding steps with int8 weights on a CPU: a copy of Whisper's decoder whose linear layers (and the projection
onto the vocabulary) are int8, dynamically quantized (PyTorch's ``quantize_dynamic``: int8 weights made once, each
call's activations quantized on the fly).

A greedy decoding step multiplies one row per window by every weight of the decoder and by the (vocab, d) token
embedding: on a CPU it is bound by reading weights, and int8 reads a quarter of float32's bytes (half of
bfloat16's). Measured on the 2-core AMD EPYC here (``benchmarks/peers.py``, README "int8 decoding steps"): the
vocabulary projection of tiny.en 2.2 ms -> 0.33 ms a step for one row (bfloat16 -> int8), a decoder step 1.1-1.6x
(bfloat16) and 1.5-2x (float32) at batch 1-24, whole requests 1.0-1.4x. faster-whisper's int8 mode does the same
to every layer; here the encoder (1500 rows a window, bound by arithmetic, where bfloat16 was as fast as int8) and
the scoring pass (which gives the confidence and word times of what was decoded) keep the model's own weights, so a
window's log-probability, its no-speech probability and its word times are the full-precision model's verdict on
the int8 decoding.

Only the tight loop (:func:`~.greedy.greedy_decode`) uses it; the draft model and the static cache go through
transformers' ``generate`` with the model as it is. ``DECODER_QUANTIZATION`` chooses (:func:`use_int8_steps`), and
the default is ``none``: int8 steps cost real-meeting coverage (AMI train + dev 0.876 -> 0.866 with whisper-base and
the diarizer, ``benchmarks/accuracy.py --sets ami --counts default``; 0.870 with only the sampled attempts on int8,
one window's draw), under the 0.877 that issue 25 holds. ``sampled`` runs the temperature fallback's sampled
attempts on them, ``int8`` every step.
"""

from __future__ import annotations

import copy
import logging
import warnings
from dataclasses import dataclass
from typing import Any, Literal, get_args

from ..errors import ModelLoadError

logger = logging.getLogger(__name__)

# ModelSettings.decoder_quantization validates with it
DecoderQuantization = Literal["screened", "none", "sampled", "int8"]
CHOICES: tuple[str, ...] = get_args(DecoderQuantization)


@dataclass(frozen=True)
class Int8Steps:
    """What :func:`~.greedy.greedy_decode` runs a step with: ``decoder`` (a copy of Whisper's decoder, in the
    model's precision, whose linears have int8 weights) and ``projection`` (hidden states -> float32 logits, int8
    weights)."""

    decoder: Any
    projection: Any
    greedy: bool = False  # greedy steps too (DECODER_QUANTIZATION=int8); else only sampled ones (sampled)

    def used_for(self, temperature: float) -> bool:
        """Whether a decoding at ``temperature`` steps on these weights."""
        return self.greedy or temperature > 0


def _int8_linear_class():
    import torch

    class Int8Linear(torch.nn.Module):
        """A dynamically quantized linear layer (int8 weights, one scale per output row) between activations of
        the model's precision: its kernels take and give float32, the attention around it stays in the model's
        precision (bfloat16 halves what cross-attention reads over 1500 encoder frames at every step)."""

        def __init__(self, quantized):
            super().__init__()
            self.quantized = quantized

        def forward(self, x):
            return self.quantized(x.float()).to(x.dtype)

    return Int8Linear


class _Projection:
    """``proj_out`` with int8 weights: (rows, d) hidden states of any float dtype -> (rows, vocab) float32."""

    def __init__(self, linear):
        self.linear = linear

    def __call__(self, hidden):
        return self.linear(hidden.float())


def int8_engine() -> str | None:
    """The quantized-kernel engine PyTorch uses on this CPU (``x86`` on x86-64, ``qnnpack`` on ARM), or None
    where it has none."""
    import torch

    engine = torch.backends.quantized.engine
    return engine if engine and engine != "none" else None


def _check(choice: str) -> None:
    if choice not in CHOICES:
        raise ModelLoadError(f"DECODER_QUANTIZATION={choice!r} is not one of {', '.join(CHOICES)}")


def use_screening(choice: str, device: str, greedy_loop: bool) -> bool:
    """Whether greedy steps project onto the vocabulary through the int8 screen (:mod:`.screened`): ``screened``
    (the default) where it can run (a CPU whose PyTorch has quantized kernels, the tight loop), else the model's
    weights, without an error: the screen changes no decision it is meant for, only the speed."""
    _check(choice)
    return choice == "screened" and device == "cpu" and greedy_loop and int8_engine() is not None


def use_int8_steps(choice: str, device: str, greedy_loop: bool) -> bool:
    """Whether int8 decoding weights are made: ``none`` never; ``sampled`` (for the temperature fallback's sampled
    attempts) and ``int8`` (for every step) on a CPU whose PyTorch has quantized kernels, when the tight loop
    decodes (not with ``STATIC_CACHE``), and an error naming why where they cannot be."""
    _check(choice)
    if choice in ("none", "screened"):
        return False
    if device != "cpu":
        why = f"the model runs on {device}"
    elif not greedy_loop:
        why = "STATIC_CACHE decodes through transformers' generate"
    elif int8_engine() is None:
        why = "this PyTorch has no quantized CPU kernels"
    else:
        return True
    raise ModelLoadError(f"DECODER_QUANTIZATION={choice} runs the decoding steps on a CPU only: {why}")


def int8_steps(model, greedy: bool = False) -> Int8Steps:
    """An int8 copy of ``model``'s decoder and vocabulary projection (the model itself is left as it is): every
    linear layer's weight quantized per output row (``per_channel_dynamic_qconfig``), everything else (embeddings,
    layer norms, attention) kept in the model's precision. One copy of the decoder is made; each linear is
    quantized from a float32 copy of that layer alone."""
    import torch

    decoder = copy.deepcopy(model.model.decoder).eval()  # the model's precision
    int8_linear = _int8_linear_class()
    for name, module in list(decoder.named_modules()):
        if isinstance(module, torch.nn.Linear):
            parent, _, leaf = name.rpartition(".")
            setattr(decoder.get_submodule(parent), leaf, int8_linear(quantized_linear(module)))
    logger.debug("Whisper decoding steps use int8 linears (%s kernels)", int8_engine())
    return Int8Steps(decoder=decoder, projection=_Projection(quantized_linear(model.proj_out)), greedy=greedy)


def quantized_linear(linear):
    """A dynamically quantized copy of one ``nn.Linear`` (int8 weights per output row, float32 in and out)."""
    import torch
    from torch.ao.quantization import per_channel_dynamic_qconfig, quantize_dynamic

    holder = torch.nn.Sequential(copy.deepcopy(linear).float().eval())
    with warnings.catch_warnings():  # torch >= 2.10 points eager-mode quantization users at torchao, every call
        warnings.simplefilter("ignore")
        return quantize_dynamic(holder, {torch.nn.Linear: per_channel_dynamic_qconfig}, inplace=True)[0]
