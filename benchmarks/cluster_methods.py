"""Which clustering separates the people, given what the segmentation model and CAM++ already computed (issue 26).

    .venv/bin/python benchmarks/cluster_methods.py --group calibration
    .venv/bin/python benchmarks/cluster_methods.py --group held-out --ami-splits test

For every conversation of one group of the real-voice set (both qualities) and the AMI excerpts of the given splits,
the service's diarizer runs once (no count, no second pass), and the embeddings its clustering receives (one per
10 s window and local speaker, pyannote's selection) are kept with the person each one heard most: the reference
turns at the segmentation frames where that local speaker is active. Each method then clusters the same unit
vectors, and the score is the share of embeddings in a cluster matched to their person (Hungarian matching of
clusters to people): not a DER (no reconstruction, no assignment of the skipped embeddings), but the step the
clusterings differ in, and nothing else moves.

Methods: ``service`` (the constrained clustering as the service runs it, without a count: its count is its own),
``service+count`` (the same, told the true count), both also refined (``+refine``: embeddings moved to their
nearest cluster centre until none moves, the clusters' number kept), and, told the true count, scipy's centroid
linkage (pyannote's method), average linkage on cosine distance, Ward linkage, k-means (the service's,
``speakerscribe/diarization/kmeans.py``, and scikit-learn's, one seed) and spectral clustering on clipped cosine
affinities. ``oracle`` assigns each embedding to the nearest of the true people's centroids: how far
apart the people sit, not a bound (where one person holds most of the speech a clustering can place more).
``exact``: the share of files whose ``service`` count is the true one.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def embedding_people(captured: dict, reference: list[tuple[float, float, str]]) -> np.ndarray:
    """Index (into the sorted reference speakers) of the person each kept embedding heard most."""
    people = sorted({t[2] for t in reference})
    start, duration, step = captured["window"]
    activity = captured["activity"]  # (embeddings, frames) of each embedding's own local speaker
    frames = activity.shape[1]
    heard = np.zeros((len(activity), len(people)))
    for i, (chunk, active) in enumerate(zip(captured["chunks"], activity)):
        times = (start + chunk * step + (np.arange(frames) + 0.5) * duration / frames)[active > 0.5]
        for k, person in enumerate(people):
            inside = np.zeros(times.shape, dtype=bool)
            for a, b, who in reference:
                if who == person:
                    inside |= (times >= a) & (times < b)
            heard[i, k] = inside.sum()
    return heard.argmax(1)


def matched_share(labels: np.ndarray, people: np.ndarray) -> float:
    from scipy.optimize import linear_sum_assignment

    table = np.zeros((int(labels.max()) + 1, int(people.max()) + 1))
    np.add.at(table, (labels, people), 1)
    rows, cols = linear_sum_assignment(-table)
    return float(table[rows, cols].sum() / len(people))


def nearest_centre(unit: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Each vector's nearest centre (mean of a label's vectors, by dot product) among ``labels``' 0..max."""
    centres = np.stack([unit[labels == k].mean(0) for k in range(int(labels.max()) + 1)])
    return np.argmax(unit @ centres.T, axis=1)


def methods(options, n_people: int) -> dict:
    """name -> function(unit vectors, window of each, people) -> labels."""
    from scipy.cluster.hierarchy import fcluster, linkage
    from sklearn.cluster import KMeans, SpectralClustering

    from speakerscribe.diarization.constrained_clustering import constrained_clusters
    from speakerscribe.diarization.kmeans import kmeans

    def cut(method: str, metric: str = "euclidean"):
        return lambda u, c, p: fcluster(linkage(u, method=method, metric=metric), n_people, "maxclust") - 1

    def service(count: bool):
        def run(u, c, p):
            opts = options if not count else replace(options, near_share=0.0)
            labels = constrained_clusters(u, c, opts, num=n_people if count else None)
            return labels if labels is not None else _plain(u, options.threshold)

        return run

    def refined(base):
        """``base``'s clusters, then embeddings moved to their nearest cluster centre until none moves (spherical
        k-means started from them, the number of clusters kept)."""

        def run(u, c, p):
            labels = np.unique(base(u, c, p), return_inverse=True)[1]
            for _ in range(20):
                moved = nearest_centre(u, labels)
                if (moved == labels).all():
                    break
                labels = np.unique(moved, return_inverse=True)[1]
            return labels

        return run

    def oracle(u, c, p):
        return nearest_centre(u, p)

    return {
        "service": service(False),
        "service+count": service(True),
        "service+refine": refined(service(False)),
        "service+count+refine": refined(service(True)),
        "centroid": cut("centroid"),
        "average-cos": cut("average", "cosine"),
        "ward": cut("ward"),
        "kmeans": lambda u, c, p: kmeans(u, n_people),
        "kmeans-sklearn": lambda u, c, p: KMeans(n_people, n_init=10, random_state=0).fit_predict(u),
        "spectral": lambda u, c, p: SpectralClustering(n_people, affinity="precomputed", random_state=0).fit_predict(
            np.clip(u @ u.T, 0.0, None)
        ),
        "oracle": oracle,
    }


