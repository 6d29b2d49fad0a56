"""How ``speakers`` entries get their times, compared on real meetings (AMI): DER of the entries under each rule,
beside the DER of the diarizer's exclusive output, on the same runs.

    .venv/bin/python benchmarks/entry_spans.py [--model whisper-base] [--splits train development]

Each excerpt goes through the offline default once (Whisper + the CAM++ diarizer, CPU, default parameters); the
rules are then applied to the same words and turns:

- ``words``: entries span their words (split at speaker changes), widened to their speaker's turns (before the
  third round);
- ``heard`` (the default): as ``words``, but each word's span is first cut to the stretch of heard speech (a
  diarized turn, overlapped ones included, or a VAD region) it overlaps most, and entries are split where no
  speech joins two words (``merge.trim_to_speech``);
- ``diarized``: the same cut with diarized turns only (the VAD's regions left out).

Tune on train + development only; ``--splits test`` is for the held-out report.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def entries(chunks, diarization, regions, rule: str):
    from speakerscribe.merge import attribute_words, trim_to_speech, union_intervals, widen_to_turns

    turns = diarization.exclusive or diarization.turns
    out = attribute_words(chunks, turns)
    if rule != "words":
        heard = list(diarization.turns) + (list(regions) if rule == "heard" else [])
        starts = np.array([h.start for h in heard], dtype=np.float64)
        ends = np.array([h.end for h in heard], dtype=np.float64)
        out = trim_to_speech(out, *union_intervals(starts, ends))
    return [(u.start, u.end, u.speaker) for u in widen_to_turns(out, turns)]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--splits", nargs="+", default=["train", "development"])
    args = parser.parse_args(argv)

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_transcriber
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe.options import RequestOptions
    from speakerscribe_dev import ami
    from speakerscribe_dev.evaluation import der_turns

    settings = ModelSettings(
        asr_model=str(args.models / args.model), diarization_model=str(args.models / "diarization")
    )
    transcriber = load_transcriber(settings)
    rules = ("words", "heard", "diarized")
    scores: dict[str, list[dict]] = {rule: [] for rule in rules + ("exclusive",)}
    for rec in ami.load(ami.prepare(args.data), tuple(args.splits)):
        waveform = decode_audio(rec.wav.read_bytes()).waveform
        result = transcriber.run(waveform, RequestOptions())
        regions, _ = transcriber.speech_for_whisper(waveform, RequestOptions().speech)
        reference = [(t.start, t.end, t.speaker) for t in rec.turns]
        d = result.diarization
        chunks = result.transcript.chunks
        hyp = {rule: entries(chunks, d, regions, rule) if d else [] for rule in rules}
        hyp["exclusive"] = [(t.start, t.end, t.speaker) for t in d.exclusive] if d else []
        for rule, turns in hyp.items():
            scores[rule].append(der_turns(reference, turns, rec.uem))
        print(rec.uri, " ".join(f"{r} {scores[r][-1]['diarization error rate']:.3f}" for r in scores), flush=True)
    print(f"\n{args.model}, AMI {' + '.join(args.splits)}: DER averaged over files; parts summed (s)")
    print("| entries | DER | missed | false alarm | confusion |")
    print("|---|---|---|---|---|")
    for rule, rows in scores.items():
        mean = np.mean([r["diarization error rate"] for r in rows])
        parts = [sum(r[k] for r in rows) for k in ("missed detection", "false alarm", "confusion")]
        name = "diarizer exclusive output" if rule == "exclusive" else rule
        print(f"| {name} | {mean:.3f} | {parts[0]:.1f} | {parts[1]:.1f} | {parts[2]:.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
