"""Partial transcripts that never retract: a LocalAgreement-2 policy over repeated decodes of a growing turn.

While a turn is spoken its audio so far is decoded again every half second or so. A word is *confirmed* (sent as a
delta) once two consecutive hypotheses agree on it and on every word before it, and it is not the newest word of
the latest hypothesis (the audio may end inside that word). Confirmed words are never taken back: a later
hypothesis that disagrees with them confirms nothing new until it agrees again.

When the turn ends, the words of its final decode past as many words as were confirmed are sent as the last
delta; the session's ``completed`` event then carries the final decode itself (authoritative, as in OpenAI's
protocol), which differs from the deltas only where partial decodes confirmed a word the whole turn is heard
otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_PUNCT = re.compile(r"[^\w']+")


def _key(word: str) -> str:
    """What two hypotheses must share for a word to agree: letters and digits, case-folded."""
    return _PUNCT.sub("", word).casefold()


def split_words(text: str) -> list[str]:
    """Whisper's text as words with their leading space (" Hello,"), so joining them rebuilds the text."""
    return re.findall(r"\s*\S+", text)


@dataclass
class Agreement:
    """The confirmed words of one turn and the latest hypotheses. ``n``: how many consecutive hypotheses must agree
    (2: LocalAgreement-2); ``hold``: how many of the newest words of the latest hypothesis are never confirmed."""

    n: int = 2
    hold: int = 1
    confirmed: list[str] = field(default_factory=list)
    history: list[list[str]] = field(default_factory=list)

    def update(self, hypothesis: list[str]) -> list[str]:
        """A new hypothesis of the whole turn so far -> the words newly confirmed (possibly none)."""
        self.history = [*self.history, hypothesis][-self.n :]
        if len(self.history) < self.n:
            return []
        agree = 0
        limit = min(len(h) for h in self.history[:-1])
        limit = min(limit, len(hypothesis) - self.hold)
        while agree < limit and len({_key(h[agree]) for h in self.history}) == 1:
            agree += 1
        if agree <= len(self.confirmed):
            return []
        if any(_key(a) != _key(b) for a, b in zip(self.confirmed, hypothesis)):
            return []  # the new hypothesis disagrees with what was already sent
        new = hypothesis[len(self.confirmed) : agree]
        self.confirmed.extend(new)
        return new

    def finish(self, final: list[str]) -> list[str]:
        """The turn's final decode -> the words to send after the confirmed ones. Where the final decode agrees
        with the confirmed words, they are skipped; otherwise the final words past as many words as were
        confirmed."""
        rest = final[len(self.confirmed) :]
        self.history = []
        self.confirmed.extend(rest)
        return rest

    @property
    def text(self) -> str:
        return "".join(self.confirmed)
