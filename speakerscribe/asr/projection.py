"""The vocabulary projection of a greedy decoding step, screened in int8 on a CPU: the same choice of token as the
full projection, at a fraction of what it reads.

A decoding step multiplies each row's hidden state by Whisper's (vocab, d) token embedding: 51864 rows, 40-106 MB
in bfloat16 or float32 for tiny/base, read at every step. With one or two rows a step (short clips, the last rows
of a batch) that product is most of the step (tiny.en, one row, bfloat16: 4.8 ms of a 9-10 ms step). Most of it is
wasted: a greedy step needs exact logits only for the tokens that could be chosen, and to compare the timestamps'
mass with the best text token.

So the projection is first taken with int8 weights (one scale per token, half of bfloat16's bytes, PyTorch's
weight-only int8 kernel), whose error on each logit is bounded per row (:meth:`ScreenedProjection.bound`: the int8
rounding of the weights against the row's norm, the bfloat16 rounding of the row and of the outputs). Every text
token whose screened logit is within twice that bound of the best one could be the best, so those tokens, and
every special and timestamp token (end-of-text, no-speech, the timestamps: the last 1608 rows), get the exact
logits of the model's own weights; the others keep their screened values, which only enter the softmax's
normaliser (the confidence, to well under the bfloat16 rounding already in it). A suppressed token is never a
candidate. Where too many tokens are that close (an unsure step), or the step has more rows than ``max_rows``
(many rows amortise the full product), the full product runs. The tokens chosen are the full projection's
(``tests/test_projection.py``); the exact logits come from products of other shapes, so they may differ from the
full product's in the last bit of bfloat16.

Sampling (the fallback, ``temperature`` above 0) and the scoring pass keep the full projection: they need every
probability.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

logger = logging.getLogger(__name__)

MAX_ROWS = 2  # steps with more rows than this run the full product (measured: benchmarks/RESULTS.md)
MAX_SHARE = 0.2  # more close candidates than this share of the text tokens: the full product
_BF16_HALF_ULP = 2.0**-8  # relative rounding of one bfloat16 value (8 significant bits)


class ScreenedProjection:
    """Hidden states (rows, d) -> (rows, vocab) float32 logits for a greedy step: exact for the special and
    timestamp tokens (from ``text_end`` on) and for every text token that could be the best; screened for the rest.

    ``proj``: Whisper's ``proj_out`` (no bias). ``text_end``: the first non-text token (end-of-text).
    ``suppressed``: token ids the rules never allow (never candidates). ``full``: the exact projection used
    otherwise (:class:`~.greedy.VocabProjection`)."""

    def __init__(self, proj, text_end: int, suppressed: Sequence[int], full, max_rows: int = MAX_ROWS):
        import torch

        weight = proj.weight.detach()
        self.weight, self.full, self.text_end, self.max_rows = weight, full, text_end, max_rows
        w = weight.float()
        scale = (w.abs().amax(dim=1).clamp(min=1e-12) / 127).to(torch.bfloat16)
        self.q = torch.round(w / scale.float()[:, None]).clamp(-127, 127).to(torch.int8)
        self.scale = scale
        residual = w - self.q.float() * scale.float()[:, None]
        self.residual_norm = float(residual.norm(dim=1).max())  # int8's error on a token's weights, at most
        self.weight_norm = float(w.norm(dim=1).max())
        self.blocked = torch.zeros(text_end, dtype=torch.bool, device=weight.device)
        ids = [t for t in suppressed if t < text_end]
        if ids:
            self.blocked[ids] = True
        self.screened = self.full_steps = 0  # steps of each kind (benchmarks, tests)

    @classmethod
    def maybe(cls, proj, text_end: int, suppressed: Sequence[int], full) -> ScreenedProjection | None:
        """One for ``proj`` where it can run (a CPU model, a PyTorch with the weight-only int8 kernel); else None."""
        import torch

        if proj.weight.device.type != "cpu" or proj.bias is not None or not hasattr(torch, "_weight_int8pack_mm"):
            return None
        try:
            made = cls(proj, text_end, suppressed, full)
            made._screen(torch.zeros(1, proj.weight.shape[1], dtype=proj.weight.dtype))
        except (RuntimeError, NotImplementedError) as err:  # a build without the kernel for this CPU
            logger.debug("no int8 screening of the vocabulary projection: %s", err)
            return None
        return made

    def _screen(self, hidden):
        import torch

        return torch._weight_int8pack_mm(hidden.to(torch.bfloat16), self.q, self.scale).float()

    def bound(self, hidden, screened):
        """(rows,) the most any screened logit of each row can be from the exact product of the row with the
        weights, plus the bfloat16 rounding of an exact logit (both ways): the int8 rounding of the weights against
        the row's norm, the row's own rounding to bfloat16 against the largest weight norm, the rounding of the
        outputs."""
        import torch

        h = hidden.float()
        h16 = hidden.to(torch.bfloat16).float()
        largest = screened.abs().amax(dim=1)
        return (
            h16.norm(dim=1) * self.residual_norm
            + (h - h16).norm(dim=1) * self.weight_norm
            + 2 * _BF16_HALF_ULP * (largest + 1.0)
        )

    def __call__(self, hidden):
        import torch

        if hidden.shape[0] > self.max_rows:
            self.full_steps += 1
            return self.full(hidden).float()
        screened = self._screen(hidden)
        text = screened[:, : self.text_end].masked_fill(self.blocked, float("-inf"))
        best = text.amax(dim=1, keepdim=True)
        close = text >= best - 2 * self.bound(hidden, screened)[:, None]
        candidates = torch.nonzero(close.any(dim=0)).squeeze(1)
        if candidates.numel() > MAX_SHARE * self.text_end:
            self.full_steps += 1
            return self.full(hidden).float()
        self.screened += 1
        w = self.weight
        screened[:, self.text_end :] = (hidden @ w[self.text_end :].T).float()
        screened[:, candidates] = (hidden @ w[candidates].T).float()
        return screened
