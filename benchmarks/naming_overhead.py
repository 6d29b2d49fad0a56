"""What naming known speakers adds to a request: a ~5-minute two-person conversation, with and without four
reference clips, interleaved in the same run, in alternating order (these machines are noisy: compare the ratio,
not the seconds).

    .venv/bin/python benchmarks/naming_overhead.py [--model whisper-tiny.en] [--repeats 4] [--lines 80]

The handler is the offline default (Whisper + the CAM++ diarizer) on the CPU. The references are four festival
voices (two present, two absent) speaking sentences that are not in the conversation. Prints the median wall time
of each configuration, the ratio, the diarization stage's own time (naming runs inside it, alongside Whisper), and
the naming step's own time (``timings.speaker_naming``: decoding aside, all that naming adds), which is the figure to
trust where the whole-request ratio is within the machine's noise.
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

REFERENCES = {
    "A": "I will send you the report about the new warehouse by tomorrow evening.",
    "B": "My favourite place to go walking is the old forest behind the river.",
    "C": "Please remember to lock the door when you leave the building tonight.",
    "I": "Buongiorno a tutti, oggi parliamo del nuovo progetto della scuola.",
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--lines", type=int, default=80)
    args = parser.parse_args(argv)

    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe_dev.conversation import Line, long_conversation, synthesize

    speech = REPO / ".cache" / "speech"
    conversation = synthesize(long_conversation(args.lines, seed=7), speech, f"naming_{args.lines}")
    audio = conversation.wav.read_bytes()
    known = {
        f"Person {v}": base64.b64encode(synthesize([Line(v, t)], speech, f"reference_{v}").wav.read_bytes()).decode()
        for v, t in REFERENCES.items()
    }
    handler = EndpointHandler(
        "",
        ModelSettings.given(
            asr_model=str(args.models / args.model), diarization_model=str(args.models / "diarization")
        ),
    )
    handler({"inputs": audio})  # warm-up
    wall: dict[str, list[float]] = {"plain": [], "named": []}
    diarization: dict[str, list[float]] = {"plain": [], "named": []}
    naming: list[float] = []
    found = None
    configurations = (("plain", {}), ("named", {"known_speakers": known}))
    for repeat in range(args.repeats):  # the order alternates, so neither configuration always runs second
        for key, parameters in configurations if repeat % 2 == 0 else configurations[::-1]:
            start = time.perf_counter()
            out = handler({"inputs": audio, "parameters": parameters})
            wall[key].append(time.perf_counter() - start)
            diarization[key].append(out["timings"].get("diarization", 0.0))
            if key == "named":
                naming.append(out["timings"]["speaker_naming"])
                found = [(k["name"], k["found"], k["similarity"]) for k in out["known_speakers"]]
    plain, named = statistics.median(wall["plain"]), statistics.median(wall["named"])
    print(f"audio {conversation.duration:.1f} s, model {args.model}, {args.repeats} repeats, interleaved")
    print(f"plain request   median {plain:.2f} s  (diarization {statistics.median(diarization['plain']):.2f} s)")
    print(f"4 known speakers median {named:.2f} s  (diarization {statistics.median(diarization['named']):.2f} s)")
    print(f"ratio named/plain: {named / plain:.3f}  ({100 * (named / plain - 1):+.1f}%, whole requests: noisy)")
    pairs = [n / p for n, p in zip(wall["named"], wall["plain"])]
    print(f"ratio of each repeat: {', '.join(f'{r:.3f}' for r in pairs)}; median {statistics.median(pairs):.3f}")
    step = statistics.median(naming)
    share = 100 * step / plain
    print(f"the naming step itself (timings.speaker_naming): median {step:.3f} s = {share:.2f}% of a plain request")
    print(f"names: {found}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
