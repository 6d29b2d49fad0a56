"""Choose the diarizer's clustering hyper-parameters on real speech (AMI train + development), never on test.

    .venv/bin/python benchmarks/calibrate_diarization.py [--data data/ami] [--models models] [--top 15]

Segmentation and speaker embeddings are computed once per file (both embedding paths: frames shared across
windows, and pyannote's standard per-window path); only clustering and reconstruction run for each candidate.
Candidates: linkage method x distance threshold x minimum cluster size. Each is scored by DER (collar 0.25, overlap
scored, inside the UEM) of the diarizer's output and of its exclusive output, averaged over the files, and by the
number of files whose speaker count is exact. Prints the best candidates by DER, then the chosen one on each
path with every file.

Then the second clustering pass (``speakerscribe.diarization.recluster``) on top of the deployed first pass: threshold x
minimum share, scored on AMI (DER of both outputs, speaker count) and, as a guard, on the festival conversations
(meeting, back-channels, and three speakers of whom two are male diphone voices). Last, the other methods on the same
first pass, scored the same way (``--alternatives-only`` for just these): senko's spectral clustering of 1.5 s
sub-segments instead of the second pass, and pyannote's clustering with more embeddings or constrained assignment.
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

from speakerscribe_dev.pyannote_cache import cached, pyannote_file  # noqa: E402

METHODS = ("centroid", "average")
THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(11))  # 0.50 .. 1.00
MIN_CLUSTER_SIZES = (1, 2, 3, 4, 6, 8, 12)


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
    parser.add_argument(
        "--alternatives-only", action="store_true", help="only the other clustering methods (spectral, ...)"
    )
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
    if args.alternatives_only:
        alternatives(args, files, recordings)
        return 0
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
    alternatives(args, files, recordings)
    return 0


def festival_guard(args) -> tuple[dict, dict]:
    """The festival conversations every clustering must keep apart: (conversations, pyannote file dicts)."""
    from speakerscribe_dev.conversation import MEETING, THREE_SPEAKERS, long_conversation, synthesize

    convs = {
        "meeting": synthesize(MEETING, args.speech, "meeting"),
        "backchannels": synthesize(long_conversation(20, seed=5, backchannel_every=2), args.speech, "backchannels"),
        "three_speakers": synthesize(THREE_SPEAKERS, args.speech, "three_speakers"),
        "quick_turns": synthesize(
            long_conversation(16, seed=7, backchannel_every=2, pauses=(0.15, 0.35)), args.speech, "quick_turns"
        ),
    }
    return convs, {name: pyannote_file(name, c.wav) for name, c in convs.items()}


def second_pass(args, files, recordings) -> None:
    import yaml
    from pyannote.audio import Pipeline

    deployed = yaml.safe_load((args.models / "diarization" / "config.yaml").read_text())["params"]["clustering"]
    convs, fest = festival_guard(args)
    pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), True)
    for threshold in args.first_thresholds or [deployed["threshold"]]:
        pipeline.clustering.threshold = threshold
        print(f"\nSecond pass over the first pass at {deployed['method']} {threshold}:")
        second_pass_table(pipeline, files, recordings, convs, fest)


def first_pass_outputs(pipeline, files) -> dict[str, tuple]:
    """uri -> (exclusive turns, overlapping turns) of the pipeline as it is set now."""
    import torch

    from speakerscribe.diarization.diarizer import annotation_turns
    from speakerscribe.records import SAMPLE_RATE

    first: dict[str, tuple] = {}
    with torch.inference_mode():
        for file in files:
            out = pipeline(file)
            end = file["waveform"].shape[-1] / SAMPLE_RATE
            first[file["uri"]] = (
                annotation_turns(out.exclusive_speaker_diarization, end),
                annotation_turns(out.speaker_diarization, end),
            )
    return first


def relabelled_scores(first, recordings, convs, relabel) -> str:
    """One table row: AMI DER (both outputs) and exact counts, then speakers / DER on each festival conversation,
    of ``relabel(uri, exclusive, turns) -> (exclusive, turns)`` applied to the first-pass outputs (None: as is)."""
    from speakerscribe_dev.evaluation import der, der_turns

    def apply(uri):
        exc, ovl = first[uri]
        return relabel(uri, exc, ovl) if relabel is not None and exc else (exc, ovl)

    rows = []
    for rec in recordings:
        exc, ovl = apply(rec.uri)
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
        exc, _ = apply(name)
        d = der(conv, [(t.start, t.end, t.speaker) for t in exc])
        guard.append(f"{len({t.speaker for t in exc})} / {d['diarization error rate']:.3f}")
    n = len(rows)
    return (
        f"{sum(r[0] for r in rows) / n:.3f} | {sum(r[1] for r in rows) / n:.3f} | {sum(r[2] for r in rows)}/{n} | "
        + " | ".join(guard)
    )


TABLE_HEAD = "| AMI DER | AMI DER exclusive | AMI count exact | meeting spk / DER | backchannels | three | quick |"


def second_pass_table(pipeline, files, recordings, convs, fest) -> None:
    from speakerscribe.diarization.recluster import ReclusterOptions, recluster
    from speakerscribe.diarization.shared_frames import FRAME_HOP
    from speakerscribe.records import SAMPLE_RATE

    first = first_pass_outputs(pipeline, [*files, *fest.values()])
    pool = pipeline._embedding.model_.campplus.pool

    def second(opts):
        return lambda uri, exc, ovl: recluster(exc, ovl, pipeline.frames_of(uri), pool, FRAME_HOP / SAMPLE_RATE, opts)

    print(f"| second pass {TABLE_HEAD}")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| none | {relabelled_scores(first, recordings, convs, None)} |")
    for threshold in (0.75, 0.8, 0.85):
        for share in (0.1, 0.15, 0.2):
            opts = ReclusterOptions(threshold=threshold, min_share=share)
            row = relabelled_scores(first, recordings, convs, second(opts))
            print(f"| threshold {threshold}, min share {share} | {row} |", flush=True)


def subsegments(turns, length_s: float = 1.5, shift_s: float = 0.6) -> list:
    """Windows of ``length_s`` every ``shift_s`` over each turn (the last one ending at the turn's end; a shorter
    turn is one window), keeping the turn's speaker: how senko cuts speech for CAM++ on a CPU."""
    from speakerscribe.records import SpeakerTurn

    out = []
    for t in turns:
        start = t.start
        while start + length_s < t.end:
            out.append(SpeakerTurn(start, start + length_s, t.speaker))
            start += shift_s
        if start < t.end:
            out.append(SpeakerTurn(max(t.start, min(t.end - length_s, start)), t.end, t.speaker))
    return out


