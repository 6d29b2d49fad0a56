"""Accuracy table on the festival conversations with the offline default models (README "Accuracy").

    .venv/bin/python benchmarks/accuracy.py [--models models]

Prints one row per (model, conversation): WER (Whisper English normaliser), DER of the diarizer's exclusive
turns (collar 0.25 s) with its missed/false-alarm/confusion parts, speakers found, share of words attributed to the
right speaker, and the real-time factor on this machine.
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
    from speakerscribe.offline.conversation import MEETING, long_conversation, synthesize

    return {
        "meeting": synthesize(MEETING, speech_dir, "meeting"),
        "backchannels": synthesize(long_conversation(20, seed=5, backchannel_every=2), speech_dir, "backchannels"),
        "several_minutes": synthesize(long_conversation(60, seed=2), speech_dir, "conv60"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--speech", type=Path, default=REPO / ".cache" / "speech")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from speakerscribe.audio import decode_audio
    from speakerscribe.offline.evaluation import der, wer, word_attribution
    from speakerscribe.pipeline import Models, Transcriber, load_models
    from speakerscribe.response import endpoint_response
    from speakerscribe.settings import InferenceConfig, ModelSettings

    convs = conversations(args.speech)
    cfg = InferenceConfig(return_timestamps="word")
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
            waveform, _ = decode_audio(conv.wav.read_bytes())
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