def _plain(unit: np.ndarray, threshold: float) -> np.ndarray:
    """pyannote's own answer where the service's constraints are not needed: centroid linkage at the threshold."""
    from scipy.cluster.hierarchy import fcluster, linkage

    return fcluster(linkage(unit, method="centroid", metric="euclidean"), threshold, "distance") - 1


def capture(diarizer, waveform) -> dict | None:
    """The clustering's inputs for one file (None when pyannote clustered nothing)."""
    from speakerscribe.diarization import pyannote_pipeline

    cls = pyannote_pipeline.ConstrainedAgglomerativeClustering
    kept: dict = {}
    original = cls.__call__

    def spy(self, embeddings, segmentations=None, *args, **kwargs):
        chosen, chunks, speakers = self.filter_embeddings(embeddings, segmentations=segmentations)
        data = np.asarray(segmentations.data)
        window = segmentations.sliding_window
        kept.update(
            embeddings=chosen,
            chunks=chunks,
            activity=data[chunks, :, speakers],
            window=(window.start, window.duration, window.step),
            options=self.channel_options(),
        )
        return original(self, embeddings, segmentations, *args, **kwargs)

    cls.__call__ = spy
    try:
        diarizer(waveform)
    finally:
        cls.__call__ = original
    return kept if len(kept.get("embeddings", ())) >= 2 else None


def items(args) -> list[tuple[str, str, Path, list, int]]:
    from speakerscribe_dev import ami, real_voices

    out, taken = [], {}
    for conv in real_voices.load(real_voices.prepare(args.data)):
        cell = f"{conv.quality}-{len(conv.people)}p"
        if conv.split == args.group and taken.get(cell, 0) < args.take:
            taken[cell] = taken.get(cell, 0) + 1
            ref = [(t.start, t.end, t.speaker) for t in conv.turns]
            out.append((cell, conv.uri, conv.wav, ref, len(conv.people)))
    if args.ami_splits:
        for rec in ami.load(ami.prepare(args.ami), tuple(args.ami_splits)):
            ref = [(t.start, t.end, t.speaker) for t in rec.turns]
            out.append(("ami", rec.uri, rec.wav, ref, len(rec.speakers)))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=["calibration", "held-out"], default="calibration")
    parser.add_argument("--ami-splits", nargs="*", default=["train", "development"], help="none: no AMI")
    parser.add_argument("--take", type=int, default=1000, help="conversations per quality and number of people")
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "real_voices")
    parser.add_argument("--ami", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--per-file", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.records import Waveform
    from speakerscribe.runtime import Placement
    from speakerscribe_dev.pyannote_cache import pyannote_file

    diarizer = SpeakerDiarizer.load(
        str(args.models / "diarization"), Placement("cpu", "float32", "sdpa"), recluster=False
    )
    cells: dict = {}
    for cell, uri, wav, reference, n in items(args):
        captured = capture(diarizer, Waveform(pyannote_file(uri, wav)["waveform"][0].numpy()))
        if captured is None:
            continue
        unit = captured["embeddings"] / np.linalg.norm(captured["embeddings"], axis=1, keepdims=True)
        people = embedding_people(captured, reference)
        if len(unit) < n + 2:  # too few embeddings to cluster into n people
            continue
        row = {}
        for name, method in methods(captured["options"], n).items():
            labels = np.asarray(method(unit, captured["chunks"], people))
            row[name] = matched_share(labels, people)
            if name == "service":
                row["exact"] = float(labels.max() + 1 == n)
        cells.setdefault(cell, []).append(row)
        if args.per_file:
            print(uri, " ".join(f"{k} {v:.3f}" for k, v in row.items()), flush=True)
    names = list(next(iter(cells.values()))[0])
    print("| set | files | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for cell, rows in sorted(cells.items()):
        means = [np.mean([r[k] for r in rows]) for k in names]
        print(f"| {cell} | {len(rows)} | " + " | ".join(f"{m:.3f}" for m in means) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
