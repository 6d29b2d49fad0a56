"""Choose the diarizer's clustering hyper-parameters on real speech (AMI train + development), never on test.

    .venv/bin/python benchmarks/calibrate_diarization.py [--data data/ami] [--models models] [--top 15]

Segmentation and speaker embeddings are computed once per file (both embedding paths: frames shared across
windows, and pyannote's standard per-window path); only clustering and reconstruction run for each candidate.
Candidates: linkage method x distance threshold x minimum cluster size. Each is scored by DER (collar 0.25, overlap
scored, inside the UEM) of the diarizer's output and of its exclusive output, averaged over the files, and by the
number of files whose speaker count is exact. Prints the best candidates by DER, then the chosen one on each
path with every file.

Then the second clustering pass (``speakerscribe.recluster``) on top of the deployed first pass: threshold x
minimum share, scored on AMI (DER of both outputs, speaker count) and, as a guard, on the festival conversations
(meeting, back-channels, and three speakers of whom two are male diphone voices).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

METHODS = ("centroid", "average")
THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(11))  # 0.50 .. 1.00
MIN_CLUSTER_SIZES = (1, 2, 3, 4, 6, 8, 12)


def pyannote_file(uri: str, wav: Path) -> dict:
    """The in-memory file dict pyannote takes: decoded as the service decodes, with a ``uri`` to cache by."""
    import torch

    from speakerscribe.audio import decode_audio
    from speakerscribe.records import SAMPLE_RATE

    waveform = decode_audio(wav.read_bytes()).waveform
    return {"waveform": torch.from_numpy(waveform.samples)[None], "sample_rate": SAMPLE_RATE, "uri": uri}


def cached(pipeline, shared_frames: bool):
    """Memoise segmentation and embeddings per file uri on ``pipeline`` (one embedding path)."""
    from speakerscribe.pyannote_pipeline import build, supports_shared_frames

    if shared_frames and not supports_shared_frames(pipeline):
        raise SystemExit("the diarization model does not support shared frames")
    pipeline = build(pipeline, shared_frames)
    seg, emb = pipeline.get_segmentations, pipeline.get_embeddings
    cache: dict = {}

    def get_segmentations(file, hook=None):
        key = ("seg", file["uri"])
        if key not in cache:
            cache[key] = seg(file, hook=hook)
        return cache[key]

    def get_embeddings(file, binarized, exclude_overlap=False, hook=None):
        key = ("emb", file["uri"])
        if key not in cache:
            cache[key] = emb(file, binarized, exclude_overlap=exclude_overlap, hook=hook)
            cache[("frames", file["uri"])] = getattr(pipeline, "last_frames", None)
        return cache[key]

    pipeline.frames_of = lambda uri: cache.get(("frames", uri))

    pipeline.get_segmentations, pipeline.get_embeddings = get_segmentations, get_embeddings
    return pipeline


def score(pipeline, files, recordings, method, threshold, min_cluster_size):
    from speakerscribe_dev.evaluation import der_turns

    pipeline.clustering.method = method
    pipeline.clustering.threshold = threshold
    pipeline.clustering.min_cluster_size = min_cluster_size
    rows = []
    for file, rec in zip(files, recordings):
        out = pipeline(file)
        ref = [(t.start, t.end, t.speaker) for t in rec.turns]
        hyp = [(s.start, s.end, label) for s, _, label in out.speaker_diarization.itertracks(yield_label=True)]
        exc = [
            (s.start, s.end, label) for s, _, label in out.exclusive_speaker_diarization.itertracks(yield_label=True)
        ]
        rows.append(
            {
                "uri": rec.uri,
                "der": der_turns(ref, hyp, rec.uem)["diarization error rate"],
                "der_exclusive": der_turns(ref, exc, rec.uem)["diarization error rate"],
                "found": len({h[2] for h in hyp}),
                "true": len(rec.speakers),
            }
        )
    n = len(rows)
    return {
        "der": sum(r["der"] for r in rows) / n,
        "der_exclusive": sum(r["der_exclusive"] for r in rows) / n,
        "exact": sum(r["found"] == r["true"] for r in rows),
        "rows": rows,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--speech", type=Path, default=REPO / ".cache" / "speech")
    parser.add_argument(
        "--first-thresholds", type=float, nargs="+", default=None, help="first-pass thresholds under the second pass"
    )
    parser.add_argument("--second-pass-only", action="store_true", help="skip the first-pass grid")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    import torch
    from pyannote.audio import Pipeline

    from speakerscribe_dev import ami

    recordings = ami.load(ami.prepare(args.data), ami.TUNING_SPLITS)
    files = [pyannote_file(rec.uri, rec.wav) for rec in recordings]
    print(f"{len(files)} files: {', '.join(r.uri for r in recordings)} (splits {', '.join(ami.TUNING_SPLITS)})")
    if args.second_pass_only:
        second_pass(args, files, recordings)
        return 0
    results = {}
    for shared in (True, False):
        pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), shared)
        t0 = time.perf_counter()
        with torch.inference_mode():
            for file in files:
                pipeline(file)
            print(f"embeddings ({'shared frames' if shared else 'standard'}): {time.perf_counter() - t0:.1f} s")
            for method, threshold, mcs in itertools.product(METHODS, THRESHOLDS, MIN_CLUSTER_SIZES):
                results[(shared, method, threshold, mcs)] = score(pipeline, files, recordings, method, threshold, mcs)
    print("\n| path | method | threshold | min cluster size | DER | DER exclusive | count exact |")
    print("|---|---|---|---|---|---|---|")
    ranked = sorted(results.items(), key=lambda kv: (kv[1]["der"], -kv[1]["exact"]))
    for (shared, method, threshold, mcs), r in ranked[: args.top]:
        path = "shared" if shared else "standard"
        print(
            f"| {path} | {method} | {threshold} | {mcs} | {r['der']:.3f} | {r['der_exclusive']:.3f} "
            f"| {r['exact']}/{len(files)} |"
        )
    print("\nEvery threshold at min cluster size 1 (shared frames / standard):")
    print(
        "| method | threshold | DER shared | DER standard | exclusive shared | count exact shared "
        "| count exact standard |"
    )
    print("|---|---|---|---|---|---|---|")
    for method, threshold in itertools.product(METHODS, THRESHOLDS):
        a, b = results[(True, method, threshold, 1)], results[(False, method, threshold, 1)]
        print(
            f"| {method} | {threshold} | {a['der']:.3f} | {b['der']:.3f} | {a['der_exclusive']:.3f} "
            f"| {a['exact']}/{len(files)} | {b['exact']}/{len(files)} |"
        )
    best = ranked[0][0]
    for shared in (True, False):
        key = (shared, *best[1:])
        r = results[key]
        print(
            f"\n{'shared frames' if shared else 'standard'} path at {best[1:]}: DER {r['der']:.3f}, "
            f"exclusive {r['der_exclusive']:.3f}, count exact {r['exact']}/{len(files)}"
        )
        for row in r["rows"]:
            print(
                f"  {row['uri']}: DER {row['der']:.3f} exclusive {row['der_exclusive']:.3f} "
                f"speakers {row['found']}/{row['true']}"
            )
    second_pass(args, files, recordings)
    return 0


def second_pass(args, files, recordings) -> None:
    import yaml
    from pyannote.audio import Pipeline

    from speakerscribe_dev.conversation import MEETING, THREE_SPEAKERS, long_conversation, synthesize

    deployed = yaml.safe_load((args.models / "diarization" / "config.yaml").read_text())["params"]["clustering"]
    convs = {
        "meeting": synthesize(MEETING, args.speech, "meeting"),
        "backchannels": synthesize(long_conversation(20, seed=5, backchannel_every=2), args.speech, "backchannels"),
        "three_speakers": synthesize(THREE_SPEAKERS, args.speech, "three_speakers"),
        "quick_turns": synthesize(
            long_conversation(16, seed=7, backchannel_every=2, pauses=(0.15, 0.35)), args.speech, "quick_turns"
        ),
    }
    fest = {name: pyannote_file(name, c.wav) for name, c in convs.items()}
    pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), True)
    for threshold in args.first_thresholds or [deployed["threshold"]]:
        pipeline.clustering.threshold = threshold
        print(f"\nSecond pass over the first pass at {deployed['method']} {threshold}:")
        second_pass_table(pipeline, files, recordings, convs, fest)


def second_pass_table(pipeline, files, recordings, convs, fest) -> None:
    import torch

    from speakerscribe.diarize import annotation_turns
    from speakerscribe.recluster import ReclusterOptions, recluster
    from speakerscribe.records import SAMPLE_RATE
    from speakerscribe.shared_frames import FRAME_HOP
    from speakerscribe_dev.evaluation import der, der_turns

    first: dict[str, tuple] = {}
    with torch.inference_mode():
        for file in [*files, *fest.values()]:
            out = pipeline(file)
            end = file["waveform"].shape[-1] / SAMPLE_RATE
            first[file["uri"]] = (
                annotation_turns(out.exclusive_speaker_diarization, end),
                annotation_turns(out.speaker_diarization, end),
            )
    pool = pipeline._embedding.model_.campplus.pool

    def run(opts):
        rows = []
        for rec in recordings:
            exc, ovl = first[rec.uri]
            if opts is not None and exc:
                exc, ovl = recluster(exc, ovl, pipeline.frames_of(rec.uri), pool, FRAME_HOP / SAMPLE_RATE, opts)
            ref = [(t.start, t.end, t.speaker) for t in rec.turns]
            rows.append(
                (
                    der_turns(ref, [(t.start, t.end, t.speaker) for t in ovl], rec.uem)["diarization error rate"],
                    der_turns(ref, [(t.start, t.end, t.speaker) for t in exc], rec.uem)["diarization error rate"],
                    len({t.speaker for t in ovl}) == len(rec.speakers),
                )
            )
        guard = []
        for name, conv in convs.items():
            exc, ovl = first[name]
            if opts is not None:
                exc, ovl = recluster(exc, ovl, pipeline.frames_of(name), pool, FRAME_HOP / SAMPLE_RATE, opts)
            d = der(conv, [(t.start, t.end, t.speaker) for t in exc])
            guard.append(f"{len({t.speaker for t in exc})} / {d['diarization error rate']:.3f}")
        n = len(rows)
        return (
            f"{sum(r[0] for r in rows) / n:.3f} | {sum(r[1] for r in rows) / n:.3f} | {sum(r[2] for r in rows)}/{n} | "
            + " | ".join(guard)
        )

    print(
        "| second pass | AMI DER | AMI DER exclusive | AMI count exact | meeting spk / DER | back-channels "
        "| three speakers | quick turns |"
    )
    print("|---|---|---|---|---|---|---|---|")
    print(f"| none | {run(None)} |")
    for threshold in (0.75, 0.8, 0.85):
        for share in (0.1, 0.15, 0.2):
            opts = ReclusterOptions(threshold=threshold, min_share=share)
            print(f"| threshold {threshold}, min share {share} | {run(opts)} |", flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
