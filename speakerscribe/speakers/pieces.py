"""Short pieces of speaker turns: cutting turns into pieces, pooling a piece's CAM++ frames, and turning per-piece
labels back into turns.

Two passes label speech piece by piece instead of speaker by speaker: the second clustering pass
(:mod:`speakerscribe.diarization.recluster`) and the naming of known speakers (:mod:`speakerscribe.speakers.names`).
Both cut the
exclusive (one speaker at a time) turns into pieces with :func:`cut`, give each piece a new label, and rebuild the
exclusive turns with :func:`join` and the overlapping ones with :func:`relabel_overlapping`, so both lists keep one
set of labels.
"""

from __future__ import annotations

import numpy as np

from ..records import SpeakerTurn


def cut(turns: tuple[SpeakerTurn, ...] | list[SpeakerTurn], piece_s: float) -> list[SpeakerTurn]:
    """Each turn cut into equal pieces of at most ``piece_s`` seconds, keeping its speaker."""
    out = []
    for t in turns:
        n = max(1, int(np.ceil((t.end - t.start) / piece_s - 1e-9)))
        edges = np.linspace(t.start, t.end, n + 1)
        out.extend(SpeakerTurn(float(a), float(b), t.speaker) for a, b in zip(edges[:-1], edges[1:]))
    return out


def frame_embeddings(pool, frames, pieces: list[SpeakerTurn], frame_s: float, batch: int = 256) -> np.ndarray:
    """(n, D) unit-norm embeddings: ``pool(frames (b, C, L), weights (b, L))`` over each piece's frames of the file's
    ``frames`` (C, F) at ``frame_s`` seconds a frame (see :mod:`speakerscribe.diarization.shared_frames`)."""
    import torch

    if not pieces:
        return np.zeros((0, 1), dtype=np.float32)
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
    emb = np.concatenate(out)
    return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-8)


def join(turns: list[SpeakerTurn]) -> tuple[SpeakerTurn, ...]:
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


def relabel_overlapping(
    turns: tuple[SpeakerTurn, ...], pieces: list[SpeakerTurn], new: list[str], fallback: dict[str, str]
) -> tuple[SpeakerTurn, ...]:
    """The (possibly overlapping) ``turns`` under the pieces' new labels. ``pieces`` are the exclusive turns cut by
    :func:`cut` (each with its old label) and ``new`` their new labels. Each turn is cut where the pieces of its old
    label change their new label; parts outside those pieces take the nearest such piece's label; a turn whose old
    label has no piece takes ``fallback[old]`` (or keeps its label). Pieces of one label are disjoint and sorted, so
    the ones inside a turn are found by binary search."""
    by_old: dict[str, list[tuple[float, float, str]]] = {}
    for p, label in zip(pieces, new):
        by_old.setdefault(p.speaker, []).append((p.start, p.end, label))
    arrays = {
        old: (np.array([m[0] for m in mine]), np.array([m[1] for m in mine]), [m[2] for m in mine])
        for old, mine in by_old.items()
    }
    out = []
    for t in turns:
        if t.speaker not in arrays:
            out.append(SpeakerTurn(t.start, t.end, fallback.get(t.speaker, t.speaker)))
            continue
        starts, ends, labels = arrays[t.speaker]
        lo = int(np.searchsorted(ends, t.start, side="right"))  # first piece ending after the turn starts
        hi = int(np.searchsorted(starts, t.end, side="left"))  # first piece starting at or after its end
        if lo >= hi:  # no piece of this label in the turn: the nearest one's label (earlier on a tie)
            before = t.start - ends[lo - 1] if lo > 0 else np.inf
            after = starts[lo] - t.end if lo < len(labels) else np.inf
            out.append(SpeakerTurn(t.start, t.end, labels[lo - 1] if before <= after else labels[lo]))
            continue
        # extend the first and last parts to the turn's edges; gaps between parts go to the part before
        cuts = [t.start, *starts[lo + 1 : hi].tolist(), t.end]
        for label, a, b in zip(labels[lo:hi], cuts[:-1], cuts[1:]):
            if b > a:
                out.append(SpeakerTurn(a, b, label))
    return join(out)
