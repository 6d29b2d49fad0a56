"""Calibrate and measure known-speaker naming on real meetings (the AMI excerpts of pyannote.audio's sdist).

    .venv/bin/python benchmarks/calibrate_naming.py [--data data/ami] [--models models] [--clip-s 10]

The participants do not recur across splits: train meetings share people among themselves (trn00/01/03,
trn01/02, trn06/09, trn07/08), the two development excerpts share MEE009 and MEE012, the two test excerpts share
FEO070, FEO072, MEE071 and MEE073. So each case takes reference clips (``--clip-s`` seconds of a person speaking
alone, cut from the reference turns) from one excerpt and names the speakers of another excerpt of the same split.
Every person of the source excerpt gets a reference, so people absent from the target are there too; development
and test cases add two distractors from train meetings (a woman and a man nobody in those splits is).

Two settings are chosen on train + development (the tuning splits; test is never tuned on), each by the most
right-named speech time less wrong-named and absent-named time (the middle of the range when several tie): first the
similarity threshold, with speaker-level naming only (whole speakers give the most reliable voice prints), then at
that threshold the length of the pieces that are named one by one after the speaker-level match (``speaker level``
= no piece naming; see :mod:`speakerscribe.speakers.names`). Every split is then scored with both.
"speaker-level ceiling" is what the same diarization scores when each known person is given to the output speaker
that overlaps them most (a one-to-one assignment on the truth): the most that naming whole speakers can reach, which
naming pieces can pass. Segmentation and embeddings are computed once per excerpt; clustering and naming run for
every candidate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

THRESHOLDS = tuple(round(0.05 * k, 2) for k in range(2, 13))  # 0.10 .. 0.60
PIECE_LENGTHS = (None, 0.75, 1.0, 1.25, 1.5, 2.0)  # None: speaker-level naming only
DISTRACTORS = (("trn05", "FEE078"), ("trn04", "MEE075"))  # the woman and the man of train who speak alone longest


def cases(recordings: dict, split: str) -> list[tuple[str, str]]:
    """(source, target) pairs of ``split`` sharing at least one person."""
    uris = [u for u, r in recordings.items() if r.split == split]
    return [(s, t) for s in uris for t in uris if s != t and set(recordings[s].speakers) & set(recordings[t].speakers)]


def references(recordings, audio, uri: str, clip_s: float, extra=()) -> list:
    from speakerscribe.records import Waveform
    from speakerscribe.speakers.names import Reference
    from speakerscribe_dev.naming import reference_clip

    out = []
    for source, person in [(uri, p) for p in recordings[uri].speakers] + list(extra):
        clip = reference_clip(audio[source], recordings[source].turns, person, clip_s)
        if len(clip) >= 2 * 16000:  # people who never speak alone for 2 s get no clip (a user would have none)
            out.append(Reference(person, Waveform(clip), ()))
    return out


def revert(turns, known, threshold: float):
    """The output with names whose similarity is under ``threshold`` turned back into their diarizer labels."""
    from speakerscribe.records import SpeakerTurn

    back = {m.name: m.speaker for m in known if m.speaker is not None and m.similarity < threshold}
    return tuple(SpeakerTurn(t.start, t.end, back.get(t.speaker, t.speaker)) for t in turns)


def oracle(turns, truth, names):
    """``turns`` with each known name given to the output label overlapping that person most (one-to-one)."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    from speakerscribe.records import SpeakerTurn

    labels = sorted({t.speaker for t in turns})
    people = sorted(names & {t.speaker for t in truth})
    if not labels or not people:
        return turns
    overlap = np.zeros((len(labels), len(people)))
    for o in turns:
        for g in truth:
            if g.speaker in people:
                shared = max(0.0, min(o.end, g.end) - max(o.start, g.start))
                overlap[labels.index(o.speaker), people.index(g.speaker)] += shared
    rows, cols = linear_sum_assignment(overlap, maximize=True)
    mapping = {labels[r]: people[c] for r, c in zip(rows, cols) if overlap[r, c] > 0}
    return tuple(SpeakerTurn(t.start, t.end, mapping.get(t.speaker, t.speaker)) for t in turns)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "data/ami")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--clip-s", type=float, default=10.0)
    args = parser.parse_args(argv)

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.records import Waveform
    from speakerscribe.runtime import resolve_placement
    from speakerscribe_dev.ami import load
    from speakerscribe_dev.naming import score_naming
    from speakerscribe_dev.pyannote_cache import memoise_features

    recordings = {r.uri: r for r in load(args.data)}
    audio = {u: decode_audio(r.wav.read_bytes()).waveform.samples for u, r in recordings.items()}
    diarizer = SpeakerDiarizer.load(str(args.models / "diarization"), resolve_placement("cpu", "auto", "auto"))
    memoise_features(diarizer.pipeline)  # candidates re-run only clustering and naming

    cases_by_split = {}
    for split in ("train", "development", "test"):
        extra = () if split == "train" else DISTRACTORS
        for source, target in cases(recordings, split):
            refs = tuple(references(recordings, audio, source, args.clip_s, extra))
            cases_by_split.setdefault(split, []).append((source, target, refs))

    runs = {}  # (piece length, threshold, split, source, target) -> (named exclusive turns, names, speaker-level known)
    for piece_s in PIECE_LENGTHS:
        diarizer.name_piece_s = piece_s
        for threshold in THRESHOLDS:
            for split, split_cases in cases_by_split.items():
                for source, target, refs in split_cases:
                    result = diarizer(Waveform(audio[target]), references=refs, threshold=threshold)
                    runs[(piece_s, threshold, split, source, target)] = (
                        result.exclusive or result.turns,
                        {r.name for r in refs},
                        result.known,
                    )
    for split, split_cases in cases_by_split.items():
        for source, target, _ in split_cases:
            _, _, known = runs[(1.0, 0.35, split, source, target)]
            sims = {m.name: (m.speaker, m.similarity) for m in known}
            print(f"{split:11s} {source}->{target} present={recordings[target].speakers} {json.dumps(sims)}")

    def totals(piece_s, threshold: float, splits: tuple[str, ...], ceiling: bool = False) -> dict:
        sums = dict(speech=0.0, right=0.0, wrong=0.0, unnamed=0.0, intruded=0.0)
        for (p, t, s, _, target), (named, names, known) in runs.items():
            if p != piece_s or t != threshold or s not in splits:
                continue
            if ceiling:  # speaker level only: the names turned back into the diarizer's labels, then the best ones
                named = oracle(revert(named, known, 2.0), recordings[target].turns, names)
            score = score_naming(recordings[target].turns, named, names, recordings[target].uem)
            for k in sums:
                sums[k] += getattr(score, k)
        right_named = sums["right"] + sums["wrong"]
        return {
            "right_share": round(sums["right"] / sums["speech"], 4) if sums["speech"] else None,
            "named_precision": round(sums["right"] / right_named, 4) if right_named else None,
            "wrong_s": round(sums["wrong"], 2),
            "absent_named_s": round(sums["intruded"], 2),
            "speech_s": round(sums["speech"], 1),
        }

    def label(piece_s) -> str:
        return "speaker level" if piece_s is None else f"pieces {piece_s} s"

    tuning = ("train", "development")

    def value(piece_s, threshold) -> float:
        row = totals(piece_s, threshold, tuning)
        return row["right_share"] * row["speech_s"] - row["wrong_s"] - row["absent_named_s"]

    def middle_of_best(candidates, score):
        scores = {c: score(c) for c in candidates}
        best = [c for c in candidates if scores[c] >= max(scores.values()) - 1e-9]
        return best[len(best) // 2], best

    print("\nsweep (train + development; then development alone):")
    for piece_s in PIECE_LENGTHS:
        for threshold in THRESHOLDS:
            row, dev = totals(piece_s, threshold, tuning), totals(piece_s, threshold, ("development",))
            print(f"  {label(piece_s):13s} {threshold:.2f} {json.dumps(row)} dev {json.dumps(dev)}")
    # first the threshold, on whole speakers (their voice prints are the most reliable); then the piece length at it
    threshold, best = middle_of_best(THRESHOLDS, lambda t: value(None, t))
    print(f"\nthreshold (speaker level): {threshold:.2f} (best range {best[0]:.2f}-{best[-1]:.2f})")
    piece_s, _ = middle_of_best(PIECE_LENGTHS, lambda p: value(p, threshold))
    print(f"piece length at {threshold:.2f}: {label(piece_s)}")
    for p in PIECE_LENGTHS:
        print(f"  {label(p):13s} {value(p, threshold):.2f} s right less wrong and absent-named (train + development)")
    for split in ("train", "development", "test"):
        print(f"  {split:11s} {json.dumps(totals(piece_s, threshold, (split,)))}")
        print(f"  {'':11s} speaker level {json.dumps(totals(None, threshold, (split,)))}")
        print(f"  {'':11s} speaker-level ceiling {json.dumps(totals(None, threshold, (split,), ceiling=True))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
