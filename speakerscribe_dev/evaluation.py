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
    from pyannote.metrics.diarization import DiarizationErrorRate

    ref = _annotation([(t.start, t.end, t.speaker) for t in conversation.turns])
    hyp = _annotation(turns)
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


# ------------------------------------------------------------------------------------ real recordings (AMI)
def _annotation(turns):
    from pyannote.core import Annotation, Segment

    ann = Annotation()
    for k, (s, e, label) in enumerate(turns):
        if e > s:
            ann[Segment(s, e), k] = label
    return ann


def der_turns(
    reference: list[tuple[float, float, str]],
    hypothesis: list[tuple[float, float, str]],
    uem: tuple[float, float],
    collar: float = 0.25,
) -> dict[str, float]:
    """DER (pyannote.metrics) inside ``uem`` with a collar, overlapped speech scored; parts in seconds."""
    from pyannote.core import Segment, Timeline
    from pyannote.metrics.diarization import DiarizationErrorRate

    metric = DiarizationErrorRate(collar=collar, skip_overlap=False)
    detail = metric(_annotation(reference), _annotation(hypothesis), uem=Timeline([Segment(*uem)]), detailed=True)
    return {k: float(v) for k, v in detail.items()}


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted disjoint spans covering ``spans`` (empty ones dropped), by the merge stage's own union."""
    from speakerscribe.merge import union_intervals

    kept = np.array([(s, e) for s, e in spans if e > s], dtype=np.float64).reshape(-1, 2)
    starts, ends = union_intervals(kept[:, 0], kept[:, 1])
    return list(zip(starts.tolist(), ends.tolist()))


