"""speakerscribe's diarization pipeline: pyannote's ``SpeakerDiarization`` with two of its steps replaced.

This module imports pyannote.audio. Import it only after :func:`speakerscribe.runtime.configure_pyannote_environment`
(:meth:`speakerscribe.diarization.diarizer.SpeakerDiarizer.from_pipeline` does).

Where CAM++ comes from
    ``Pipeline.from_pretrained(folder)`` builds a pipeline by itself: ``config.yaml`` names the pipeline class and
    its sub-models, and every model checkpoint names its own class by dotted path. The offline default's embedding
    checkpoint (written by :mod:`speakerscribe.models.pyannote_folder`) names
    ``speakerscribe.diarization.campplus.CAMPPlusEmbedding``, so pyannote imports CAM++ from that path while loading.
    Other
    pipelines (pyannote's own, WeSpeaker embeddings) load the same way.

What :func:`build` changes
    pyannote constructs the pipeline objects, so we cannot choose their classes; :func:`build` replaces the class of
    two of them with a subclass defined here. Their hyper-parameters, ``isinstance`` checks and every method not
    named below stay pyannote's.

    * ``SpeakerDiarization`` (exactly that class) -> :class:`SharedFrameDiarization`, when the embedding model is
      :class:`~speakerscribe.diarization.campplus.CAMPPlusEmbedding` or one of pyannote's WeSpeaker ResNets
      (community-1 and 3.1
      use ResNet34) and shared frames are on: ``get_embeddings`` pools frames computed once per file
      (:mod:`speakerscribe.diarization.shared_frames`) and, for CAM++, keeps them in ``last_frames`` for the second
      clustering
      pass (:mod:`speakerscribe.diarization.recluster`); with ``voice_stretches`` (CAM++ only), the embeddings the
      clustering receives come from each single-voice stretch embedded alone
      (:mod:`speakerscribe.diarization.voice_stretches`), and with ``stretch_frames_downstream`` too the frames
      left in ``last_frames`` (both off).
    * the clustering (any of pyannote's ``BaseClustering`` classes) -> the same class with
      :class:`BoundedEmbeddings` in front (:class:`BoundedAgglomerativeClustering` and :class:`BoundedVBxClustering`
      for the two that pipelines use): ``filter_embeddings`` keeps at most ``max_embeddings``
      (:mod:`speakerscribe.diarization.bounded_clustering`), so a four-hour recording clusters in bounded memory.
    * with ``constrained=True`` (the service's choice for CAM++ pipelines, see
      :meth:`~speakerscribe.diarization.diarizer.SpeakerDiarizer.from_pipeline`), centroid-linkage agglomerative
      clustering -> :class:`ConstrainedAgglomerativeClustering`, which never merges two voices heard in one window
      where the distance rule alone would (:mod:`speakerscribe.diarization.constrained_clustering`); with
      ``constrained=False`` it is pyannote's again.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from pyannote.audio.pipelines import SpeakerDiarization
from pyannote.audio.pipelines.clustering import AgglomerativeClustering, BaseClustering, VBxClustering

from ..records import SAMPLE_RATE
from ..runtime import ignoring_warning
from .bounded_clustering import MAX_EMBEDDINGS, evenly_spaced
from .campplus import CAMPPlusEmbedding
from .constrained_clustering import ConstraintOptions, constrained_clusters
from .shared_frames import shared_frame_embeddings
from .voice_stretches import stretch_embeddings


class SharedFrameDiarization(SpeakerDiarization):
    """pyannote's pipeline; speaker embeddings from CAM++ or ResNet frames computed once per file."""

    last_frames = None  # (channels, frames) of the last file embedded here (CAM++ only); the caller takes and clears it
    # CAM++: the clustering's embeddings from single-voice stretches, each embedded alone (.voice_stretches); the
    # shared frames stay what the second pass, folding and naming pool from
    voice_stretches = False
    # with voice_stretches: the file's frames that a stretch filled are the stretch's in last_frames too, so the
    # second pass, folding, the count's apart check and naming pool the same voice-alone frames as the clustering
    stretch_frames_downstream = False

    def get_embeddings(self, file, binary_segmentations, exclude_overlap: bool = False, hook=None):
        if file.get("sample_rate", SAMPLE_RATE) != SAMPLE_RATE:
            return super().get_embeddings(file, binary_segmentations, exclude_overlap, hook)
        embeddings, self.last_frames = shared_frame_embeddings(
            self._embedding.model_,
            file["waveform"],
            binary_segmentations,
            exclude_overlap,
            self._embedding.min_num_samples,
            hook,
        )
        if self.voice_stretches and self.last_frames is not None:
            into = self.last_frames if self.stretch_frames_downstream else None
            embeddings = stretch_embeddings(
                self._embedding.model_, file["waveform"], binary_segmentations, embeddings, frames_into=into
            )
        return embeddings


