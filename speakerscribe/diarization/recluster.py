"""Second-pass speaker clustering over short pieces of the diarized turns.

pyannote's pipeline clusters one embedding per (10 s window, local speaker), where the local speakers come from the
segmentation model. When that model gives two similar voices the same local speaker inside its windows, their
speech is pooled into one embedding and no clustering threshold can separate them again (two male voices in the
festival conversations; people of the same gender on far-field meeting audio).

This pass embeds short pieces of the exclusive (one speaker at a time) turns instead: every turn is cut into pieces
of about ``piece_s`` seconds, each piece is pooled from the CAM++ frames already computed for the file (see
:mod:`.shared_frames`; no extra network pass), and the pieces are clustered again (centroid linkage on unit vectors,
distance ``threshold``). A cluster holding less than ``min_share`` of the speech (and under ``min_speaker_s``
seconds) is folded into the nearest larger one. Pieces shorter than ``min_piece_s`` are too short to embed: they
take the new label most of their turn's old label went to. Overlapping turns are relabelled the same way, piece by
piece along their old label, so ``turns`` and ``exclusive`` keep one set of labels.

Calibrated on AMI train + development and the festival conversations (``benchmarks/calibrate_diarization.py``,
README "Accuracy"). Cost: one pooling per piece and a linkage over at most ``max_pieces`` pieces (pieces grow on
long audio to stay under it), a few ms to a second on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..records import SpeakerTurn
from ..speakers import pieces as turn_pieces


@dataclass(frozen=True)
class ReclusterOptions:
    piece_s: float = 2.0
    min_piece_s: float = 0.5
    threshold: float = 0.8
    min_share: float = 0.15
    min_speaker_s: float = 30.0
    max_pieces: int = 3000
    batch: int = 256


def cluster_pieces(emb: np.ndarray, seconds: np.ndarray, opts: ReclusterOptions, total: float) -> np.ndarray:
    """Cluster index per piece; clusters under ``min_share`` of ``total`` seconds (and under ``min_speaker_s``)
    are folded into the nearest large one; when none is large, everything is one cluster."""
    from scipy.cluster.hierarchy import fcluster, linkage

    if len(emb) < 2:
        return np.zeros(len(emb), dtype=np.int64)
    labels = fcluster(linkage(emb, method="centroid", metric="euclidean"), opts.threshold, criterion="distance")
    ids = np.unique(labels)
    time = np.array([seconds[labels == c].sum() for c in ids])
    large = (time >= opts.min_share * total) | (time >= opts.min_speaker_s)
    if not large.any():
        return np.zeros(len(emb), dtype=np.int64)
    centroids = np.stack([emb[labels == c].mean(0) for c in ids[large]])
    small = ~np.isin(labels, ids[large])
    nearest = ids[large][np.argmax(emb[small] @ centroids.T, axis=1)] if small.any() else np.zeros(0, np.int64)
    labels = labels.copy()
    labels[small] = nearest
    return np.searchsorted(ids[large], labels)


def recluster(
    exclusive: tuple[SpeakerTurn, ...],
    turns: tuple[SpeakerTurn, ...],
    frames,
    pool,
    frame_s: float,
    opts: ReclusterOptions = ReclusterOptions(),
) -> tuple[tuple[SpeakerTurn, ...], tuple[SpeakerTurn, ...]]:
    """New labels for (exclusive, turns); unchanged when there is too little speech to cluster."""
    speech = sum(t.end - t.start for t in exclusive)
    piece_s = max(opts.piece_s, speech / opts.max_pieces)
    pieces = turn_pieces.cut(exclusive, piece_s)
    long_enough = np.array([p.end - p.start >= opts.min_piece_s for p in pieces], dtype=bool)
    if long_enough.sum() < 2:
        return exclusive, turns
    chosen = [p for p, ok in zip(pieces, long_enough) if ok]
    emb = turn_pieces.frame_embeddings(pool, frames, chosen, frame_s, opts.batch)
    seconds = np.array([p.end - p.start for p in chosen])
    # split only: each first-pass speaker is clustered on its own, so speakers pyannote told apart stay apart
    cluster = np.zeros(len(chosen), dtype=np.int64)
    next_id = 0
    for old in sorted({p.speaker for p in chosen}):
        rows = np.flatnonzero([p.speaker == old for p in chosen])
        sub = cluster_pieces(emb[rows], seconds[rows], opts, seconds.sum())
        cluster[rows] = next_id + sub
        next_id += int(sub.max()) + 1
    # a label per piece: its cluster, or for short pieces the cluster most of its old label's time went to
    votes: dict[str, dict[int, float]] = {}
    for p, c in zip(chosen, cluster):
        votes.setdefault(p.speaker, {})
        votes[p.speaker][int(c)] = votes[p.speaker].get(int(c), 0.0) + p.end - p.start
    fallback = {old: max(v, key=v.get) for old, v in votes.items()}
    it = iter(cluster.tolist())
    piece_label = [next(it) if ok else fallback.get(p.speaker, -1) for p, ok in zip(pieces, long_enough)]
    # name clusters by first appearance, as pyannote does
    order: dict[int, str] = {}
    for k in piece_label:
        if k >= 0 and k not in order:
            order[k] = f"SPEAKER_{len(order):02d}"
    new = [order.get(k) or p.speaker for p, k in zip(pieces, piece_label)]
    new_exclusive = turn_pieces.join([SpeakerTurn(p.start, p.end, label) for p, label in zip(pieces, new)])
    moved = {old: order[k] for old, k in fallback.items() if k in order}
    return new_exclusive, turn_pieces.relabel_overlapping(turns, pieces, new, moved)
