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

from .records import SpeakerTurn


@dataclass(frozen=True)
class ReclusterOptions:
    piece_s: float = 2.0
    min_piece_s: float = 0.5
    threshold: float = 0.8
    min_share: float = 0.15
    min_speaker_s: float = 30.0
    max_pieces: int = 3000
    batch: int = 256


def _pieces(turns: tuple[SpeakerTurn, ...], piece_s: float) -> list[SpeakerTurn]:
    """Each turn cut into equal pieces of at most ``piece_s`` seconds, keeping its (first-pass) speaker."""
    out = []
    for t in turns:
        n = max(1, int(np.ceil((t.end - t.start) / piece_s - 1e-9)))
        edges = np.linspace(t.start, t.end, n + 1)
        out.extend(SpeakerTurn(float(a), float(b), t.speaker) for a, b in zip(edges[:-1], edges[1:]))
    return out


def piece_embeddings(pool, frames, pieces: list[SpeakerTurn], frame_s: float, batch: int) -> np.ndarray:
    """(n, D) unit-norm embeddings: ``pool(frames (b, C, L), weights (b, L))`` over each piece's frames."""
    import torch

    n_frames = frames.shape[-1]
    first = np.array([int(p.start / frame_s) for p in pieces])
    last = np.maximum(first + 2, np.array([int(np.ceil(p.end / frame_s)) for p in pieces]))
    first, last = np.clip(first, 0, n_frames - 2), np.clip(last, 2, n_frames)
    length = int((last - first).max())
    out = []
    for a in range(0, len(pieces), batch):
        f0, f1 = first[a : a + batch], last[a : a + batch]
        index = np.minimum(f0[:, None] + np.arange(length)[None, :], n_frames - 1)  # (b, L)
        weights = torch.from_numpy(((f0[:, None] + np.arange(length)[None, :]) < f1[:, None]).astype(np.float32))
        with torch.inference_mode():
            chunk = frames[:, torch.from_numpy(index).to(frames.device)].permute(1, 0, 2).float()  # (b, C, L)
            out.append(pool(chunk, weights.to(frames.device)).float().cpu().numpy())
    emb = np.concatenate(out) if out else np.zeros((0, 1), dtype=np.float32)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-8)


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
    pieces = _pieces(exclusive, piece_s)
    long_enough = np.array([p.end - p.start >= opts.min_piece_s for p in pieces], dtype=bool)
    if long_enough.sum() < 2:
        return exclusive, turns
    chosen = [p for p, ok in zip(pieces, long_enough) if ok]
    emb = piece_embeddings(pool, frames, chosen, frame_s, opts.batch)
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
    name = {k: order.get(k) for k in set(piece_label)}
    new_exclusive = _join([SpeakerTurn(p.start, p.end, name[k] or p.speaker) for p, k in zip(pieces, piece_label)])
    return new_exclusive, _relabel_overlapping(turns, pieces, piece_label, name, fallback)


def _relabel_overlapping(turns, pieces, piece_label, name, fallback) -> tuple[SpeakerTurn, ...]:
    """Each (possibly overlapping) turn is cut where the exclusive pieces of its old label change their new label;
    parts outside those pieces take the nearest such piece's label. Pieces of one label are disjoint and sorted,
    so the ones inside a turn are found by binary search."""
    by_old: dict[str, list[tuple[float, float, int]]] = {}
    for p, k in zip(pieces, piece_label):
        by_old.setdefault(p.speaker, []).append((p.start, p.end, k))
    arrays = {
        old: (np.array([m[0] for m in mine]), np.array([m[1] for m in mine]), [m[2] for m in mine])
        for old, mine in by_old.items()
    }
    out = []
    for t in turns:
        if t.speaker not in arrays:
            k = fallback.get(t.speaker, -1)
            out.append(SpeakerTurn(t.start, t.end, name.get(k) or t.speaker))
            continue
        starts, ends, labels = arrays[t.speaker]
        lo = int(np.searchsorted(ends, t.start, side="right"))  # first piece ending after the turn starts
        hi = int(np.searchsorted(starts, t.end, side="left"))  # first piece starting at or after its end
        if lo >= hi:  # no exclusive piece of this label in the turn: the nearest one's label (earlier on a tie)
            before = t.start - ends[lo - 1] if lo > 0 else np.inf
            after = starts[lo] - t.end if lo < len(labels) else np.inf
            k = labels[lo - 1] if before <= after else labels[lo]
            out.append(SpeakerTurn(t.start, t.end, name.get(k) or t.speaker))
            continue
        # extend the first and last parts to the turn's edges; gaps between parts go to the part before
        cuts = [t.start, *starts[lo + 1 : hi].tolist(), t.end]
        for k, a, b in zip(labels[lo:hi], cuts[:-1], cuts[1:]):
            if b > a:
                out.append(SpeakerTurn(a, b, name.get(k) or t.speaker))
    return _join(out)


def _join(turns: list[SpeakerTurn]) -> tuple[SpeakerTurn, ...]:
    """Sorted, with touching or overlapping turns of one speaker joined."""
    out: list[SpeakerTurn] = []
    last_of: dict[str, int] = {}
    for t in sorted(turns, key=lambda t: (t.start, t.end, t.speaker)):
        i = last_of.get(t.speaker)
        if i is not None and t.start <= out[i].end + 1e-6:
            out[i] = SpeakerTurn(out[i].start, max(out[i].end, t.end), t.speaker)
            continue
        last_of[t.speaker] = len(out)
        out.append(t)
    return tuple(out)
