"""Accuracy tables with the offline default models (README "Accuracy").

    .venv/bin/python benchmarks/accuracy.py [--sets festival ami] [--splits train development] [--models models]

``festival``: one row per (model, conversation): WER (Whisper English normaliser), DER of the diarizer's exclusive
turns (collar 0.25 s) with its missed/false-alarm/confusion parts, speakers found, share of words attributed to the
right speaker, and the real-time factor on this machine.

``ami``: real meetings (pyannote.audio's AMI excerpts, ``data/ami``), default request parameters. Per file and in
total for each split: DER (collar 0.25, overlap scored, inside the UEM) of the ``speakers`` entries, of the
diarizer alone and of its exclusive output; speaker count (diarizer and entries) against the reference; transcript
coverage (share of reference speech time covered by transcript words, pauses under 1 s bridged); and the share of
words on a right speaker where one person talks and where several overlap. ``--splits test`` is the untuned
measurement: report it, never tune on it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def conversations(speech_dir: Path):
    from speakerscribe_dev.conversation import MEETING, long_conversation, synthesize

    return {
        "meeting": synthesize(MEETING, speech_dir, "meeting"),
        "backchannels": synthesize(long_conversation(20, seed=5, backchannel_every=2), speech_dir, "backchannels"),
        "several_minutes": synthesize(long_conversation(60, seed=2), speech_dir, "conv60"),
    }


def ami_table(models: Path, data: Path, splits: list[str], asr: str) -> None:
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_transcriber
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe.options import RequestOptions
    from speakerscribe.response import endpoint_response
    from speakerscribe_dev import ami
    from speakerscribe_dev.evaluation import evaluate_recording, summarise

    nan = float("nan")
    folder = ami.prepare(data)
    settings = ModelSettings(asr_model=str(models / asr), diarization_model=str(models / "diarization"))
    transcriber = load_transcriber(settings)
    print(f"\nAMI excerpts, {asr} + diarization, default parameters")
    print(
        "| split | file | ref spk | diarizer spk | entry spk | DER entries | DER diarizer | DER exclusive "
        "| coverage | words | words right (single / overlap) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    by_split: dict[str, list[dict]] = {}
    for rec in ami.load(folder, tuple(splits)):
        result = transcriber.run(decode_audio(rec.wav.read_bytes()).waveform, RequestOptions())
        row = evaluate_recording(rec, endpoint_response(result, words=True), result.diarization)
        by_split.setdefault(rec.split, []).append(row)
        print(
            f"| {rec.split} | {rec.uri} | {row['reference_speakers']} | {row.get('diarizer_speakers', 0)} "
            f"| {row['entry_speakers']} | {row['der_entries']:.3f} | {row.get('der_diarizer', 1.0):.3f} "
            f"| {row.get('der_exclusive', 1.0):.3f} | {row['coverage']:.3f} | {row['words']} "
            f"| {row.get('words_single_right', nan):.2f} / {row.get('words_overlap_right', nan):.2f} |",
            flush=True,
        )
    print(
        "\n| split | files | empty | coverage (min) | count exact diarizer / entries | DER entries | DER diarizer "
        "| DER exclusive | words right single / overlap |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    groups = dict(by_split)
    if len(groups) > 1 and "test" not in groups:
        groups["+".join(groups)] = [r for rows in by_split.values() for r in rows]
    for split, rows in groups.items():
        t = summarise(rows)
        print(
            f"| {split} | {t['files']} | {t['empty']} | {t['coverage']:.3f} ({t['min_coverage']:.3f}) "
            f"| {t['count_exact_diarizer']} / {t['count_exact_entries']} | {t['der_entries']:.3f} "
            f"| {t['der_diarizer']:.3f} | {t['der_exclusive']:.3f} "
            f"| {t['words_single_right']:.3f} / {t['words_overlap_right']:.3f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--speech", type=Path, default=REPO / ".cache" / "speech")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--sets", nargs="+", choices=["festival", "ami"], default=["festival", "ami"])
    parser.add_argument(
        "--splits", nargs="+", choices=["train", "development", "test"], default=["train", "development"]
    )
    parser.add_argument("--ami-model", default="whisper-base", help="ASR model folder for the AMI table")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "ami" in args.sets:
        ami_table(args.models, args.data, args.splits, args.ami_model)
    if "festival" not in args.sets:
        return 0
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_models
    from speakerscribe.models.settings import InferenceConfig, ModelSettings
    from speakerscribe.pipeline import Models, Transcriber
    from speakerscribe.response import endpoint_response
    from speakerscribe_dev.evaluation import der, wer, word_attribution

    convs = conversations(args.speech)
    cfg = InferenceConfig(return_timestamps="word").to_options()
    print(
        "| ASR model | conversation | audio s | WER | DER | missed / false alarm / confusion s | speakers "
        "| words right speaker | RTF (x real time) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    diarizer = None
    for name in ("whisper-tiny.en", "whisper-base"):
        settings = ModelSettings(asr_model=str(args.models / name), diarization_model=str(args.models / "diarization"))
        models = load_models(settings)
        if diarizer is None:
            diarizer = models.diarizer
        transcriber = Transcriber(Models(models.asr, diarizer, models.vad, models.placement))
        for key, conv in convs.items():
            waveform = decode_audio(conv.wav.read_bytes()).waveform
            t0 = time.perf_counter()
            result = transcriber.run(waveform, cfg)
            seconds = time.perf_counter() - t0
            out = endpoint_response(result, words=True)
            d = der(conv, [(t.start, t.end, t.speaker) for t in result.diarization.exclusive])
            words = [w for u in out["speakers"] for w in u["words"]]
            attr = word_attribution(conv, words)
            print(
                f"| {name} | {key} | {conv.duration:.0f} | {wer(conv.reference_text, out['text']):.3f} "
                f"| {d['diarization error rate']:.3f} | {d['missed detection']:.1f} / {d['false alarm']:.1f} / "
                f"{d['confusion']:.1f} | {len(set(attr.mapping))} | {attr.accuracy:.3f} "
                f"| {conv.duration / seconds:.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
