"""Calibrate the cannot-link clustering (issue 26): threshold x min_links x split_distance x second pass.

    .venv/bin/python benchmarks/sweep_constraints.py --group calibration
    .venv/bin/python benchmarks/sweep_constraints.py --group held-out --only 0.95,2,0.5,on

Sets: the real-voice conversations of one group (both qualities, 2-4 people), the AMI excerpts of the tuning splits
(train + development; never test) and the festival conversations (a guard: synthesized voices). Segmentation,
embeddings and CAM++ frames are computed once per file; each candidate then runs clustering, reconstruction and (when
on, and no count is given, as in the service) the second pass. Each candidate is scored without a count and with
the true count: mean DER (collar 0.25, overlap scored, inside the UEM) per cell, exact speaker counts, and the files
where the true count makes DER worse than no count (by more than 0.02).
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
sys.path.insert(0, str(REPO / "benchmarks"))

WORSE = 0.02


def candidates(args) -> list[dict]:
    """Each ``--only`` entry: comma-separated key=value of t (threshold, or 'plain' for pyannote's clustering),
    tn (the threshold on narrowband audio; t when absent),
    l (min_links), s (split_distance), f (split_floor), g (near_share), m (merged_share on narrowband audio),
    a (small_share), an (small_share on narrowband audio), mw / aw / lw / sw (merged_share / small_share /
    min_links / split_distance on wideband audio), fs (the diarizer's fold_share: speakers under that share of the
    speech folded without a count; the service's value when absent), ac (its alike_cosine on wideband audio, 0: off;
    the service's value when absent), km (1: k-means where an exact count is given and the agglomeration reaches it
    only by counting a stray cluster; 0, the service's, when absent), kms (k-means where, on a telephone line, the
    agglomeration falls short of an exact count; 1, the service's, when absent), rt / rs (the second pass's
    threshold / min_share on telephone audio; the service's when absent), ap (the diarizer's apart_share: speakers
    under it never heard in a window with their nearest voice folded; 0: off; the service's when absent), ca (1: a
    count asking for more people is not met by such a piece; 0: off; the service's when absent), second (on/off)."""
    if args.only:
        rows = []
        for text in args.only:
            row = {"t": "plain", "l": 2, "s": 0.5, "f": 0.0, "second": True}
            for part in text.split(","):
                key, value = part.split("=")
                row[key] = value == "on" if key == "second" else value if value == "plain" else float(value)
            rows.append(row)
        return rows
    rows = [{"t": "plain", "l": 0, "s": 0.0, "f": 0.0, "second": p} for p in (True, False)]
    for t, m, s, f, p in itertools.product(args.thresholds, args.min_links, args.split, args.floor, (True, False)):
        rows.append({"t": t, "l": m, "s": s, "f": f, "second": p})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=["calibration", "held-out"], default="calibration")
    parser.add_argument("--take", type=int, default=100, help="conversations per quality and number of people")
    parser.add_argument("--qualities", nargs="+", default=["meeting", "telephone"], help="real-voice qualities")
    parser.add_argument("--no-ami", action="store_true")
    parser.add_argument("--no-festival", action="store_true")
    parser.add_argument(
        "--ami-splits", nargs="+", default=["train", "development"], help="AMI splits (test: report only, never tune)"
    )
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.85, 0.95])
    parser.add_argument("--min-links", type=int, nargs="+", default=[2])
    parser.add_argument("--split", type=float, nargs="+", default=[0.5])
    parser.add_argument("--floor", type=float, nargs="+", default=[0.0, 0.7, 0.8])
    parser.add_argument("--only", nargs="+", help="candidates, e.g. t=0.95,l=2,s=0.5,f=0.7,second=on (t=plain)")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "real_voices")
    parser.add_argument("--ami", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--speech", type=Path, default=REPO / ".cache" / "speech")
    parser.add_argument("--per-file", action="store_true")
    parser.add_argument(
        "--stretches",
        choices=["on", "off", "all"],
        help="the clustering's CAM++ embeddings from single-voice stretches (on) or shared frames (off); all: the "
        "stretch frames also for the second pass, folding and the count's apart check; default: the service's",
    )
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    from dataclasses import replace

    from calibrate_diarization import festival_guard
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.diarization.pyannote_pipeline import (
        BoundedAgglomerativeClustering,
        ConstrainedAgglomerativeClustering,
    )
    from speakerscribe.options import SpeakerCounts
    from speakerscribe.records import SAMPLE_RATE, Waveform
    from speakerscribe.runtime import Placement
    from speakerscribe_dev import ami, real_voices
    from speakerscribe_dev.evaluation import der_turns
    from speakerscribe_dev.pyannote_cache import cached, pyannote_file

    items = []  # (cell, uri, file, reference turns, uem, true count)
    by_cell: dict = {}
    for conv in real_voices.load(real_voices.prepare(args.data)):
        if conv.split == args.group and conv.quality in args.qualities:
            by_cell.setdefault((f"rv-{conv.quality}", len(conv.people)), []).append(conv)
    for (quality, n), convs in sorted(by_cell.items()):
        for conv in convs[: args.take]:
            ref = [(t.start, t.end, t.speaker) for t in conv.turns]
            items.append((f"{quality}-{n}p", conv.uri, pyannote_file(conv.uri, conv.wav), ref, conv.uem, n))
    if not args.no_ami:
        for rec in ami.load(ami.prepare(args.ami), tuple(args.ami_splits)):
            ref = [(t.start, t.end, t.speaker) for t in rec.turns]
            items.append(("ami", rec.uri, pyannote_file(rec.uri, rec.wav), ref, rec.uem, len(rec.speakers)))
    if not args.no_festival:
        convs, fest = festival_guard(args)
        for name, conv in convs.items():
            ref = [(t.start, t.end, t.speaker) for t in conv.turns]
            end = fest[name]["waveform"].shape[-1] / SAMPLE_RATE
            items.append(("festival", name, fest[name], ref, (0.0, end), len({t[2] for t in ref})))
    pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), True)
    if args.stretches:
        pipeline.voice_stretches = args.stretches in ("on", "all")
        pipeline.stretch_frames_downstream = args.stretches == "all"
    diarizer = SpeakerDiarizer(pipeline, Placement("cpu", "float32", "sdpa"), shared_frames=True)
    base_threshold = float(pipeline.clustering.threshold)
    fold_share, alike_cosine, apart_share = diarizer.fold_share, diarizer.alike_cosine, diarizer.apart_share
    count_apart_check = diarizer.count_apart_check
    narrowband_second = diarizer.narrowband_recluster_options
    waves = {uri: Waveform(file["waveform"][0].numpy()) for _, uri, file, *_ in items}  # one array per file
    start = time.perf_counter()
    for _, uri, *_ in items:
        diarizer(waves[uri])
    print(f"{len(items)} files embedded in {time.perf_counter() - start:.0f} s", flush=True)

    def run(file, uri, true_n, second: bool, count: bool):
        """The service's diarizer (count rule, second pass, folding) on the cached features."""
        diarizer.recluster = second
        return diarizer(waves[uri], SpeakerCounts(num=true_n) if count else SpeakerCounts()).turns

    cells = sorted({it[0] for it in items})
    print("| candidate | " + " | ".join(cells) + " | worse with count |")
    print("|---|" + "---|" * (len(cells) + 1))
    for cand in candidates(args):
        if cand["t"] == "plain":
            pipeline.clustering.__class__ = BoundedAgglomerativeClustering
            pipeline.clustering.threshold = base_threshold
        else:
            pipeline.clustering.__class__ = ConstrainedAgglomerativeClustering
            pipeline.clustering.threshold = cand["t"]
            pipeline.clustering.constraint_options = replace(
                ConstrainedAgglomerativeClustering.constraint_options,
                min_links=int(cand["l"]),
                split_distance=cand["s"],
                split_floor=cand["f"],
                near_share=cand.get("g", 0.0),
                small_share=cand.get("a", 0.0),
                count_kmeans=bool(cand.get("km", 0)),
            )
            pipeline.clustering.narrowband_count_kmeans_short = bool(cand.get("kms", 1))
            pipeline.clustering.narrowband_merged_share = cand.get("m", 0.0)
            pipeline.clustering.narrowband_small_share = cand.get("an", 0.0)
            pipeline.clustering.narrowband_threshold = cand.get("tn")
            pipeline.clustering.wideband_merged_share = cand.get("mw", 0.0)
            pipeline.clustering.wideband_small_share = cand.get("aw", 0.0)
            pipeline.clustering.wideband_min_links = int(cand.get("lw", cand["l"]))
            pipeline.clustering.wideband_split_distance = cand.get("sw", cand["s"])
        diarizer.narrowband_recluster_options = replace(
            narrowband_second,
            threshold=cand.get("rt", narrowband_second.threshold),
            min_share=cand.get("rs", narrowband_second.min_share),
        )
        diarizer.fold_share = cand.get("fs", fold_share)
        diarizer.alike_cosine = cand.get("ac", alike_cosine) or None
        diarizer.apart_share = cand.get("ap", apart_share)
        diarizer.count_apart_check = bool(cand.get("ca", count_apart_check))
        second = cand["second"]
        scores: dict = {}
        worse = []
        for cell, uri, file, ref, uem, true_n in items:
            row = []
            for count in (False, True):
                hyp = [(t.start, t.end, t.speaker) for t in run(file, uri, true_n, second, count)]
                der = der_turns(ref, hyp, uem)["diarization error rate"]
                found = len({h[2] for h in hyp})
                row.append((der, found == true_n, found))
            scores.setdefault(cell, []).append(row)
            if row[1][0] > row[0][0] + WORSE:
                worse.append(f"{uri} {row[0][0]:.2f}->{row[1][0]:.2f}")
            if args.per_file:
                print(f"  {cand} {uri}: none {row[0][0]:.3f}/{row[0][2]} true {row[1][0]:.3f}/{row[1][2]} of {true_n}")
        text = []
        for cell in cells:
            rows = scores[cell]
            n = len(rows)
            text.append(
                f"{sum(r[0][0] for r in rows) / n:.3f} {sum(r[0][1] for r in rows)}/{n}"
                f" · {sum(r[1][0] for r in rows) / n:.3f}"
            )
        label = " ".join(f"{k}{v}" for k, v in cand.items() if k != "second") + (" 2nd" if second else "")
        print(f"| {label} | " + " | ".join(text) + f" | {len(worse)}: {'; '.join(worse[:4])} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
