"""What an idle thread that once ran PyTorch costs every request: the same request, in the same process, with and
without such a thread alive, interleaved in alternating order (compare the ratios, not the seconds).

    .venv/bin/python benchmarks/worker_threads.py [--model whisper-tiny.en] [--lines 24] [--repeats 3]

PyTorch's CPU kernels run on OpenMP; every thread that has run one keeps a team of OpenMP workers while it lives,
and once the process holds more OpenMP threads than cores, libgomp stops spinning and puts idle workers to sleep
after every parallel region, so small kernels (each greedy decoding step, each speech-detector frame) pay a
wake-up. Before 2026-12-01 the diarizer ran in a pooled thread that stayed alive between requests: every request
after the first ran in the "idle torch thread alive" state. Now it runs in a thread that ends with the request
(``speakerscribe.runtime.start_worker``). Prints per-stage medians of both states and their ratios, for the handler
with and without the diarizer.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-tiny.en")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--lines", type=int, default=24)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe_dev.conversation import long_conversation, synthesize

    conversation = synthesize(long_conversation(args.lines, seed=7), REPO / ".cache" / "speech", f"ab_{args.lines}")
    audio = conversation.wav.read_bytes()
    print(f"audio {conversation.duration:.1f} s, model {args.model}, {args.repeats} repeats, alternating order")
    for diarization in (False, True):
        extra = {"diarization_model": str(args.models / "diarization")} if diarization else {}
        handler = EndpointHandler("", ModelSettings.given(asr_model=str(args.models / args.model), **extra))
        handler({"inputs": audio})  # warm-up
        wall: dict[str, list[float]] = {"alone": [], "idle thread": []}
        stages: dict[str, dict[str, list[float]]] = {"alone": {}, "idle thread": {}}
        for repeat in range(args.repeats):
            for state in ("alone", "idle thread") if repeat % 2 == 0 else ("idle thread", "alone"):
                idle = None
                if state == "idle thread":  # a thread that ran one small matmul and now waits, as a pool's would
                    idle = ThreadPoolExecutor(max_workers=1)
                    idle.submit(lambda: torch.ones(64, 64) @ torch.ones(64, 64)).result()
                start = time.perf_counter()
                out = handler({"inputs": audio})
                wall[state].append(time.perf_counter() - start)
                for name, seconds in out["timings"].items():
                    stages[state].setdefault(name, []).append(seconds)
                if idle is not None:
                    idle.shutdown(wait=True)  # the thread ends: its OpenMP team goes with it
        print(f"\n{'with' if diarization else 'without'} diarization:")
        print("| | alone | idle torch thread alive | ratio idle / alone |")
        print("|---|---|---|---|")
        a, b = statistics.median(wall["alone"]), statistics.median(wall["idle thread"])
        print(f"| wall s | {a:.3f} | {b:.3f} | {b / a:.2f} |")
        for name in ("vad", "asr_encode", "asr_generate", "asr_score", "diarization"):
            if name in stages["alone"]:
                a, b = statistics.median(stages["alone"][name]), statistics.median(stages["idle thread"][name])
                print(f"| {name} s | {a:.3f} | {b:.3f} | {b / a:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
