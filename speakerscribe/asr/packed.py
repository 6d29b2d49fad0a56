"""Whisper's decoder linears in bfloat16 on a CPU, with their weights packed once for oneDNN.

A decoding step multiplies one row (or a few) by each of the decoder's linear layers. In bfloat16, PyTorch's
``linear`` hands oneDNN a plain weight at every call, and for such small products the call's fixed cost dominates:
measured on the 2-core Xeon (AMX) here, one row through a 384x384 layer 33.7 us (8.5 us in float32), 1536x384
55.2 us, 2048x512 86.5 us. oneDNN's own linear on a weight reordered once into its blocked layout (the pair of
operators PyTorch's compiler uses for frozen CPU models, ``mkldnn._reorder_linear_weight`` and
``mkldnn._linear_pointwise``) takes 22.8, 26.1 and 36.4 us, and stays as fast at 16 rows.

So on a CPU, for a bfloat16 model whose PyTorch has these operators, every ``nn.Linear`` of the decoder is
replaced by :class:`PackedLinear` (the same product; the packed weight replaces the plain one, no memory is added).
The encoder (1500 rows a window, bound by arithmetic) and the vocabulary projection (:mod:`.greedy`,
:mod:`.screened`) keep theirs. Forward hooks on the layers (word timestamps' alignment heads) still see every call.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

ROWS_HINT = 8  # the row count oneDNN lays the packed weight out for (a decoding step's rows: 1 to ~24)


def packing_available(model) -> bool:
    """Whether ``model``'s decoder linears can be packed: bfloat16, on a CPU, a PyTorch with oneDNN's bfloat16
    linear operators."""
    import torch

    if model.dtype != torch.bfloat16 or model.device.type != "cpu":
        return False
    ops = torch.ops.mkldnn
    try:
        return (
            torch.backends.mkldnn.is_available()
            and hasattr(ops, "_reorder_linear_weight")
            and hasattr(ops, "_linear_pointwise")
            and bool(ops._is_mkldnn_bf16_supported())
        )
    except (AttributeError, RuntimeError):  # pragma: no cover - a PyTorch built without oneDNN
        return False


def _packed_linear_class():
    import torch

    class PackedLinear(torch.nn.Module):
        """``nn.Linear`` with the weight in oneDNN's blocked layout: (..., in) -> (..., out), bfloat16."""

        def __init__(self, linear):
            super().__init__()
            self.in_features, self.out_features = linear.in_features, linear.out_features
            self.packed = torch.ops.mkldnn._reorder_linear_weight(linear.weight.detach(), ROWS_HINT)
            self.bias = linear.bias

        def forward(self, x):
            rows = x.reshape(-1, self.in_features)
            bias = None if self.bias is None else self.bias.detach()
            out = torch.ops.mkldnn._linear_pointwise(rows, self.packed, bias, "none", [], "")
            return out.reshape(*x.shape[:-1], self.out_features)

        def extra_repr(self) -> str:
            return f"in_features={self.in_features}, out_features={self.out_features}, packed for oneDNN"

    return PackedLinear


def pack_decoder_linears(model) -> int:
    """Replace every ``nn.Linear`` of ``model.model.decoder`` by a packed one, in place, where
    :func:`packing_available`; returns how many were replaced (0 where not)."""
    import torch

    if not packing_available(model):
        return 0
    decoder = model.model.decoder
    packed_linear = _packed_linear_class()
    replaced = 0
    for name, module in list(decoder.named_modules()):
        if type(module) is torch.nn.Linear:
            parent, _, leaf = name.rpartition(".")
            setattr(decoder.get_submodule(parent), leaf, packed_linear(module))
            replaced += 1
    logger.debug("Whisper's decoder: %d linear layers packed for oneDNN (bfloat16)", replaced)
    return replaced