def spectral_labels(emb, pval: float, min_cluster_size: int, merge_cos: float, max_speakers: int = 15):
    """Spectral clustering of unit embeddings as senko (after 3D-Speaker) does it, written from its description:
    cosine affinity pruned to each row's strongest ``pval`` share of links (at least 6), the unnormalised Laplacian,
    the speaker count at the largest eigengap, k-means on that many eigenvectors; clusters with fewer than
    ``min_cluster_size`` members join the nearest larger one, then the closest pair of clusters is merged while
    their centroids' cosine similarity is at least ``merge_cos``. Under 10 embeddings: one speaker."""
    import numpy as np
    from sklearn.cluster import KMeans

    n = len(emb)
    if n < 10:
        return np.zeros(n, dtype=np.int64)
    affinity = emb @ emb.T
    drop = min(int((1 - pval) * n), n - 6)
    weakest = np.argsort(affinity, axis=1)[:, :drop]
    np.put_along_axis(affinity, weakest, 0.0, axis=1)
    affinity = 0.5 * (affinity + affinity.T)
    np.fill_diagonal(affinity, 0.0)
    laplacian = np.diag(np.abs(affinity).sum(axis=1)) - affinity
    eigenvalues, eigenvectors = np.linalg.eigh(laplacian)
    k = int(np.argmax(np.diff(eigenvalues[: max_speakers + 1]))) + 1
    labels = np.zeros(n, dtype=np.int64)
    if k > 1:
        labels = KMeans(n_clusters=k, random_state=0, n_init=10).fit_predict(eigenvectors[:, :k])
    ids, counts = np.unique(labels, return_counts=True)
    large = ids[counts >= min_cluster_size]
    if len(large) == 0:
        return np.zeros(n, dtype=np.int64)
    centroids = np.stack([emb[labels == c].mean(0) for c in large])
    small = ~np.isin(labels, large)
    labels[small] = large[np.argmax(emb[small] @ centroids.T, axis=1)]
    while len(ids := np.unique(labels)) > 1:
        centroids = np.stack([emb[labels == c].mean(0) for c in ids])
        centroids /= np.linalg.norm(centroids, axis=1, keepdims=True)
        similarity = np.triu(centroids @ centroids.T, 1)
        a, b = np.unravel_index(np.argmax(similarity), similarity.shape)
        if similarity[a, b] < merge_cos:
            break
        labels[labels == ids[b]] = ids[a]
    return labels


