"""The first clustering pass with and without cannot-link constraints, on the real-voice conversations (issue 26).

    .venv/bin/python benchmarks/constrained_clustering.py --group calibration --take 3
    .venv/bin/python benchmarks/constrained_clustering.py --group held-out --take 3

For each conversation (``--take`` per quality and number of people), segmentation and embeddings are computed once;
then pyannote's centroid-linkage clustering ("plain"), the constrained clustering
(:mod:`speakerscribe.diarization.constrained_clustering`) with no count, and with the true count. DER (collar 0.25,
overlap scored, inside the UEM) of pyannote's diarization output - the first pass only, without the diarizer's
second pass - and whether the speaker count is exact.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

MODES = ("plain", "constrained", "constrained+true")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=["calibration", "held-out"], default="calibration")
    parser.add_argument("--take", type=int, default=3, help="conversations per quality and number of people")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "real_voices")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    import torch
    from calibrate_diarization import cached, pyannote_file
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.pyannote_pipeline import BoundedAgglomerativeClustering, build
    from speakerscribe_dev import real_voices
    from speakerscribe_dev.evaluation import der_turns

    by_cell: dict = {}
    for conv in real_voices.load(real_voices.prepare(args.data)):
        if conv.split == args.group:
            by_cell.setdefault((conv.quality, len(conv.people)), []).append(conv)
    chosen = [c for cell in sorted(by_cell) for c in by_cell[cell][: args.take]]
    pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), True)
    results: dict = {}
    print("| conversation | " + " | ".join(f"{m} DER / speakers" for m in MODES) + " |")
    print("|---|" + "---|" * len(MODES))
    with torch.inference_mode():
        for conv in chosen:
            file = pyannote_file(conv.uri, conv.wav)
            ref = [(t.start, t.end, t.speaker) for t in conv.turns]
            cells = []
            for mode in MODES:
                pipeline.clustering.__class__ = BoundedAgglomerativeClustering
                build(pipeline, True, constrained=mode != "plain")
                count = {"num_speakers": len(conv.people)} if mode.endswith("true") else {}
                out = pipeline(file, **count).speaker_diarization
                hyp = [(s.start, s.end, label) for s, _, label in out.itertracks(yield_label=True)]
                der = der_turns(ref, hyp, conv.uem)["diarization error rate"]
                found = len({h[2] for h in hyp})
                results.setdefault((conv.quality, len(conv.people), mode), []).append((der, found == len(conv.people)))
                cells.append(f"{der:.3f} / {found} of {len(conv.people)}")
            print(f"| {conv.uri} | " + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.group}: mean DER, count exact")
    print("| quality | people | " + " | ".join(MODES) + " |")
    print("|---|---|" + "---|" * len(MODES))
    for quality, people in sorted(by_cell):
        cells = []
        for mode in MODES:
            rows = results.get((quality, people, mode), [])
            if rows:
                cells.append(f"{sum(d for d, _ in rows) / len(rows):.3f}, {sum(e for _, e in rows)}/{len(rows)}")
        print(f"| {quality} | {people} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
