"""Accuracy measures against known truth: WER (Whisper's English normaliser + jiwer), DER (pyannote.metrics),
speakers found, and the share of words attributed to the right speaker."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .conversation import Conversation


@lru_cache(maxsize=1)
def _normaliser():
    from transformers.models.whisper.english_normalizer import EnglishTextNormalizer

    return EnglishTextNormalizer({})


def normalise(text: str) -> str:
    return " ".join(_normaliser()(text).split())


def wer(reference: str, hypothesis: str) -> float:
    import jiwer

    ref, hyp = normalise(reference), normalise(hypothesis)
    if not ref:
        return 0.0 if not hyp else 1.0
    return float(jiwer.wer(ref, hyp))


def der(conversation: Conversation, turns: list[tuple[float, float, str]], collar: float = 0.25) -> dict[str, float]:
    """Diarization error rate and its parts (seconds) with a collar; ``turns`` are (start, end, label)."""
    from pyannote.core import Annotation, Segment
    from pyannote.metrics.diarization import DiarizationErrorRate

    ref, hyp = Annotation(), Annotation()
    for t in conversation.turns:
        ref[Segment(t.start, t.end)] = t.speaker
    for k, (s, e, label) in enumerate(turns):
        if e > s:
            hyp[Segment(s, e), k] = label
    with warnings.catch_warnings():  # "uem was approximated by the union of reference and hypothesis extents"
        warnings.simplefilter("ignore", UserWarning)
        detail = DiarizationErrorRate(collar=collar)(ref, hyp, detailed=True)
    return {k: float(v) for k, v in detail.items()}


def true_speaker_at(conversation: Conversation, times: np.ndarray) -> list[str]:
    """The reference speaker at each time; in a pause, the speaker of the nearest turn."""
    starts = np.array([t.start for t in conversation.turns])
    ends = np.array([t.end for t in conversation.turns])
    gap = np.maximum(starts[None, :] - times[:, None], 0) + np.maximum(times[:, None] - ends[None, :], 0)
    return [conversation.turns[k].speaker for k in np.argmin(gap, axis=1)]


@dataclass(frozen=True)
class Attribution:
    accuracy: float  # share of words whose speaker maps to the true speaker
    words: int
    mapping: dict[str, str]  # hypothesis label -> reference speaker


def word_attribution(conversation: Conversation, words: list[dict]) -> Attribution:
    """``words``: ``{"start", "end", "speaker"}``. Labels are mapped to reference speakers by majority vote."""
    if not words:
        return Attribution(0.0, 0, {})
    mids = np.array([(w["start"] + w["end"]) / 2 for w in words])
    truth = true_speaker_at(conversation, mids)
    mapping: dict[str, str] = {}
    for label in sorted({w["speaker"] for w in words}):
        votes = [t for t, w in zip(truth, words) if w["speaker"] == label]
        mapping[label] = max(set(votes), key=votes.count)
    correct = sum(mapping[w["speaker"]] == t for w, t in zip(words, truth))
    return Attribution(correct / len(words), len(words), mapping)
