"""Speaker labels that stay the same for a whole live session: online clustering of turn embeddings.

Each finished turn is embedded with the diarizer's embedding model (CAM++ in the offline default) and compared by
cosine similarity with the centroid of every speaker seen so far. At or above ``threshold`` it joins the most
similar speaker (whose centroid moves toward it, weighted by speech time); below, it starts a new speaker. A turn
shorter than ``min_new_s`` is too short to found a speaker or to move a centroid: it takes the most similar speaker
whatever the similarity. Labels are ``SPEAKER_00``, ``SPEAKER_01``, ... in order of first appearance, as the batch
diarizer numbers them.

The threshold is calibrated on real meetings (``benchmarks/calibrate_streaming.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ONLINE_THRESHOLD = 0.45
MIN_NEW_SPEAKER_S = 1.0


@dataclass
class OnlineSpeakers:
    threshold: float = ONLINE_THRESHOLD
    min_new_s: float = MIN_NEW_SPEAKER_S
    max_speakers: int = 64
    centroids: list[np.ndarray] = field(default_factory=list)  # time-weighted sums of unit embeddings
    seconds: list[float] = field(default_factory=list)

    @staticmethod
    def label(index: int) -> str:
        return f"SPEAKER_{index:02d}"

    def assign(self, embedding: np.ndarray, seconds: float) -> tuple[str, float | None]:
        """(label, similarity to the speaker it joined; None for a new speaker)."""
        e = np.asarray(embedding, dtype=np.float64)
        e = e / max(float(np.linalg.norm(e)), 1e-12)
        if self.centroids:
            sims = np.array([c @ e / max(float(np.linalg.norm(c)), 1e-12) for c in self.centroids])
            best = int(np.argmax(sims))
            joins = sims[best] >= self.threshold or seconds < self.min_new_s
            if joins or len(self.centroids) >= self.max_speakers:
                if seconds >= self.min_new_s:
                    self.centroids[best] = self.centroids[best] + seconds * e
                    self.seconds[best] += seconds
                return self.label(best), float(sims[best])
        self.centroids.append(max(seconds, 1e-3) * e)
        self.seconds.append(seconds)
        return self.label(len(self.centroids) - 1), None
