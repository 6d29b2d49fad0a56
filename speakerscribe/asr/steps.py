"""Whisper's decoder one decoding step at a time, over the model's own weights, without transformers' machinery.

A CPU decoding step of one row (a 30 s request decodes one window, ~100 steps of one row) reads every decoder weight
once, and in float32 the weights no longer sit in the cache by then: the step's 18 MB of cross-attention keys and
values (tiny.en) and the vocabulary projection pass through it in between. Each product's fixed cost then adds up:
measured on the 2-core AMD EPYC here (AVX2, float32, tiny.en, one row), one 384x384 linear alone takes 31 us with its
weight in the cache and 130-160 us without; 1152x384 215-290 us against 384x384's three calls of 130-160 us each.
transformers' decoder call adds its own per step: a cache object whose keys grow by concatenation, a mask function,
a copy of the config at the first step, ~70 module calls.

:class:`DecoderSteps` runs the same layers as plain operations: the self-attention's query, key and value
projections as one product (their weights laid side by side in one block, which the three ``nn.Linear`` then read
as views: no memory is added), keys and values kept in buffers that grow by doubling (:class:`StepCache`), the
cross-attention's keys and values computed once from the encoder states. The arithmetic is transformers' own, in
its order (the query scaled after its projection, :func:`~.attention.step_attention` for the attention): on the
EPYC here the hidden states are equal to the last bit in float32 for tiny.en and base at 1-20 rows
(``tests/test_steps.py`` holds it against the transformers decoder; ``benchmarks/decoder_steps.py`` times both).
Measured there with that benchmark: tiny.en 8.43 -> 6.63 ms a one-row step, 25.1 -> 22.6 ms at eight rows; base
15.2 -> 12.3 ms and 53.5 -> 49.9 ms.

Only for a CPU decoder of Whisper's layout set to the step attention (:meth:`DecoderSteps.of` answers None
otherwise, and the caller uses transformers' decoder). The three projections are fused only in float32 with plain
``nn.Linear`` layers: an int8 copy (:mod:`.quantized`) or packed bfloat16 layers (:mod:`.packed`) are called as
they are. Rows sharing a window (:class:`~.attention.SharedRows`) read its cross-attention keys and values once, as
in the transformers path.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .attention import NAME_SDPA, STEP_ATTENTIONS, SharedRows, sharing, step_attention

_FIRST_CAPACITY = 64  # self-attention positions a cache holds before it first grows


@dataclass(frozen=True)
class _Layer:
    """One decoder layer's modules, and its fused query-key-value block where it has one."""

    layer: Any  # WhisperDecoderLayer
    qkv: tuple[Any, Any] | None  # ((3d, d) weight, (3d,) bias) whose thirds are q_proj's, k_proj's, v_proj's
    heads: int
    head_dim: int
    scaling: float
    # each linear layer as (weight, bias) for F.linear where it is a plain nn.Linear (no module call), else itself
    self_out: Any = None
    cross_q: Any = None
    cross_out: Any = None
    fc1: Any = None
    fc2: Any = None


class StepCache:
    """Keys and values of a decoding in progress: self-attention (rows, heads, capacity, head_dim) a layer, of which
    the first :attr:`length` positions are filled; cross-attention (windows, heads, frames, head_dim) a layer."""

    def __init__(self, cross_keys: list, cross_values: list):
        self.cross_keys, self.cross_values = cross_keys, cross_values
        self.self_keys: list = []
        self.self_values: list = []
        self.length = 0

    def append(self, layer: int, keys, values):
        """Add (rows, heads, q, head_dim) keys and values after the filled positions of ``layer`` (the last layer's
        call moves :attr:`length` on, in :meth:`DecoderSteps.__call__`); returns every filled position's keys and
        values, these included."""
        end = self.length + keys.shape[2]
        if layer == len(self.self_keys):  # the first step: buffers made
            capacity = max(_FIRST_CAPACITY, 2 * end)
            shape = (keys.shape[0], keys.shape[1], capacity, keys.shape[3])
            self.self_keys.append(keys.new_empty(shape))
            self.self_values.append(values.new_empty(shape))
        elif end > self.self_keys[layer].shape[2]:  # full: twice the room, the filled part copied
            for buffers in (self.self_keys, self.self_values):
                old = buffers[layer]
                grown = old.new_empty((*old.shape[:2], 2 * end, old.shape[3]))
                grown[:, :, : self.length] = old[:, :, : self.length]
                buffers[layer] = grown
        self.self_keys[layer][:, :, self.length : end] = keys
        self.self_values[layer][:, :, self.length : end] = values
        return self.self_keys[layer][:, :, :end], self.self_values[layer][:, :, :end]

    def keep_rows(self, rows) -> None:
        """Only the self-attention rows ``rows`` (LongTensor) go on, in that order (a row may be repeated); the
        buffers keep their room."""
        self.self_keys = [k.index_select(0, rows) for k in self.self_keys]
        self.self_values = [v.index_select(0, rows) for v in self.self_values]

    def keep_windows(self, windows) -> None:
        """Only the cross-attention rows ``windows`` go on."""
        self.cross_keys = [k.index_select(0, windows) for k in self.cross_keys]
        self.cross_values = [v.index_select(0, windows) for v in self.cross_values]