def alternatives(args, files, recordings) -> None:
    """The other clustering methods issue 10 names, on the same first pass, each replacing the second pass or
    changing pyannote's clustering: senko's spectral clustering of 1.5 s sub-segments, pyannote clustering more
    embeddings (min active ratio 0.1 instead of 0.2: speakers with 1 s alone in a window) and its constrained
    assignment. VBx is not among them: it needs a PLDA trained for these embeddings, and none ships (the offline
    folder's PLDA is an identity placeholder)."""
    import numpy as np
    import yaml
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.pyannote_pipeline import BoundedEmbeddings
    from speakerscribe.diarization.recluster import recluster
    from speakerscribe.diarization.shared_frames import FRAME_HOP
    from speakerscribe.records import SAMPLE_RATE, SpeakerTurn
    from speakerscribe.speakers import pieces as turn_pieces

    convs, fest = festival_guard(args)
    deployed = yaml.safe_load((args.models / "diarization" / "config.yaml").read_text())["params"]["clustering"]
    pipeline = cached(Pipeline.from_pretrained(args.models / "diarization"), True)
    pipeline.clustering.threshold = deployed["threshold"]
    first = first_pass_outputs(pipeline, [*files, *fest.values()])
    pool = pipeline._embedding.model_.campplus.pool
    frame_s = FRAME_HOP / SAMPLE_RATE

    def deployed_second(uri, exc, ovl):
        return recluster(exc, ovl, pipeline.frames_of(uri), pool, frame_s)

    def spectral(pval, min_cluster_size, merge_cos):
        def relabel(uri, exc, ovl):
            subs = subsegments(exc)
            labels = spectral_labels(
                turn_pieces.frame_embeddings(pool, pipeline.frames_of(uri), subs, frame_s), pval, min_cluster_size,
                merge_cos,
            )  # fmt: skip
            centres = np.array([(s.start + s.end) / 2 for s in subs])
            pieces = turn_pieces.cut(exc, 0.3)  # each 0.3 s takes the label of the nearest sub-segment
            new = [f"SPEAKER_{labels[np.argmin(np.abs(centres - (p.start + p.end) / 2))]:02d}" for p in pieces]
            exclusive = turn_pieces.join([SpeakerTurn(p.start, p.end, label) for p, label in zip(pieces, new)])
            return exclusive, turn_pieces.relabel_overlapping(ovl, pieces, new, {})

        return relabel

    print(f"\nOther clustering methods on the deployed first pass (centroid {deployed['threshold']}):")
    print(f"| clustering {TABLE_HEAD}")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| deployed: pyannote + second pass | {relabelled_scores(first, recordings, convs, deployed_second)} |")
    for pval, mcs, merge in itertools.product((0.012, 0.2), (2, 4), (0.875, 0.7, 0.6)):
        row = relabelled_scores(first, recordings, convs, spectral(pval, mcs, merge))
        senko = " (senko's settings)" if (pval, mcs, merge) == (0.012, 4, 0.875) else ""
        print(f"| spectral p {pval}, min cluster {mcs}, merge cos {merge}{senko} | {row} |", flush=True)
    original = BoundedEmbeddings.filter_embeddings
    try:
        BoundedEmbeddings.filter_embeddings = lambda self, emb, segmentations=None, min_active_ratio=0.2: original(
            self, emb, segmentations=segmentations, min_active_ratio=0.1
        )
        other = first_pass_outputs(pipeline, [*files, *fest.values()])
        row = relabelled_scores(other, recordings, convs, deployed_second)
        print(f"| pyannote clustering min active ratio 0.1 + second pass | {row} |")
    finally:
        BoundedEmbeddings.filter_embeddings = original
    pipeline.clustering.constrained_assignment = True
    other = first_pass_outputs(pipeline, [*files, *fest.values()])
    row = relabelled_scores(other, recordings, convs, deployed_second)
    print(f"| pyannote constrained assignment + second pass | {row} |")
    pipeline.clustering.constrained_assignment = False
    hidden_people(pipeline, recordings, first, deployed_second)


