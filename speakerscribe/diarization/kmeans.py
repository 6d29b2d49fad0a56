"""k-means on speaker embeddings: unit vectors into exactly ``k`` groups (issue 26).

Used where a speaker count is given and the agglomeration stops short of it on a telephone line
(:func:`speakerscribe.diarization.constrained_clustering.constrained_clusters`): told the count, k-means places
0.88-0.94 of four-person calls' embeddings with their person against the agglomeration's 0.75-0.85
(``benchmarks/cluster_methods.py``).

Lloyd's k-means on the unit vectors (squared Euclidean distance to each group's mean, as scikit-learn's ``KMeans``
on the same vectors). Pure numpy and deterministic: a fixed seed, k-means++ starts, the best of ``restarts`` by the
within-group sum of squares; bounded: ``restarts`` x ``iterations`` passes of one (n, k) product.
"""

from __future__ import annotations

import numpy as np


def _squared(unit: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """(n, k) squared distances of unit vectors to the centres."""
    return np.maximum(1.0 - 2.0 * unit @ centres.T + (centres**2).sum(1)[None, :], 0.0)


def _starts(unit: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """k-means++: each next centre drawn in proportion to its squared distance to the nearest chosen one."""
    centres = [unit[rng.integers(len(unit))]]
    nearest = _squared(unit, centres[0][None, :])[:, 0]
    for _ in range(1, k):
        total = nearest.sum()
        pick = rng.choice(len(unit), p=nearest / total) if total > 0 else rng.integers(len(unit))
        centres.append(unit[pick])
        nearest = np.minimum(nearest, _squared(unit, unit[pick][None, :])[:, 0])
    return np.stack(centres)


def _means(unit: np.ndarray, labels: np.ndarray, k: int) -> np.ndarray:
    sums = np.zeros((k, unit.shape[1]))
    np.add.at(sums, labels, unit)
    return sums / np.maximum(np.bincount(labels, minlength=k), 1)[:, None]


def kmeans(unit: np.ndarray, k: int, restarts: int = 10, iterations: int = 100, seed: int = 0) -> np.ndarray:
    """0-based group of each row of ``unit`` (unit vectors): ``k`` groups (at most the number of rows), none
    empty."""
    n = len(unit)
    k = max(1, min(int(k), n))
    if k == 1:
        return np.zeros(n, dtype=np.int64)
    rng = np.random.default_rng(seed)
    best, best_cost = None, np.inf
    for _ in range(restarts):
        centres = _starts(unit, k, rng)
        labels = np.argmin(_squared(unit, centres), axis=1)
        for _ in range(iterations):
            counts = np.bincount(labels, minlength=k)
            empties = np.flatnonzero(counts == 0)
            placed = _squared(unit, centres)[np.arange(n), labels] if len(empties) else None
            for empty in empties:  # reseed an empty group with the worst-placed vector
                cost = placed.copy()
                cost[counts[labels] <= 1] = -np.inf  # never empty another group doing it (nor a reseeded vector)
                worst = int(np.argmax(cost))
                counts[labels[worst]] -= 1
                labels[worst] = empty
                counts[empty] = 1
            centres = _means(unit, labels, k)
            moved = np.argmin(_squared(unit, centres), axis=1)
            if (moved == labels).all():
                break
            labels = moved
        if len(np.unique(labels)) < k:
            continue
        cost = float(_squared(unit, centres)[np.arange(n), labels].sum())
        if cost < best_cost:
            best, best_cost = labels.copy(), cost
    if best is None:  # no start kept k groups (many identical rows): the groups the data allows
        best = np.unique(unit, axis=0, return_inverse=True)[1].reshape(-1)
        best = np.minimum(best, k - 1)
    return best.astype(np.int64)