class BoundedEmbeddings:
    """``filter_embeddings`` keeps an evenly spaced (in time) subset of at most ``max_embeddings``; the clustering
    then assigns every embedding, the skipped ones included, to the nearest centroid as it already does for the
    ones pyannote leaves out."""

    max_embeddings = MAX_EMBEDDINGS
    # the binarized segmentation of the last file clustered here (which windows heard which voices); the caller
    # takes and clears it (speakerscribe.diarization.heard_together)
    last_segmentations = None

    def __call__(self, *args, **kwargs):
        self.last_segmentations = kwargs.get("segmentations", args[1] if len(args) > 1 else None)
        # when no local speaker is active long enough to be clustered (silence, noise, a few words), pyannote puts
        # everything in one cluster and averages zero embeddings for its centroid: numpy's "Mean of empty slice"
        # and "invalid value" warnings, about a case pyannote handles, into the request's log. (The diarizer's
        # lock serialises these calls.)
        with ignoring_warning(RuntimeWarning, "Mean of empty slice"), np.errstate(invalid="ignore"):
            return super().__call__(*args, **kwargs)

    def filter_embeddings(self, embeddings, segmentations=None, min_active_ratio: float = 0.2):
        chosen, chunk_idx, speaker_idx = super().filter_embeddings(
            embeddings, segmentations=segmentations, min_active_ratio=min_active_ratio
        )
        keep = evenly_spaced(len(chosen), self.max_embeddings)
        if keep is None:
            return chosen, chunk_idx, speaker_idx
        return chosen[keep], chunk_idx[keep], speaker_idx[keep]


class BoundedAgglomerativeClustering(BoundedEmbeddings, AgglomerativeClustering):
    pass


class BoundedVBxClustering(BoundedEmbeddings, VBxClustering):
    pass


class ConstrainedAgglomerativeClustering(BoundedAgglomerativeClustering):
    """Centroid linkage that never merges two voices heard in one window
    (:mod:`speakerscribe.diarization.constrained_clustering`); the threshold is the pipeline's, every embedding is
    then assigned as pyannote assigns it. Without a count, when the threshold already keeps the voices heard at
    once apart, pyannote's own clustering runs."""

    constraint_options = ConstraintOptions()
    # told an exact count, on a telephone line k-means replaces an answer the split floor leaves short of it
    # (constrained_clustering's docstring; README, "A count on a telephone line")
    narrowband_count_kmeans_short = True
    # the call's audio came through a telephone channel (set by the diarizer for each call,
    # speakerscribe.audio.bandwidth): there every voice is pulled towards the others, and the constraints also apply
    # when plain linkage would put this share of the voices heard at once into one cluster, and clusters under the
    # small share fold into the nearest voice (README, "Real voices in made-up conversations")
    narrowband = False
    narrowband_merged_share = 0.5
    narrowband_small_share = 0.15
    narrowband_threshold: float | None = None  # the clustering's threshold on a telephone line (None: the pipeline's)
    # wideband audio: the same two rules with stricter evidence. Plain centroid linkage at the threshold puts every
    # calibration meeting into one cluster (centroids of spread unit vectors shrink), so the gate opens wherever
    # voices are heard at once; a pair heard at once counts only when its embeddings are this far apart (one
    # person's two halves in a window sat 0.83-1.13 apart, two people 1.14-1.38: 10-90% of the calibration pairs),
    # and two clusters stay apart only with this many such pairs (a merged share of 0 turns the rules off here)
    wideband_merged_share = 0.9
    wideband_small_share = 0.15
    wideband_min_links = 3
    wideband_split_distance = 1.1

    def channel_options(self) -> ConstraintOptions:
        """The constraints for this call's channel (``narrowband`` or wideband), at the pipeline's threshold."""
        options = replace(self.constraint_options, threshold=float(self.threshold))
        if self.narrowband:
            return replace(
                options,
                threshold=float(self.threshold if self.narrowband_threshold is None else self.narrowband_threshold),
                merged_share=self.narrowband_merged_share,
                small_share=self.narrowband_small_share,
                count_kmeans_short=self.narrowband_count_kmeans_short,
            )
        if self.wideband_merged_share > 0:
            return replace(
                options,
                merged_share=self.wideband_merged_share,
                small_share=self.wideband_small_share,
                min_links=self.wideband_min_links,
                split_distance=self.wideband_split_distance,
            )
        return options

    def __call__(self, embeddings, segmentations=None, num_clusters=None, min_clusters=None, max_clusters=None, **kw):
        self.last_segmentations = segmentations
        with ignoring_warning(RuntimeWarning, "Mean of empty slice"), np.errstate(invalid="ignore"):
            chosen, chunk_idx, speaker_idx = self.filter_embeddings(embeddings, segmentations=segmentations)
            num, lo, hi = self.set_num_clusters(len(chosen), num_clusters, min_clusters, max_clusters)
            if len(chosen) < 2 or hi < 2:
                return BaseClustering.__call__(self, embeddings, segmentations, None, 1, 1)
            options = self.channel_options()
            # pyannote passes min 1 and max inf when no count was asked
            counted = (
                num_clusters is not None
                or (min_clusters is not None and min_clusters > 1)
                or (max_clusters is not None and np.isfinite(max_clusters))
            )
            if counted:  # a count: always the constrained choice (see the module)
                options = replace(options, near_share=0.0)
            clusters = constrained_clusters(chosen, chunk_idx, options, num=num, lo=lo, hi=hi)
            if clusters is None:  # the distance rule already keeps apart the voices heard at once
                pipeline_threshold = self.threshold
                self.threshold = options.threshold  # pyannote's clustering at this channel's threshold too
                try:
                    return super().__call__(embeddings, segmentations, num_clusters, min_clusters, max_clusters, **kw)
                finally:
                    self.threshold = pipeline_threshold
            return self.assign_embeddings(
                embeddings, chunk_idx, speaker_idx, clusters, constrained=self.constrained_assignment
            )