class DecoderSteps:
    """Whisper's decoder (``model.model.decoder``) as a step function: ``steps(ids, encoder_states, cache)`` ->
    ((rows, q, d) hidden states after the final layer norm, cache). The first call (``cache`` None) takes the prompt
    and computes the cross-attention keys and values from ``encoder_states``; later calls take each row's newest
    token and ignore ``encoder_states``."""

    def __init__(self, decoder, layers: list[_Layer], single_by_sdpa: bool):
        self.decoder = decoder
        self.layers = layers
        self.single_by_sdpa = single_by_sdpa

    @classmethod
    def of(cls, decoder) -> DecoderSteps | None:
        """The steps of ``decoder``, or None where it is not a CPU decoder of Whisper's layout whose config names the
        step attention (:func:`~.attention.use_step_attention`; a deployer's ``eager`` or ``sdpa`` keeps
        transformers' decoder, and the static cache needs its masks). Fuses the
        self-attention projections of a float32 decoder of plain linears, once (the layers keep views of the block;
        a decoder moved or cast since is fused again)."""
        import torch

        if not _whisper_layout(decoder):
            return None
        layers = list(decoder.layers)
        device, dtype = decoder.embed_tokens.weight.device, decoder.embed_tokens.weight.dtype
        attention = getattr(getattr(decoder, "config", None), "_attn_implementation", None)
        if device.type != "cpu" or attention not in STEP_ATTENTIONS:
            return None
        records = []
        for layer in layers:
            attn = layer.self_attn
            qkv = _fused(attn) if dtype == torch.float32 else None
            cross = layer.encoder_attn
            records.append(
                _Layer(
                    layer,
                    qkv,
                    attn.num_heads,
                    attn.head_dim,
                    attn.scaling,
                    *map(_linear, (attn.out_proj, cross.q_proj, cross.out_proj, layer.fc1, layer.fc2)),
                )
            )
        return cls(decoder, records, attention == NAME_SDPA)

    def __call__(self, ids, encoder_states, cache: StepCache | None = None, shared: SharedRows | None = None):
        import torch.nn.functional as F

        decoder = self.decoder
        if cache is None:
            cache = self._start(encoder_states)
        start, q = cache.length, ids.shape[1]
        x = decoder.embed_tokens(ids) + decoder.embed_positions.weight[start : start + q]
        with sharing(shared):
            for index, record in enumerate(self.layers):
                x = self._layer(index, record, x, cache)
        cache.length = start + q
        norm = decoder.layer_norm
        return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps), cache

    def _start(self, encoder_states) -> StepCache:
        keys, values = [], []
        for record in self.layers:
            attn = record.layer.encoder_attn
            keys.append(_heads(attn.k_proj(encoder_states), record))
            values.append(_heads(attn.v_proj(encoder_states), record))
        return StepCache(keys, values)

    def _layer(self, index: int, record: _Layer, x, cache: StepCache):
        import torch.nn.functional as F

        layer = record.layer
        rows, q = x.shape[0], x.shape[1]
        attn = layer.self_attn
        h = _norm(layer.self_attn_layer_norm, x)
        if record.qkv is not None:
            query, key, value = F.linear(h, *record.qkv).view(rows, q, 3, record.heads, record.head_dim).unbind(2)
            query = (query * record.scaling).transpose(1, 2)
            key, value = key.transpose(1, 2), value.transpose(1, 2)
        else:
            query = _heads(attn.q_proj(h) * record.scaling, record)
            key, value = _heads(attn.k_proj(h), record), _heads(attn.v_proj(h), record)
        key, value = cache.append(index, key, value)
        out = self._attend(attn, query, key, value)
        x = x + _apply(record.self_out, out.reshape(rows, q, -1))

        cross = layer.encoder_attn
        h = _norm(layer.encoder_attn_layer_norm, x)
        query = _heads(_apply(record.cross_q, h) * record.scaling, record)
        out = self._attend(cross, query, cache.cross_keys[index], cache.cross_values[index])
        x = x + _apply(record.cross_out, out.reshape(rows, q, -1))

        h = _norm(layer.final_layer_norm, x)
        return x + _apply(record.fc2, layer.activation_fn(_apply(record.fc1, h)))

    def _attend(self, module, query, key, value):
        """(rows, q, heads, head_dim): :func:`~.attention.step_attention` (queries already scaled), its one-query
        products written out here for the common case (one query, keys of its own row, products not SDPA)."""
        import torch

        if query.shape[2] == 1 and key.shape[0] == query.shape[0] and not self.single_by_sdpa:
            weights = torch.softmax(torch.matmul(query, key.transpose(-1, -2)), dim=-1)
            return torch.matmul(weights, value).transpose(1, 2)
        out, _ = step_attention(module, query, key, value, scaling=1.0, single_by_sdpa=self.single_by_sdpa)
        return out