def hidden_people(pipeline, recordings, first, second) -> None:
    """Why people who speak little are not found: on the deployed output, every 2 s piece of the exclusive turns
    spoken alone (for at least half its length) by one reference person, and its cosine similarity to the centroid of
    the other pieces of its cluster; pieces of the person most of the cluster's pieces belong to (its owner) against
    pieces of anyone else."""
    import numpy as np

    from speakerscribe.diarization.shared_frames import FRAME_HOP
    from speakerscribe.records import SAMPLE_RATE
    from speakerscribe.speakers import pieces as turn_pieces
    from speakerscribe_dev.naming import exclusive_spans

    pool = pipeline._embedding.model_.campplus.pool
    own, others = [], []
    for rec in recordings:
        exc, ovl = first[rec.uri]
        if not exc:
            continue
        exc, _ = second(rec.uri, exc, ovl)
        alone = [(a, b, p) for p in rec.speakers for a, b in exclusive_spans(rec.turns, p)]
        pieces = [p for p in turn_pieces.cut(exc, 2.0) if p.end - p.start >= 0.5]
        emb = turn_pieces.frame_embeddings(pool, pipeline.frames_of(rec.uri), pieces, FRAME_HOP / SAMPLE_RATE)

        def person(p, alone=alone):
            share = {}
            for a, b, who in alone:
                share[who] = share.get(who, 0.0) + max(0.0, min(b, p.end) - max(a, p.start))
            best = max(share, key=share.get) if share else None
            return best if best is not None and share[best] >= 0.5 * (p.end - p.start) else None

        people = [person(p) for p in pieces]
        for label in {p.speaker for p in pieces}:
            rows = [i for i, p in enumerate(pieces) if p.speaker == label]
            named = [people[i] for i in rows if people[i] is not None]
            if len(rows) < 2 or not named:
                continue
            owner = max(set(named), key=named.count)
            for i in rows:
                if people[i] is None:
                    continue
                rest = emb[[j for j in rows if j != i]].mean(0)
                value = float(emb[i] @ rest / np.linalg.norm(rest))
                (own if people[i] == owner else others).append((round(value, 2), rec.uri, people[i]))
    values = np.array([v for v, _, _ in own])
    print(
        f"\nPieces (2 s) of a cluster's own person: {len(own)}, similarity to the rest of their cluster: lowest "
        f"{values.min():.2f}, 10th percentile {np.percentile(values, 10):.2f}, median {np.median(values):.2f}"
    )
    print(f"Pieces of other people hidden in a cluster: {sorted(others)}")


if __name__ == "__main__":
    raise SystemExit(main())