def _intersection_length(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        total += max(0.0, hi - lo)
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def word_spans(words: list[dict], bridge: float = 1.0) -> list[tuple[float, float]]:
    """Time covered by transcript words: each word's [start, end], and the pause between consecutive words when
    it is shorter than ``bridge`` seconds (people pause inside sentences; a word's alignment is tighter than it)."""
    spans = sorted((float(w["start"]), float(w["end"])) for w in words)
    out = list(spans)
    for (_, e0), (s1, _) in zip(spans, spans[1:]):
        if 0 < s1 - e0 < bridge:
            out.append((e0, s1))
    return _union(out)


def speech_coverage(reference: list[tuple[float, float, str]], spans: list[tuple[float, float]], uem) -> float:
    """Share of the reference speech time (any speaker, inside ``uem``) covered by ``spans``."""
    lo, hi = uem
    speech = _union([(max(s, lo), min(e, hi)) for s, e, _ in reference])
    total = sum(e - s for s, e in speech)
    return _intersection_length(speech, _union(spans)) / total if total else 1.0


def optimal_mapping(reference, hypothesis) -> dict[str, str]:
    """Hypothesis label -> reference speaker, the one-to-one mapping that maximises overlapped time."""
    from pyannote.metrics.diarization import DiarizationErrorRate

    return dict(DiarizationErrorRate().optimal_mapping(_annotation(reference), _annotation(hypothesis)))


@dataclass(frozen=True)
class OverlapAttribution:
    single: float  # share of words spoken where one reference speaker talks that carry that speaker
    single_words: int
    overlap: float  # share of words spoken where several talk that carry one of them
    overlap_words: int


def overlap_attribution(reference, words: list[dict], mapping: dict[str, str]) -> OverlapAttribution:
    """Words are placed at their midpoints; hypothesis labels are mapped with ``mapping`` (unmapped = wrong)."""
    ok = {True: [0, 0], False: [0, 0]}
    for w in words:
        t = (float(w["start"]) + float(w["end"])) / 2
        active = {spk for s, e, spk in reference if s <= t <= e}
        if not active:
            continue
        is_overlap = len(active) > 1
        ok[is_overlap][1] += 1
        ok[is_overlap][0] += mapping.get(w["speaker"]) in active
    share = {k: (v[0] / v[1] if v[1] else float("nan")) for k, v in ok.items()}
    return OverlapAttribution(share[False], ok[False][1], share[True], ok[True][1])


def evaluate_recording(recording, response: dict, diarization) -> dict:
    """Scores of one endpoint ``response`` (with word timestamps) on a real ``recording`` (``ami.Recording``).

    ``diarization`` is the run's :class:`~speakerscribe.records.Diarization` (the diarizer's own output), or None.
    """
    ref = [(t.start, t.end, t.speaker) for t in recording.turns]
    entries = [(u["timestamp"][0], u["timestamp"][1], u["speaker"]) for u in response["speakers"]]
    words = [w for u in response["speakers"] for w in u.get("words", [])]
    all_words = words or [w for c in response["chunks"] for w in c.get("words", [])]
    row = {
        "uri": recording.uri,
        "split": recording.split,
        "reference_speakers": len(recording.speakers),
        "entry_speakers": len({e[2] for e in entries}),
        "words": len(all_words),
        "empty": not response["text"].strip(),
        "coverage": speech_coverage(ref, word_spans(all_words), recording.uem),
        "der_entries": der_turns(ref, entries, recording.uem)["diarization error rate"],
    }
    # no diarization (nothing passed the speech detector) scores as finding no one
    turns = [(t.start, t.end, t.speaker) for t in diarization.turns] if diarization is not None else []
    exclusive = [(t.start, t.end, t.speaker) for t in diarization.exclusive] if diarization is not None else []
    row["diarizer_speakers"] = len({t[2] for t in turns})
    row["der_diarizer"] = der_turns(ref, turns, recording.uem)["diarization error rate"]
    row["der_exclusive"] = der_turns(ref, exclusive, recording.uem)["diarization error rate"]
    if words:
        attr = overlap_attribution(ref, words, optimal_mapping(ref, entries))
        row.update(
            words_single_right=attr.single,
            words_single=attr.single_words,
            words_overlap_right=attr.overlap,
            words_overlap=attr.overlap_words,
        )
    return row


def summarise(rows: list[dict]) -> dict:
    """Totals over recordings: DERs averaged over files (all excerpts have the same scored length)."""
    if not rows:
        return {}

    def mean(key):
        vals = [r[key] for r in rows if key in r and r[key] == r[key]]
        return sum(vals) / len(vals) if vals else float("nan")

    def pooled(right, count):
        n = sum(r.get(count, 0) for r in rows)
        return sum(r.get(right, 0) * r.get(count, 0) for r in rows if r.get(count)) / n if n else float("nan")

    return {
        "files": len(rows),
        "empty": sum(r["empty"] for r in rows),
        "coverage": mean("coverage"),
        "min_coverage": min(r["coverage"] for r in rows),
        "count_exact_entries": sum(r["entry_speakers"] == r["reference_speakers"] for r in rows),
        "count_exact_diarizer": sum(r.get("diarizer_speakers") == r["reference_speakers"] for r in rows),
        "der_entries": mean("der_entries"),
        "der_diarizer": mean("der_diarizer"),
        "der_exclusive": mean("der_exclusive"),
        "words_single_right": pooled("words_single_right", "words_single"),
        "words_overlap_right": pooled("words_overlap_right", "words_overlap"),
    }


# ------------------------------------------------------------------------ real-voice conversations
def words_on_right_speaker(reference, words: list[dict], mapping: dict[str, str]) -> tuple[int, int]:
    """(right, total) over all ``words``: a word is right when its midpoint lies inside a reference turn of the
    person its label maps to with ``mapping`` (unmapped labels and words in pauses are wrong)."""
    right = 0
    for w in words:
        t = (float(w["start"]) + float(w["end"])) / 2
        person = mapping.get(w["speaker"])
        right += any(s <= t <= e and spk == person for s, e, spk in reference)
    return right, len(words)


def evaluate_real_voice(conversation, response: dict, diarization) -> dict:
    """:func:`evaluate_recording` of one real-voice conversation (``real_voices.VoiceConversation``), plus its
    quality and size and the share of all words on the right person (one-to-one optimal label mapping)."""
    row = evaluate_recording(conversation, response, diarization)
    ref = [(t.start, t.end, t.speaker) for t in conversation.turns]
    entries = [(u["timestamp"][0], u["timestamp"][1], u["speaker"]) for u in response["speakers"]]
    words = [w for u in response["speakers"] for w in u.get("words", [])]
    mapping = optimal_mapping(ref, entries) if entries else {}
    right, total = words_on_right_speaker(ref, words, mapping)
    row.update(quality=conversation.quality, n_speakers=conversation.n_speakers, words_right=right, words_total=total)
    return row


def summarise_real_voices(rows: list[dict]) -> dict:
    """:func:`summarise` plus count-exact shares and the pooled share of words on the right person."""
    if not rows:
        return {}
    total = summarise(rows)
    words = sum(r["words_total"] for r in rows)
    total.update(
        count_exact_diarizer_share=total["count_exact_diarizer"] / len(rows),
        count_exact_entries_share=total["count_exact_entries"] / len(rows),
        words_right=sum(r["words_right"] for r in rows) / words if words else float("nan"),
    )
    return total
