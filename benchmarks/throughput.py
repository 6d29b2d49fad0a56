"""Long-audio throughput: our handler against the original handler's approach, same models, same input, same run.

    .venv/bin/python benchmarks/throughput.py --model whisper-tiny.en --minutes 5 [--repeats 2] [--no-diarization]

The audio is a festival two-speaker conversation (repeated to reach ``--minutes``). Each system runs ``--repeats``
times, alternating, after one warm-up call each; the table reports the median real-time factor (audio seconds per
wall second), the ratio ours / original, median per-stage seconds, and output quality (WER, and the share of
transcript time given to the right speaker) so a speed-up is never bought with accuracy.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def conversation(minutes: float, speech_dir: Path):
    """(wav bytes, reference text, true turns) of about ``minutes`` of conversation."""
    import soundfile as sf

    from speakerscribe_dev.conversation import long_conversation, synthesize

    base = synthesize(long_conversation(72, seed=21), speech_dir, "bench5")  # ~5 minutes
    samples, rate = sf.read(str(base.wav), dtype="float32")
    repeats = max(1, round(minutes * 60 / base.duration))
    audio = np.tile(samples, repeats)
    turns = [
        (t.speaker, t.start + k * base.duration, t.end + k * base.duration, t.text)
        for k in range(repeats)
        for t in base.turns
    ]
    if minutes * 60 < base.duration:  # a shorter excerpt: whole turns only
        turns = [t for t in turns if t[2] <= minutes * 60]
        audio = audio[: int(turns[-1][2] * rate) + rate // 2]
    reference = " ".join(t[3] for t in turns)
    turns = [t[:3] for t in turns]
    buf = io.BytesIO()
    sf.write(buf, audio, rate, format="WAV", subtype="PCM_16")
    return buf.getvalue(), reference, turns, len(audio) / rate


def timed_entries(speakers: list[dict], duration: float) -> list[tuple[float, float, str]]:
    """(start, end, speaker) of response entries; the transformers pipeline can leave a start or an end null (a
    missing timestamp): a null start takes the previous entry's end (0 first), a null end the audio's duration."""
    out, previous_end = [], 0.0
    for u in speakers:
        start, end = u["timestamp"]
        start = previous_end if start is None else start
        end = duration if end is None else end
        out.append((start, end, u["speaker"]))
        previous_end = end
    return out


def time_attribution(turns, entries) -> float:
    """Share of transcript time whose speaker label maps (majority vote) to the true speaker, 10 ms grid."""
    if not entries:
        return 0.0
    grid_true, grid_hyp = {}, {}
    for who, a, b in turns:
        for k in range(int(a * 100), int(b * 100)):
            grid_true[k] = who
    for a, b, label in entries:
        for k in range(int(a * 100), int(b * 100)):
            grid_hyp[k] = label
    both = [k for k in grid_hyp if k in grid_true]
    if not both:
        return 0.0
    votes: dict[str, dict[str, int]] = {}
    for k in both:
        votes.setdefault(grid_hyp[k], {}).setdefault(grid_true[k], 0)
        votes[grid_hyp[k]][grid_true[k]] += 1
    mapping = {label: max(v, key=v.get) for label, v in votes.items()}
    return sum(mapping[grid_hyp[k]] == grid_true[k] for k in both) / len(both)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-diarization", action="store_true")
    parser.add_argument("--batch-size", type=int, default=24, help="our batch size (the original keeps 24)")
    parser.add_argument("--skip-original", action="store_true", help="only ours (ablations: set env variables)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")

    from baseline import OriginalApproach

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_transcriber
    from speakerscribe.models.settings import InferenceConfig, ModelSettings
    from speakerscribe.response import endpoint_response
    from speakerscribe_dev.evaluation import wer

    audio, reference, turns, duration = conversation(args.minutes, REPO / ".cache" / "speech")
    asr_dir = str(args.models / args.model)
    diar_dir = None if args.no_diarization else str(args.models / "diarization")
    ours = load_transcriber(ModelSettings(asr_model=asr_dir, diarization_model=diar_dir))
    original = None if args.skip_original else OriginalApproach(asr_dir, diar_dir)
    cfg = InferenceConfig(batch_size=args.batch_size).to_options()

    def run_ours():
        t0 = time.perf_counter()
        waveform = decode_audio(audio).waveform
        decode_s = time.perf_counter() - t0
        result = ours.run(waveform, cfg)
        out = endpoint_response(result)
        return out, {"decode": decode_s, **result.timings}, time.perf_counter() - t0

    def run_original():
        t0 = time.perf_counter()
        out, timings = original(audio)
        return out, timings, time.perf_counter() - t0

    warm = audio[: 44 + 16000 * 2 * 10]  # the first 10 s of the WAV (16-bit mono)
    ours.run(decode_audio(warm).waveform, cfg)
    systems = [("ours", run_ours)]
    if original is not None:
        original(warm)
        systems.append(("original", run_original))
    runs: dict[str, list] = {name: [] for name, _ in systems}
    for _ in range(args.repeats):
        for name, fn in systems:
            runs[name].append(fn())
            print(f"{name}: {runs[name][-1][2]:.1f} s", file=sys.stderr, flush=True)

    print(
        f"audio: {duration:.0f} s two-speaker conversation; model {args.model}; "
        f"diarization {'off' if args.no_diarization else 'on'}; {args.repeats} runs each, median"
    )
    print("| system | RTF (x real time) | wall s | WER | speaker-time accuracy | stages (s) |")
    print("|---|---|---|---|---|---|")
    summary = {}
    for name in [n for n in ("original", "ours") if n in runs]:
        walls = [r[2] for r in runs[name]]
        out = runs[name][-1][0]
        stages = {k: statistics.median(r[1].get(k, 0.0) for r in runs[name]) for k in runs[name][-1][1]}
        entries = timed_entries(out["speakers"], duration)
        wall = statistics.median(walls)
        summary[name] = {
            "rtf": duration / wall,
            "wall": wall,
            "wer": wer(reference, out["text"]),
            "speaker_time_accuracy": time_attribution(turns, entries) if entries else None,
            "stages": stages,
        }
        acc = summary[name]["speaker_time_accuracy"]
        print(
            f"| {name} | {duration / wall:.1f} | {wall:.1f} | {summary[name]['wer']:.3f} | "
            f"{'-' if acc is None else f'{acc:.3f}'} | "
            + ", ".join(f"{k} {v:.2f}" for k, v in stages.items() if k != "diarization_wait")
            + " |"
        )
    ratio = summary["ours"]["rtf"] / summary["original"]["rtf"] if "original" in summary else None
    if ratio is not None:
        print(f"\nours / original real-time factor: {ratio:.2f}x")
    if args.json:
        args.json.write_text(
            json.dumps({"duration": duration, "model": args.model, "ratio": ratio, **summary}, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