_LAYER_PARTS = (
    "self_attn",
    "encoder_attn",
    "fc1",
    "fc2",
    "activation_fn",
    "self_attn_layer_norm",
    "encoder_attn_layer_norm",
    "final_layer_norm",
)


def _whisper_layout(decoder) -> bool:
    """Whether ``decoder`` has the parts a Whisper decoder has (embeddings, layers, the final layer norm)."""
    parts = ("embed_tokens", "embed_positions", "layers", "layer_norm")
    if not all(hasattr(decoder, name) for name in parts):
        return False
    return all(hasattr(layer, name) for layer in decoder.layers for name in _LAYER_PARTS)


def _heads(projected, record: _Layer):
    """(rows, n, d) -> (rows, heads, n, head_dim), contiguous (transformers' layout)."""
    rows, n = projected.shape[0], projected.shape[1]
    return projected.view(rows, n, record.heads, record.head_dim).transpose(1, 2).contiguous()


def _linear(module):
    """A plain ``nn.Linear`` as its (weight, bias); any other layer (int8, packed) as itself."""
    import torch

    return (module.weight, module.bias) if type(module) is torch.nn.Linear else module


def _apply(linear, x):
    import torch.nn.functional as F

    return F.linear(x, *linear) if isinstance(linear, tuple) else linear(x)


def _norm(module, x):
    import torch.nn.functional as F

    return F.layer_norm(x, module.normalized_shape, module.weight, module.bias, module.eps)


def _fused(attn):
    """``attn``'s query, key and value projections as one ((3d, d) weight, (3d,) bias), the three layers' weights and
    biases made views of it (the same values, no memory added); None unless all three are plain ``nn.Linear`` of one
    shape. A block made before is reused while the layers still read it."""
    import torch

    linears = (attn.q_proj, attn.k_proj, attn.v_proj)
    if any(type(linear) is not torch.nn.Linear for linear in linears):
        return None
    shapes = {tuple(linear.weight.shape) for linear in linears}
    if len(shapes) != 1:
        return None
    made = getattr(attn, "_speakerscribe_qkv", None)
    if made is not None and _reads(linears, made):
        return made
    out_features = attn.q_proj.weight.shape[0]
    with torch.no_grad():
        weight = torch.cat([linear.weight.detach() for linear in linears])
        bias = torch.cat(
            [linear.bias.detach() if linear.bias is not None else weight.new_zeros(out_features) for linear in linears]
        )
    for third, linear in enumerate(linears):
        part = slice(third * out_features, (third + 1) * out_features)
        linear.weight = torch.nn.Parameter(weight[part], requires_grad=False)
        if linear.bias is not None:
            linear.bias = torch.nn.Parameter(bias[part], requires_grad=False)
    attn._speakerscribe_qkv = (weight, bias)
    return weight, bias


def _reads(linears, made) -> bool:
    """Whether the three layers still read the block ``made`` (not moved, cast or replaced since)."""
    weight, bias = made
    out_features = linears[0].weight.shape[0]
    for third, linear in enumerate(linears):
        if linear.weight.data_ptr() != weight[third * out_features].data_ptr():
            return False
        if linear.bias is not None and linear.bias.data_ptr() != bias[third * out_features].data_ptr():
            return False
    return True
