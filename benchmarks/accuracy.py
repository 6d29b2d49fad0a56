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

``real_voices``: conversations of real voices with exact truth (``data/real_voices``, made by
``speakerscribe_dev.real_voices``), default parameters (``--counts default``) and/or ``num_speakers`` = the true
count (``--counts true``). Per conversation and per (counts, group, quality, 2-person / 3-4-person): speaker count
exact (diarizer / entries), DER (collar 0.25, overlap scored) of the entries and of the diarizer, and the share of
all words whose midpoint lies in a truth turn of the person their label maps to (one-to-one optimal mapping).
``--rv-take 4 1 1`` measures an evenly spaced, deterministic subset per group: 4 two-person, 1 three-person and 1
four-person conversations (the same ones at both qualities). Calibrate on ``calibration``; ``held-out`` people are
for reporting only.
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


def _evenly(items: list, k: int | None) -> list:
    """``k`` items spread evenly over ``items`` (all when ``k`` is None or not smaller)."""
    if k is None or k >= len(items):
        return items
    return [items[i * len(items) // k] for i in range(k)]


def _pick(conversations: list, take: list[int] | None) -> list:
    """The conversations to measure: per (group, quality, number of people), ``take`` = (two, three, four)."""
    blocks: dict[tuple, list] = {}
    for c in conversations:
        blocks.setdefault((c.split, c.quality, c.n_speakers), []).append(c)
    chosen = []
    for (_, _, n), block in blocks.items():
        chosen += _evenly(block, None if take is None else take[n - 2])
    return chosen


def _real_voice_summary(rows: list[dict]) -> None:
    from speakerscribe_dev.evaluation import summarise_real_voices

    print(
        "\n| counts | group | quality | people | conversations | count exact diarizer / entries | DER entries "
        "| DER diarizer | words right |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["counts"], r["split"], r["quality"], "2" if r["n_speakers"] == 2 else "3-4") for r in rows})
    for counts, group, quality, size in keys:
        part = [
            r
            for r in rows
            if (r["counts"], r["split"], r["quality"]) == (counts, group, quality)
            and (r["n_speakers"] == 2) == (size == "2")
        ]
        t = summarise_real_voices(part)
        print(
            f"| {counts} | {group} | {quality} | {size} | {t['files']} | {t['count_exact_diarizer_share']:.2f} / "
            f"{t['count_exact_entries_share']:.2f} | {t['der_entries']:.3f} | {t['der_diarizer']:.3f} "
            f"| {t['words_right']:.3f} |",
            flush=True,
        )


def real_voices_table(models: Path, data: Path, asr: str, take: list[int] | None, counts: list[str]) -> None:
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_transcriber
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe.options import RequestOptions, SpeakerCounts
    from speakerscribe.response import endpoint_response
    from speakerscribe_dev import real_voices
    from speakerscribe_dev.evaluation import evaluate_real_voice

    conversations = _pick(real_voices.load(real_voices.prepare(data)), take)
    settings = ModelSettings(asr_model=str(models / asr), diarization_model=str(models / "diarization"))
    transcriber = load_transcriber(settings)
    print(f"\nReal-voice conversations, {asr} + diarization, counts: {', '.join(counts)}")
    print(
        "| counts | group | conversation | people | ref spk | diarizer spk | entry spk | DER entries | DER diarizer "
        "| words right | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for conv in conversations:
        waveform = decode_audio(conv.wav.read_bytes()).waveform
        for mode in counts:
            options = RequestOptions(speakers=SpeakerCounts(num=conv.n_speakers) if mode == "true" else SpeakerCounts())
            t0 = time.perf_counter()
            result = transcriber.run(waveform, options)
            seconds = time.perf_counter() - t0
            row = evaluate_real_voice(conv, endpoint_response(result, words=True), result.diarization)
            rows.append({**row, "counts": mode})
            print(
                f"| {mode} | {conv.split} | {conv.uri} | {' '.join(conv.people)} | {row['reference_speakers']} "
                f"| {row['diarizer_speakers']} | {row['entry_speakers']} | {row['der_entries']:.3f} "
                f"| {row['der_diarizer']:.3f} | {row['words_right']}/{row['words_total']} | {seconds:.0f} |",
                flush=True,
            )
    _real_voice_summary(rows)


def _real_voice_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--real-voices", type=Path, default=REPO / "data" / "real_voices")
    parser.add_argument("--counts", nargs="+", choices=["default", "true"], default=["default", "true"])
    parser.add_argument(
        "--rv-take", nargs=3, type=int, metavar=("TWO", "THREE", "FOUR"), default=None,
        help="real_voices: conversations per group and quality by number of people (default: all)",
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--speech", type=Path, default=REPO / ".cache" / "speech")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--sets", nargs="+", choices=["festival", "ami", "real_voices"], default=["festival", "ami"])
    _real_voice_arguments(parser)
    parser.add_argument(
        "--splits", nargs="+", choices=["train", "development", "test"], default=["train", "development"]
    )
    parser.add_argument("--ami-model", default="whisper-base", help="ASR model for the AMI and real-voice tables")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "ami" in args.sets:
        ami_table(args.models, args.data, args.splits, args.ami_model)
    if "real_voices" in args.sets:
        real_voices_table(args.models, args.real_voices, args.ami_model, args.rv_take, args.counts)
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
