"""What the second look (diarized speech without words decoded again) buys and costs, with and without it in the
same run, interleaved (these machines are noisy: compare the ratios, not the seconds).

    .venv/bin/python benchmarks/second_look.py [--model whisper-base] [--repeats 2] [--splits train development]
        [--conversations meeting backchannels several_minutes]

The handler is the offline default (Whisper + the CAM++ diarizer) on the CPU, default request parameters. Sets:
the AMI excerpts of the given splits (transcript coverage and DER of the ``speakers`` entries; no reference words
exist for them) and the festival conversations (WER). For each set: the accuracy with and without, the summed wall
time of the requests (median over repeats) and its ratio, the second look's own time (``timings.asr_second_look``)
and how many requests it ran in.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-base")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--splits", nargs="+", default=["train", "development"])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--conversations", nargs="+", default=["meeting", "backchannels", "several_minutes"], help="festival ones"
    )
    args = parser.parse_args(argv)

    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe.response import endpoint_response
    from speakerscribe_dev import ami
    from speakerscribe_dev.conversation import MEETING, long_conversation, synthesize
    from speakerscribe_dev.evaluation import evaluate_recording, summarise, wer

    handler = EndpointHandler(
        "",
        ModelSettings.given(
            asr_model=str(args.models / args.model), diarization_model=str(args.models / "diarization")
        ),
    )
    speech = REPO / ".cache" / "speech"
    scripts = {
        "meeting": (MEETING, "meeting"),
        "backchannels": (long_conversation(20, seed=5, backchannel_every=2), "backchannels"),
        "several_minutes": (long_conversation(60, seed=2), "conv60"),
    }
    festival = {key: synthesize(*scripts[key][:1], speech, scripts[key][1]) for key in args.conversations}
    recordings = ami.load(ami.prepare(args.data), tuple(args.splits))
    handler({"inputs": next(iter(festival.values())).wav.read_bytes()})  # warm-up

    def run(on: bool, audio: bytes):
        handler.transcriber.second_look = on
        start = time.perf_counter()
        result, _ = handler.process({"inputs": audio})
        return result, time.perf_counter() - start

    for name, items in (("AMI " + "+".join(args.splits), recordings), ("festival", list(festival.items()))):
        wall = {True: [], False: []}
        look_s: list[float] = []
        ran = 0
        scores: dict[bool, list] = {True: [], False: []}
        for repeat in range(args.repeats):
            totals = {True: 0.0, False: 0.0}
            for item in items:
                audio = (item.wav if name != "festival" else item[1].wav).read_bytes()
                for on in (False, True) if repeat % 2 == 0 else (True, False):
                    result, seconds = run(on, audio)
                    totals[on] += seconds
                    if repeat == 0:
                        if name == "festival":
                            scores[on].append(wer(item[1].reference_text, result.transcript.text))
                        else:
                            out = endpoint_response(result, words=True)
                            scores[on].append(evaluate_recording(item, out, result.diarization))
                    if on and repeat == 0 and "asr_second_look" in result.timings:
                        look_s.append(result.timings["asr_second_look"])
                        ran += 1
            for on in (True, False):
                wall[on].append(totals[on])
        handler.transcriber.second_look = True
        off, on = statistics.median(wall[False]), statistics.median(wall[True])
        print(f"\n{name}: {len(items)} requests, {args.model}, {args.repeats} repeats interleaved")
        if name == "festival":
            for (key, _), a, b in zip(items, scores[False], scores[True]):
                print(f"  {key:16s} WER without {a:.3f}  with {b:.3f}")
        else:
            for on_ in (False, True):
                s = summarise(scores[on_])
                label = "with   " if on_ else "without"
                print(
                    f"  {label} coverage {s['coverage']:.3f}  DER entries {s['der_entries']:.3f}"
                    f"  empty {s['empty']}  words right {s['words_single_right']:.3f}"
                )
        print(f"  wall: without {off:.2f} s  with {on:.2f} s  ratio {on / off:.3f}")
        print(f"  second look ran in {ran} of {len(items)} requests, {sum(look_s):.2f} s in all (first repeat)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
