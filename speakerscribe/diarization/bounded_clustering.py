"""Clustering in bounded memory: at most ``max_embeddings`` speaker embeddings go into pyannote's hierarchical
clustering; the others are assigned to the resulting centroids.

pyannote clusters one embedding per (10 s window, local speaker) - with a 1 s step, about two per second of speech
- by agglomerative linkage, whose condensed distance matrix holds n(n-1)/2 float64 values: 3 GB for the ~28,000
embeddings of a four-hour two-person recording, 25 GB at eleven hours. Above ``max_embeddings``, an evenly spaced
(in time) subset of the embeddings pyannote selected for clustering is clustered instead, and every embedding, the
skipped ones included, is then assigned to its nearest centroid exactly as pyannote already assigns the embeddings
it leaves out of clustering (overlapping or too short). Below the cap nothing changes. Used by the clustering
classes of :mod:`speakerscribe.diarization.pyannote_pipeline`.
"""

from __future__ import annotations

import numpy as np

MAX_EMBEDDINGS = 6000  # a 144 MB distance matrix; about 50 minutes of two-person speech is clustered whole


def evenly_spaced(n: int, limit: int) -> np.ndarray | None:
    """Indices of at most ``limit`` of ``n`` items in order, evenly spaced; None when all ``n`` fit."""
    if n <= limit:
        return None
    return np.unique(np.linspace(0, n - 1, limit).round().astype(np.int64))
