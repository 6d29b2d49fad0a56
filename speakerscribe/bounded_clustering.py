"""Clustering in bounded memory: at most ``max_embeddings`` speaker embeddings go into pyannote's hierarchical
clustering; the others are assigned to the resulting centroids.

pyannote clusters one embedding per (10 s window, local speaker) - with a 1 s step, about two per second of speech
- by agglomerative linkage, whose condensed distance matrix holds n(n-1)/2 float64 values: 3 GB for the ~28,000
embeddings of a four-hour two-person recording, 25 GB at eleven hours. Above ``max_embeddings``, an evenly spaced
(in time) subset of the embeddings pyannote selected for clustering is clustered instead, and every embedding, the
skipped ones included, is then assigned to its nearest centroid exactly as pyannote already assigns the embeddings
it leaves out of clustering (overlapping or too short). Below the cap nothing changes.
"""

from __future__ import annotations

import types

import numpy as np

MAX_EMBEDDINGS = 6000  # a 144 MB distance matrix; about 50 minutes of two-person speech is clustered whole


def _capped_filter(self, embeddings, segmentations=None, min_active_ratio: float = 0.2):
    chosen, chunk_idx, speaker_idx = type(self).filter_embeddings(
        self, embeddings, segmentations=segmentations, min_active_ratio=min_active_ratio
    )
    limit = self._speakerscribe_max_embeddings
    if len(chosen) <= limit:
        return chosen, chunk_idx, speaker_idx
    keep = np.unique(np.linspace(0, len(chosen) - 1, limit).round().astype(np.int64))
    return chosen[keep], chunk_idx[keep], speaker_idx[keep]


def install(pipeline, max_embeddings: int = MAX_EMBEDDINGS) -> bool:
    """Cap the embeddings ``pipeline``'s clustering links. Returns whether the pipeline has such a clustering."""
    clustering = getattr(pipeline, "clustering", None)
    if clustering is None or not hasattr(clustering, "filter_embeddings"):
        return False
    clustering._speakerscribe_max_embeddings = max_embeddings
    clustering.filter_embeddings = types.MethodType(_capped_filter, clustering)
    return True