_BOUNDED: dict[type, type] = {
    AgglomerativeClustering: BoundedAgglomerativeClustering,
    VBxClustering: BoundedVBxClustering,
}


def bounded_class(cls: type) -> type:
    """``cls`` (a pyannote clustering class) with :class:`BoundedEmbeddings` in front, made once per class."""
    if cls not in _BOUNDED:
        _BOUNDED[cls] = type(f"Bounded{cls.__name__}", (BoundedEmbeddings, cls), {})
    return _BOUNDED[cls]


def supports_shared_frames(pipeline) -> bool:
    """The pipeline is pyannote's ``SpeakerDiarization`` with a CAM++ or WeSpeaker ResNet embedding model."""
    from .resnet_frames import is_resnet

    model = getattr(getattr(pipeline, "_embedding", None), "model_", None)
    return type(pipeline) in (SpeakerDiarization, SharedFrameDiarization) and (
        isinstance(model, CAMPPlusEmbedding) or is_resnet(model)
    )


def build(pipeline, shared_frames: bool = True, max_embeddings: int = MAX_EMBEDDINGS, constrained: bool = False):
    """The loaded pyannote ``pipeline`` as speakerscribe runs it (see the module docstring); returns it.
    Pipelines of other classes are returned unchanged. ``constrained``: centroid-linkage agglomerative clustering
    becomes :class:`ConstrainedAgglomerativeClustering`; without it, pyannote's (bounded) again."""
    if shared_frames and supports_shared_frames(pipeline):
        pipeline.__class__ = SharedFrameDiarization
    clustering = getattr(pipeline, "clustering", None)
    agglomerative = (AgglomerativeClustering, BoundedAgglomerativeClustering, ConstrainedAgglomerativeClustering)
    if type(clustering) in agglomerative:  # set both ways: a pipeline can be built again with the other choice
        centroid = getattr(clustering, "method", "centroid") == "centroid"  # the constraints implement centroid only
        constrain = constrained and centroid
        clustering.__class__ = ConstrainedAgglomerativeClustering if constrain else BoundedAgglomerativeClustering
    if isinstance(clustering, BaseClustering) and not isinstance(clustering, BoundedEmbeddings):
        clustering.__class__ = bounded_class(type(clustering))
    if isinstance(clustering, BoundedEmbeddings):
        clustering.max_embeddings = max_embeddings
    return pipeline
