"""A greedy decoding step's projection onto the vocabulary, screened with int8 weights on a CPU.

At one row (a 30 s request decodes one window, ~130 steps of one row) a step is bound by reading weights, and the
largest is the (vocab, d) token embedding that projects the hidden state onto the vocabulary: 40 MB for tiny.en in
bfloat16, more than the rest of its decoder. A greedy step needs only a few of those 51k scores exactly: the best
text token, end-of-text, the timestamps (the rules compare their summed probability with the best text token's)
and no-speech (the first step's verdict); the rest only enter the log-normaliser of the step's confidence.

So for greedy steps of at most :data:`MAX_ROWS` rows, every score is first computed with int8 weights (one scale
per output row, PyTorch's dynamic quantization: a quarter of float32's bytes, half of bfloat16's), and then the
scores that decide the step are computed again with the model's own weights: every timestamp, end-of-text,
no-speech, and each row's :data:`CANDIDATES` best text tokens by the int8 scores (suppressed tokens left out: the
rules forbid them). A token left out scores at most the last candidate's int8 score plus int8's error; where the
best candidate's model score is not clear of that by :data:`MARGIN` times the hidden state's norm (twice the
largest error seen on real meetings), the row is projected with the model's weights instead. So the greedy choice
is the model's wherever int8's error stays within the margin (``tests/test_screened.py`` puts an adversary at 0.99
of it); the confidence's normaliser carries the rounding of the tail. Sampled steps (the temperature fallback) and
larger batches use the model's weights throughout (from 3 rows the full product is as fast).

Measured on the 2-core Xeon (AMX, bfloat16) here, tiny.en, one row: the projection 1.0 ms as a matrix-vector
product, 0.8 ms screened; a 30 s telephone clip 0.77 -> 0.67 s; ~7% of AMI's one-row steps fall back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CANDIDATES = 16  # best text tokens by the int8 scores, scored again with the model's weights
# int8's error on a score, as a share of the hidden state's norm, that the best candidate must clear (twice the
# largest seen: 0.0060 tiny.en, 0.0076 base, ~2,100 steps of AMI meetings in bfloat16; larger Whisper models were
# not measured: DECODER_QUANTIZATION=none keeps the full projection)
MARGIN = 0.015
MAX_ROWS = 2  # steps with more rows project with the model's weights (from ~3 rows the full product is as fast)


@dataclass(frozen=True, eq=False)
class ScreenedProjection:
    """Hidden states (rows, d) -> (rows, vocab) float32 scores: int8 for the tail, the model's weights for the
    timestamps, the ``always`` tokens and each row's ``candidates`` best text tokens. ``exact`` (the model's
    :class:`~.greedy.VocabProjection`) projects sampled steps and batches of more than ``max_rows``."""

    exact: Any  # VocabProjection
    int8: Any  # a dynamically quantized nn.Linear: float32 (rows, d) -> float32 (rows, vocab)
    weight: Any  # (vocab, d) in the model's precision
    always: Any  # LongTensor: token ids always scored with the model's weights (end-of-text, no-speech)
    never: Any  # LongTensor: suppressed text tokens, never candidates
    timestamp_begin: int
    candidates: int = CANDIDATES
    max_rows: int = MAX_ROWS

    @classmethod
    def of(cls, proj, exact, rules, no_speech_id: int | None = None) -> ScreenedProjection:
        """The screen for ``proj`` (Whisper's ``proj_out``, no bias) with the token ids of ``rules``
        (:class:`~.greedy.TimestampRules`)."""
        import torch

        from .quantized import quantized_linear

        weight = proj.weight.detach()
        tb = rules.timestamp_begin
        always = [rules.eos] + ([no_speech_id] if no_speech_id is not None and no_speech_id < tb else [])
        never = sorted({t for t in rules.suppress if t < tb} - set(always))
        return cls(
            exact=exact,
            int8=quantized_linear(proj),
            weight=weight,
            always=torch.tensor(always, dtype=torch.long, device=weight.device),
            never=torch.tensor(never, dtype=torch.long, device=weight.device),
            timestamp_begin=tb,
        )

    def __call__(self, hidden):
        import torch
        import torch.nn.functional as F

        rows = hidden.shape[0]
        if rows > self.max_rows:
            return self.exact(hidden)
        tb, k = self.timestamp_begin, self.candidates
        as_float = hidden.float()
        scores = self.int8(as_float)
        scores[:, tb:] = F.linear(hidden, self.weight[tb:])
        text = scores[:, :tb].clone()
        text[:, self.never] = float("-inf")
        top = text.topk(k, dim=-1)
        picks = torch.cat([top.indices, self.always.expand(rows, -1)], dim=1)
        model_scores = torch.bmm(self.weight[picks], hidden[:, :, None].to(self.weight.dtype))[..., 0].float()
        scores.scatter_(1, picks, model_scores)
        # a token left out scores at most the last candidate's int8 score plus int8's error: where the best
        # candidate's own score is not clear of that, the row is projected with the model's weights
        unsure = model_scores[:, :k].max(dim=-1).values - top.values[:, -1] < MARGIN * as_float.norm(dim=-1)
        if bool(unsure.any()):
            scores[unsure] = self.exact(hidden[unsure]).float()
        return scores


def exact_projection(projection):
    """The model's own projection behind ``projection`` (itself where it is not screened): for sampled steps."""
    return projection.exact if isinstance(projection, ScreenedProjection) else projection
