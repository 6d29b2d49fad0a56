"""Agglomerative clustering that never merges two voices the segmentation model heard at once (issue 26).

pyannote clusters one embedding per (10 s window, local speaker). When the segmentation model hears two local
speakers in the same window, each with seconds of clean speech, they are two people, however close their
embeddings are (two women on a telephone line are closer than the CAM++ merge threshold). Here that evidence becomes
a cannot-link constraint: centroid linkage on unit vectors, as pyannote's ``AgglomerativeClustering`` with
``method: centroid``, except that two clusters holding at least ``min_links`` such pairs are never merged.

Guard against the segmentation model splitting one person inside a window: a pair only links when its two
embeddings are at least ``split_distance`` apart (one person's two halves are near-identical), and one window is
not enough evidence (``min_links``).

When the constraints apply (``near_share``): only when the distance rule itself would merge the voices heard at
once, that is when at least ``near_share`` of the pairs are closer than the threshold. On a telephone line every
voice is compressed towards the others (two people heard together sit 0.5-0.9 apart in CAM++ space), and the
constraints are what keeps them apart; on wideband audio the same pairs sit 0.8-1.45 apart, the threshold already
separates people, and the pairs that do fall under it are mostly a local speaker that mixes two voices, which the
constraints would turn into an extra speaker. Then plain centroid linkage runs (the function returns None).
Individual pairs can also sit beyond the threshold while the centroids of the two voices do not (centroids of unit
vectors are shorter than one): ``merged_share`` then applies the constraints when plain linkage puts that share of
the pairs heard at once into one cluster, with ``small_share``: without a count, a cluster of under that share of
the embeddings folds into its nearest cluster, allowed or not. On telephone audio the caller uses that wider gate
with the evidence as above; on wideband audio, where with the same evidence it turned one person into several (the
mixed local speakers again), only with stricter evidence: a pair links only when its embeddings are much further
apart, and more of them are needed
(:class:`speakerscribe.diarization.pyannote_pipeline.ConstrainedAgglomerativeClustering`).

A speaker count (``num`` / ``min`` / ``max``) chooses among the clusterings the evidence allows: above the count,
the smallest clusters are absorbed first, then the closest allowed pairs merge; pairs the evidence forbids merge only
when nothing else can reach the count (fewest links first). Below it, the last merges are undone, but never one
closer than ``split_floor``: a count asking for more people than the voices heard is not met by cutting one voice in
two (the diarizer keeps the result without a count when that already meets it, see
:meth:`speakerscribe.diarization.diarizer.SpeakerDiarizer.__call__`).

Told an exact count (``num``), the agglomeration can still miss it in two ways that k-means told the count does not
(:mod:`speakerscribe.diarization.kmeans`): it reaches the count by keeping a stray cluster of a few embeddings while
two people sit merged (centroid linkage merged them early, closer than ``split_floor``), or, on a telephone line,
where different people sit 0.4-0.7 apart, the floor refuses every undo and the answer stays short of the count. In
those cases (``count_kmeans``, ``count_kmeans_short``) k-means' partition replaces it. The service uses the second
on telephone audio only: on wideband audio the floor is what keeps a meeting's main speaker whole when the count
names people who hardly speak (AMI: k-means cuts the main speaker, 0.58 of the embeddings placed against 0.92); the
first changed no calibration conversation and one AMI excerpt for the worse, and is kept for measurement only
(``benchmarks/sweep_constraints.py``, ``km``).

Pure numpy; the work is bounded: above ``max_items`` embeddings, scipy's centroid linkage first groups them into
``max_items`` tight groups, which are then clustered with their constraints summed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from speakerscribe.diarization.kmeans import kmeans


@dataclass(frozen=True)
class ConstraintOptions:
    threshold: float = 0.95  # centroid distance (unit vectors) above which clusters stay apart
    min_links: int = 2  # pairs heard at once before two clusters may never merge
    split_distance: float = 0.5  # two local speakers of one window closer than this are one person, split
    min_items: int = 1  # clusters smaller than this are absorbed into the nearest allowed larger one
    split_floor: float = 0.8  # to reach a count, merges closer than this are never undone (one voice throughout)
    near_share: float = 0.15  # constraints apply when at least this share of the pairs heard at once are closer than
    # the threshold (the distance rule would merge them); otherwise plain centroid linkage
    merged_share: float = 0.0  # or when plain linkage puts at least this share of the pairs heard at
    # once into one cluster (0: not used)
    small_share: float = 0.0  # without a count, clusters under this share of the embeddings fold into the nearest
    # cluster even against the evidence (a few mixed or overlapped local speakers are not a person); 0: never
    tiny_share: float = 0.1  # to reach a count, clusters under this share of the embeddings are absorbed first
    count_kmeans: bool = False  # with a count (``num``), k-means told it replaces an answer that reaches it only by
    # counting a cluster under ``tiny_share`` as a person
    count_kmeans_short: bool = False  # ... and an answer short of it (every merge left to undo is closer than
    # ``split_floor``: on a telephone line different people sit that close)
    max_items: int = 800  # above this, scipy pre-groups the embeddings (bounded time and memory)


def cannot_links(embeddings: np.ndarray, chunks: np.ndarray, split_distance: float) -> np.ndarray:
    """(m, 2) rows i < j: two embeddings from the same window, far enough apart to be two people."""
    order = np.argsort(chunks, kind="stable")
    pairs = []
    for offset in (1, 2, 3, 4):  # a window holds a handful of local speakers: pairs are near in sorted order
        i, j = order[:-offset], order[offset:]
        same = chunks[i] == chunks[j]
        pairs.append(np.stack([i[same], j[same]], axis=1))
    pairs = np.concatenate(pairs)
    far = np.linalg.norm(embeddings[pairs[:, 0]] - embeddings[pairs[:, 1]], axis=1) >= split_distance
    return np.sort(pairs[far], axis=1)


def _distances(centroids: np.ndarray) -> np.ndarray:
    sq = (centroids**2).sum(1)
    return np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2 * centroids @ centroids.T, 0.0))


def _pregroup(embeddings: np.ndarray, limit: int) -> np.ndarray:
    from scipy.cluster.hierarchy import fcluster, linkage

    return fcluster(linkage(embeddings, method="centroid", metric="euclidean"), limit, criterion="maxclust") - 1


class _Agglomeration:
    """Clusters as sums and counts of unit vectors, the centroid distance matrix and the link counts between them."""

    def __init__(self, embeddings: np.ndarray, links: np.ndarray, groups: np.ndarray, min_links: int):
        k = int(groups.max()) + 1
        self.sums = np.zeros((k, embeddings.shape[1]))
        np.add.at(self.sums, groups, embeddings)
        self.counts = np.bincount(groups, minlength=k).astype(np.float64)
        self.links = np.zeros((k, k), dtype=np.int64)
        np.add.at(self.links, (groups[links[:, 0]], groups[links[:, 1]]), 1)
        self.links = self.links + self.links.T
        np.fill_diagonal(self.links, 0)
        self.min_links = min_links
        self.alive = np.ones(k, dtype=bool)
        self.parent = np.arange(k)
        self.distance = _distances(self.sums / self.counts[:, None])
        np.fill_diagonal(self.distance, np.inf)

    @property
    def size(self) -> int:
        return int(self.alive.sum())

    def _pairs(self, allowed_only: bool) -> np.ndarray:
        d = self.distance.copy()
        d[~self.alive, :] = np.inf
        d[:, ~self.alive] = np.inf
        if allowed_only:
            d[self.links >= self.min_links] = np.inf
        return d

    def closest(self) -> tuple[int, int, float]:
        """The closest pair the evidence allows to merge, and its distance (inf when none)."""
        d = self._pairs(True)
        a, b = np.unravel_index(int(np.argmin(d)), d.shape)
        return int(a), int(b), float(d[a, b])

    def weakest(self) -> tuple[int, int]:
        """The pair with the fewest links, closest first: the merge the evidence forbids least."""
        d = self._pairs(False)
        cost = np.where(np.isfinite(d), self.links * 1e3 + d, np.inf)
        a, b = np.unravel_index(int(np.argmin(cost)), cost.shape)
        return int(a), int(b)

    def merge(self, a: int, b: int) -> None:
        self.sums[a] += self.sums[b]
        self.counts[a] += self.counts[b]
        self.links[a] += self.links[b]
        self.links[:, a] = self.links[a]
        self.links[a, a] = 0
        self.alive[b] = False
        self.parent[self.parent == b] = a
        centroid = self.sums[a] / self.counts[a]
        row = np.linalg.norm(self.sums / self.counts[:, None] - centroid, axis=1)
        row[a] = np.inf
        self.distance[a], self.distance[:, a] = row, row
        self.distance[b, :] = np.inf
        self.distance[:, b] = np.inf

    def absorb_smallest(self, min_items: int) -> bool:
        """Fold the smallest cluster under ``min_items`` into its closest allowed neighbour; False when none."""
        small = np.flatnonzero(self.alive & (self.counts < min_items))
        if len(small) == 0 or self.size < 2:
            return False
        allowed = self._pairs(True)
        for s in small[np.argsort(self.counts[small])]:
            d = allowed[s]
            target = int(np.argmin(d))
            if np.isfinite(d[target]):
                self.merge(target, s)
                return True
        return False

    def fold_smallest(self, below: float) -> bool:
        """Fold the smallest cluster of fewer than ``below`` items into its closest cluster, allowed or not; False
        when none is that small."""
        alive = np.flatnonzero(self.alive)
        smallest = alive[int(np.argmin(self.counts[alive]))]
        if self.counts[smallest] >= below:
            return False
        d = self._pairs(False)[smallest]
        self.merge(int(np.argmin(d)), int(smallest))
        return True

    def labels(self, groups: np.ndarray) -> np.ndarray:
        _, dense = np.unique(self.parent[groups], return_inverse=True)
        return dense


def _needed(unit: np.ndarray, links: np.ndarray, groups: np.ndarray, options: ConstraintOptions) -> bool:
    """Whether the distance rule alone would merge voices heard at once: at least ``near_share`` of the pairs sit
    closer than the threshold, or (``merged_share`` > 0) plain linkage puts at least that share of them in one
    cluster."""
    if options.near_share <= 0:
        return True
    if len(links) == 0:
        return False
    if (np.linalg.norm(unit[links[:, 0]] - unit[links[:, 1]], axis=1) < options.threshold).mean() >= options.near_share:
        return True
    if options.merged_share <= 0:
        return False
    plain = _agglomerate(_Agglomeration(unit, links, groups, np.iinfo(np.int64).max), options.threshold, [])
    labels = plain.labels(groups)
    return bool((labels[links[:, 0]] == labels[links[:, 1]]).mean() >= options.merged_share)


def _agglomerate(state: _Agglomeration, threshold: float, history: list) -> _Agglomeration:
    """Merge the closest allowed pair while it is within ``threshold``; each merge is appended to ``history``."""
    while state.size > 1:
        a, b, d = state.closest()
        if not np.isfinite(d) or d > threshold:
            break
        history.append((a, b, d))
        state.merge(a, b)
    return state


def constrained_clusters(
    embeddings: np.ndarray,
    chunks: np.ndarray,
    options: ConstraintOptions = ConstraintOptions(),
    num: int | None = None,
    lo: int = 1,
    hi: int | None = None,
) -> np.ndarray | None:
    """0-based cluster per embedding (rows of ``embeddings``; ``chunks[i]`` is the window row ``i`` came from).
    ``num`` or the range [``lo``, ``hi``] is the speaker count asked for. None when the constraints are not needed
    (``near_share``): the caller clusters as without them."""
    n = len(embeddings)
    if n < 2:
        return np.zeros(n, dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        unit = embeddings / np.linalg.norm(embeddings, axis=1, keepdims=True)
    unit = np.nan_to_num(unit)
    if num is not None:
        lo = hi = num
    hi = n if hi is None else hi
    lo = max(1, min(lo, n))
    groups = _pregroup(unit, options.max_items) if n > options.max_items else np.arange(n)
    links = cannot_links(unit, chunks, options.split_distance)
    if not _needed(unit, links, groups, options):
        return None
    history = []  # merges in order, to go back when the count asks for more clusters
    state = _agglomerate(_Agglomeration(unit, links, groups, options.min_links), options.threshold, history)
    if state.size < lo:  # replay fewer merges: undo the last ones, none closer than the floor
        undo = 0
        while undo < lo - state.size and history[len(history) - 1 - undo][2] >= options.split_floor:
            undo += 1
        state = _Agglomeration(unit, links, groups, options.min_links)
        for a, b, _ in history[: len(history) - undo]:
            state.merge(a, b)
        if num is not None and options.count_kmeans_short and state.size < num:
            return kmeans(unit, num)
        return state.labels(groups)
    while state.size > lo and state.absorb_smallest(options.min_items):
        pass
    if num is None and options.small_share > 0:
        while state.size > max(lo, 1) and state.fold_smallest(options.small_share * n):
            pass
    tiny = options.tiny_share * n
    while state.size > hi:
        if not state.absorb_smallest(tiny):
            a, b, d = state.closest()
            if not np.isfinite(d):
                a, b = state.weakest()
            state.merge(a, b)
    labels = state.labels(groups)
    if num is not None and options.count_kmeans and state.size == num > 1:
        if np.bincount(labels).min() < options.tiny_share * n:
            return kmeans(unit, num)
    return labels
