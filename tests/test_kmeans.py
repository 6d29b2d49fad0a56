"""k-means on unit vectors (issue 26: where a count is given and the agglomeration misses it)."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.diarization.kmeans import kmeans


def _unit(v):
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _voices(sizes, gap_scale=1.0, spread=0.08, seed=0):
    rng = np.random.default_rng(seed)
    centres = _unit(rng.normal(size=(len(sizes), 32)))
    rows, truth = [], []
    for who, size in enumerate(sizes):
        rows.append(_unit(centres[who] * gap_scale + spread * rng.normal(size=(size, 32))))
        truth += [who] * size
    return np.vstack(rows), np.array(truth)


def _agree(labels, truth):
    """Share of pairs on which the two partitions agree (same group or not): 1.0 only for the same partition."""
    same_l = labels[:, None] == labels[None, :]
    same_t = truth[:, None] == truth[None, :]
    return float((same_l == same_t).mean())


@pytest.mark.parametrize("sizes", [(30, 30), (40, 25, 10), (20, 20, 20, 6)])
def test_separated_voices_come_back_exactly_whatever_their_sizes(sizes):
    x, truth = _voices(sizes)
    labels = kmeans(x, len(sizes))
    assert _agree(labels, truth) == 1.0
    assert sorted(np.unique(labels)) == list(range(len(sizes)))


def test_deterministic_and_the_best_of_its_starts():
    x, truth = _voices((25, 25, 25), spread=0.3, seed=2)
    first, again = kmeans(x, 3), kmeans(x, 3)
    assert (first == again).all()

    def cost(labels):
        return sum(((x[labels == k] - x[labels == k].mean(0)) ** 2).sum() for k in np.unique(labels))

    one_start = [kmeans(x, 3, restarts=1, seed=s) for s in range(8)]
    assert cost(first) <= min(cost(lab) for lab in one_start) + 1e-9


def test_k_is_kept_and_bounded_by_the_rows():
    x, _ = _voices((3, 2))
    assert kmeans(x, 1).tolist() == [0] * 5
    assert len(np.unique(kmeans(x, 5))) == 5  # as many groups as rows: each row its own
    assert len(np.unique(kmeans(x, 9))) == 5  # never more groups than rows
    same = np.tile(_unit(np.ones((1, 4))), (6, 1))  # six identical rows cannot make three groups by distance
    labels = kmeans(same, 3)
    assert labels.shape == (6,) and labels.min() >= 0 and labels.max() <= 2


def test_a_thousand_embeddings_stay_cheap():
    x, truth = _voices((400, 400, 200), spread=0.1)
    labels = kmeans(x, 3, restarts=3)
    assert _agree(labels, truth) == 1.0
