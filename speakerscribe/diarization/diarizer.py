"""Speaker diarization with a pyannote.audio pipeline, fed the already-decoded waveform in memory."""

from __future__ import annotations

import dataclasses
import logging
import threading
from contextlib import contextmanager

import numpy as np

from ..audio.bandwidth import is_narrowband
from ..errors import ModelLoadError, short_message
from ..options import KNOWN_SPEAKER_THRESHOLD, SpeakerCounts
from ..records import SAMPLE_RATE, Diarization, SpeakerMatch, SpeakerTurn, Waveform
from ..runtime import Placement, configure_pyannote_environment, ignoring_warning, tf32_guard
from ..speakers import pieces as turn_pieces
from ..speakers.names import MIN_PIECE_S, PIECE_S, Reference, match_speakers, name_pieces, piece_length, rename
from ..speakers.voiceprints import (
    campplus_clip_embeddings,
    frame_speaker_embeddings,
    speaker_speech,
    waveform_embeddings,
)
from ..timing import StageTimer
from .heard_together import WindowedSegmentation, heard_together
from .recluster import ReclusterOptions, recluster
from .shared_frames import FRAME_HOP
from .speaker_folding import apart_strays, fold_speakers

logger = logging.getLogger(__name__)

# a speaker heard for less than this in all is a few frames of pyannote's reconstruction, not a person: shorter than
# a word said alone, and a turn that short lies inside the 0.25 s scoring collar of its own edges
MIN_SPEAKER_S = 0.25


class SpeakerDiarizer:
    """A pyannote pipeline run on in-memory waveforms. Calls are serialised: pyannote pipelines keep per-call state.

    :meth:`load` and :meth:`from_pipeline` build speakerscribe's pipeline
    (:mod:`speakerscribe.diarization.pyannote_pipeline`);
    the constructor takes any pyannote pipeline as it is (``shared_frames`` says whether it is a
    :class:`~speakerscribe.diarization.pyannote_pipeline.SharedFrameDiarization` that keeps CAM++ frames, which the
    second
    clustering pass needs)."""

    def __init__(
        self,
        pipeline,
        placement: Placement,
        allow_tf32: bool = True,
        shared_frames: bool = False,
        recluster: bool = True,
    ):
        self.pipeline = pipeline
        self.placement = placement
        self.allow_tf32 = allow_tf32
        self.shared_frames = shared_frames
        # the second clustering pass over short pieces needs the shared frames (speakerscribe.diarization.recluster)
        self.recluster = recluster and shared_frames
        self.recluster_options = ReclusterOptions()
        # on a telephone line (speakerscribe.audio.bandwidth) different people's pieces sit closer together: at the
        # wideband threshold the second pass never split a speaker there. Chosen on the calibration calls (0.5-0.8;
        # README, "The second pass on a telephone line")
        self.narrowband_recluster_options = ReclusterOptions(threshold=0.7)
        # known speakers are named piece by piece, in pieces this long, after the speaker-level match
        # (speakerscribe.speakers.names); None: speaker by speaker only
        self.name_piece_s: float | None = PIECE_S
        # a count asking for fewer speakers folds the smallest ones in when together they hold at most this share
        # of the speech (as the second pass asks of a new speaker: speakerscribe.diarization.recluster)
        self.absorb_share = ReclusterOptions().min_share
        # a speaker holding under this share of the exclusive speech is folded into the nearest other speaker, before
        # any count is checked: on the calibration conversations every such speaker was a stray piece of someone
        # already found (1-6 s of a person the clustering split off), never a person of their own; 0 turns it off
        self.fold_share = 0.09
        # and under this many seconds, as the second pass asks of a new speaker: on a long meeting 5% of the speech
        # is minutes of one person, not a stray piece (the calibration strays held 1-6 s)
        self.fold_max_s = ReclusterOptions().min_speaker_s
        # and on wideband audio, two speakers whose whole speech is this alike (cosine) are one person
        # (speakerscribe.diarization.speaker_folding); None turns it off. README, "Stray and alike speakers folded"
        self.alike_cosine = 0.65
        # and a speaker holding under this share of the speech who was never heard in one of the segmentation's
        # windows with the speaker nearest in voice, though heard with others, is a piece of that speaker
        # (speakerscribe.diarization.speaker_folding.apart_strays); 0 turns it off. README, "Pieces never heard with
        # their own voice"
        self.apart_share = ReclusterOptions().min_share
        # a count asking for more people is not met by such a piece: the result without the count is kept
        self.count_apart_check = True
        self._lock = threading.Lock()

    @classmethod
    def load(
        cls,
        model_id: str,
        placement: Placement,
        token: str | None = None,
        allow_tf32: bool = True,
        shared_frames: bool = True,
        recluster: bool = True,
        constrained: bool = True,
    ) -> SpeakerDiarizer:
        configure_pyannote_environment()
        try:
            import torch

            from .pyannote_loading import load_pipeline  # imports pyannote.audio: after the line above

            pipeline = load_pipeline(model_id, token=token)
        except ModelLoadError:
            raise
        except Exception as exc:
            raise ModelLoadError(f"could not load DIARIZATION_MODEL {model_id!r}: {short_message(exc)}") from exc
        if pipeline is None:  # pyannote returns None when a Hub download is refused (gated model, bad token)
            raise ModelLoadError(
                f"could not load DIARIZATION_MODEL {model_id!r}: the Hub refused the download; gated models need "
                "HF_TOKEN with access granted on the model page"
            )
        pipeline.to(torch.device(placement.device))
        return cls.from_pipeline(pipeline, placement, allow_tf32, shared_frames, recluster, constrained)

    @classmethod
    def from_pipeline(
        cls,
        pipeline,
        placement: Placement,
        allow_tf32: bool = True,
        shared_frames: bool = True,
        recluster: bool = True,
        constrained: bool = True,
    ) -> SpeakerDiarizer:
        """A loaded pyannote pipeline made speakerscribe's
        (:func:`speakerscribe.diarization.pyannote_pipeline.build`: shared
        frames where the embedding model is CAM++ or a WeSpeaker ResNet, bounded clustering, and with CAM++ and
        ``constrained`` the cannot-link clustering), then wrapped; the CAM++ frames are kept for the second
        clustering pass and naming."""
        configure_pyannote_environment()
        from . import pyannote_pipeline  # imports pyannote.audio: after configure_pyannote_environment()
        from .campplus import CAMPPlusEmbedding

        # the cannot-link clustering was calibrated on CAM++ embeddings (benchmarks/sweep_constraints.py)
        campplus = isinstance(getattr(getattr(pipeline, "_embedding", None), "model_", None), CAMPPlusEmbedding)
        pipeline = pyannote_pipeline.build(pipeline, shared_frames, constrained=constrained and campplus)
        measure_min_samples(pipeline)
        # ResNet pipelines share frames for speed only: the second pass and piece naming were calibrated on CAM++
        uses_frames = isinstance(pipeline, pyannote_pipeline.SharedFrameDiarization) and isinstance(
            pipeline._embedding.model_, CAMPPlusEmbedding
        )
        return cls(pipeline, placement, allow_tf32, uses_frames, recluster)

    def __call__(
        self,
        waveform: Waveform,
        speakers: SpeakerCounts = SpeakerCounts(),
        checkpoint=None,
        references: tuple[Reference, ...] = (),
        threshold: float = KNOWN_SPEAKER_THRESHOLD,
        timer: StageTimer | None = None,
    ) -> Diarization:
        """Speaker turns of ``waveform``.

        The result without a count has its stray and alike speakers folded first (:meth:`_fold_strays`, never below
        ``min_speakers``). ``speakers`` (checked when it was built) only changes a result that breaks it: too many
        speakers whose extra ones are small are folded into the nearest (:meth:`_absorb`); otherwise clustering runs
        again with the count on the same segmentation and embeddings, and that result is kept only when it comes
        closer to the count. A count never replaces the evidence's answer by a worse cut, and may be missed when
        the audio holds fewer distinct voices than asked.

        ``checkpoint()``, if given, is called after every batch of the pipeline's segmentation and embedding steps,
        and may raise to stop the work there. With ``references``, speakers matching a known person's clip carry
        that person's name (:mod:`speakerscribe.speakers.names`); ``known`` says what became of each name. ``timer``
        times the naming (``speaker_naming``)."""
        import torch

        if waveform.samples.size == 0:
            return Diarization((), (), tuple(SpeakerMatch(r.name, None, None) for r in references))
        audio = {
            "waveform": torch.from_numpy(np.ascontiguousarray(waveform.samples))[None],
            "sample_rate": waveform.sample_rate,
        }
        with self._lock, tf32_guard(self.allow_tf32), torch.inference_mode(), features_once(self.pipeline):
            clustering = getattr(self.pipeline, "clustering", None)
            narrowband = is_narrowband(waveform.samples, waveform.sample_rate)
            if hasattr(clustering, "narrowband"):  # the cannot-link clustering's gate depends on the channel
                clustering.narrowband = narrowband
            hook = {} if checkpoint is None else {"hook": lambda *args, **kwargs: checkpoint()}
            try:
                # a count first looks at the result without one, and keeps it when it has that many speakers: a
                # count may only change a result that breaks it, and only to come closer to it (asked for more
                # people than the voices heard, the clustering does not cut one voice in two) (issue 26)
                first = SpeakerCounts() if self.count_after_evidence else speakers
                result, frames = self._diarize(audio, waveform.duration, first, hook, narrowband)
                segmentation = self._take_segmentation()
                # stray pieces of one person are not a speaker (never below min_speakers, or a count the pipeline
                # was given); a count then judges the result so tidied, as it would the answer without one
                result = self._fold_strays(result, frames, speakers.min or first.num or 1, narrowband, segmentation)
                if first != speakers and not speakers.allows(_count(result)):
                    result, frames = self._recount(audio, waveform.duration, speakers, hook, narrowband, result, frames)
            finally:  # the file's CAM++ frames and segmentation are large: never kept on the pipeline past the call
                self._release()
            if references:
                with (timer or StageTimer())("speaker_naming"):
                    result = self._name(result, waveform, frames, references, threshold)
        return result

    def _recount(
        self, audio: dict, end: float, speakers: SpeakerCounts, hook: dict, narrowband: bool, result, frames
    ) -> tuple[Diarization, object]:
        """``result`` (and its frames) brought closer to a count it breaks: too many speakers whose extra ones are
        small are folded in, nothing else moves (:meth:`_absorb`); otherwise clustering runs again with the count
        and its answer is kept when it comes closer, except that a count asking for more people is never met by a
        piece of one voice (with ``count_apart_check``: a new speaker :func:`apart_strays` marks)."""
        absorbed = self._absorb(result, frames, speakers.num or speakers.max)
        if absorbed is not None:
            return absorbed, frames
        counted, counted_frames = self._diarize(audio, end, speakers, hook, narrowband)
        segmentation = self._take_segmentation()
        if speakers.miss(_count(counted)) >= speakers.miss(_count(result)):
            return result, frames
        if self.count_apart_check and _count(counted) > _count(result) and segmentation is not None:
            if self._pieces(counted, counted_frames, segmentation).any():
                return result, frames
        return counted, counted_frames

    def _pieces(self, result: Diarization, frames, segmentation: WindowedSegmentation) -> np.ndarray:
        """Which speakers of ``result`` :func:`apart_strays` marks as pieces of another (none without frames)."""
        turns = result.exclusive or result.turns
        labels = sorted({t.speaker for t in turns})
        if frames is None or self.apart_share <= 0 or len(labels) < 3:
            return np.zeros(len(labels), dtype=bool)
        seconds = _speaker_seconds(turns, labels)
        emb = frame_speaker_embeddings(self.frame_pool, frames, turns, labels, FRAME_HOP / SAMPLE_RATE)
        return self._apart(emb, seconds, turns, labels, segmentation)

    def _apart(self, emb, seconds, turns, labels: list[str], segmentation: WindowedSegmentation) -> np.ndarray:
        """:func:`apart_strays` of these speakers, on the windows ``segmentation`` heard them in."""
        together, _ = heard_together(segmentation, turns, labels)
        return apart_strays(emb, seconds, together, self.apart_share, self.fold_max_s)

    def _release(self) -> None:
        """Drop what the last call left on the pipeline: its CAM++ frames and its segmentation."""
        if getattr(self.pipeline, "last_frames", None) is not None:
            self.pipeline.last_frames = None
        self._take_segmentation()

    def _take_segmentation(self) -> WindowedSegmentation | None:
        """The binarized segmentation the pipeline's clustering last saw (taken off the clustering), or None."""
        clustering = getattr(self.pipeline, "clustering", None)
        feature = getattr(clustering, "last_segmentations", None)
        if feature is None:
            return None
        clustering.last_segmentations = None
        try:
            return WindowedSegmentation.of(feature)
        except (AttributeError, TypeError, ValueError):
            return None

    def _diarize(
        self, audio: dict, end: float, speakers: SpeakerCounts, hook: dict, narrowband: bool = False
    ) -> tuple[Diarization, object]:
        """One run of the pipeline and the second pass: (result, the CAM++ frames or None)."""
        output = self.pipeline(
            audio, num_speakers=speakers.num, min_speakers=speakers.min, max_speakers=speakers.max, **hook
        )
        frames = self.pipeline.last_frames if self.shared_frames else None
        annotation = getattr(output, "speaker_diarization", output)
        exclusive = getattr(output, "exclusive_speaker_diarization", None)
        result = without_specks(
            Diarization(
                turns=annotation_turns(annotation, end),
                exclusive=annotation_turns(exclusive, end) if exclusive is not None else (),
            )
        )
        if self.recluster and frames is not None and speakers.num is None and result.exclusive:
            result = self._recluster(result, frames, speakers.min, speakers.max, narrowband)
        return result, frames

    def _absorb(self, result: Diarization, frames, most: int | None) -> Diarization | None:
        """``result`` with its speakers of least speech folded, one at a time, into the nearest other speaker (CAM++
        frames of their exclusive turns) until at most ``most`` remain; None when there are not too many, there
        are no frames, or the folded speakers hold more than ``absorb_share`` of the speech (then they are people,
        and the count has to be met by clustering again)."""
        turns = result.exclusive or result.turns
        labels = sorted({t.speaker for t in turns})
        if frames is None or most is None or len(labels) <= most:
            return None
        seconds = _speaker_seconds(turns, labels)
        if np.sort(seconds)[: len(labels) - most].sum() > self.absorb_share * seconds.sum():
            return None
        return self._folded(result, frames, labels, seconds, fold=len(labels) - most)

    def _fold_strays(
        self,
        result: Diarization,
        frames,
        least: int,
        narrowband: bool,
        segmentation: WindowedSegmentation | None = None,
    ) -> Diarization:
        """``result`` with every speaker holding under ``fold_share`` of the exclusive speech (and under half an equal
        share, and under ``fold_max_s`` seconds), and, with the ``segmentation``, every speaker under
        ``apart_share`` never heard in a window with the speaker nearest in voice, folded into the nearest other
        speaker, smallest first, then, on wideband audio, speakers whose whole speech is at least ``alike_cosine``
        alike joined; at least ``least`` speakers stay (unchanged without CAM++ frames)."""
        turns = result.exclusive or result.turns
        labels = sorted({t.speaker for t in turns})
        if frames is None or len(labels) <= max(least, 1):
            return result
        seconds = _speaker_seconds(turns, labels)
        # and under half an equal share (in a meeting of many people each holds little, and none is folded for it)
        # and under fold_max_s
        limit = min(min(self.fold_share, 0.5 / len(labels)) * seconds.sum(), self.fold_max_s)
        small = int((seconds < limit).sum())
        alike = None if narrowband else self.alike_cosine  # telephone voices are all alike: different people reach 0.85
        # the window evidence only matters where someone is small enough for it (apart_strays asks the same)
        apart = min(self.apart_share * seconds.sum(), self.fold_max_s)
        heard = segmentation if self.apart_share > 0 and len(labels) > 2 and (seconds < apart).any() else None
        if small == 0 and alike is None and heard is None:
            return result
        return self._folded(result, frames, labels, seconds, fold=small, alike=alike, least=least, heard=heard)

    def _folded(
        self,
        result: Diarization,
        frames,
        labels: list[str],
        seconds: np.ndarray,
        fold: int,
        alike=None,
        least=1,
        heard: WindowedSegmentation | None = None,
    ) -> Diarization:
        """``result`` relabelled by :func:`speakerscribe.diarization.speaker_folding.fold_speakers` on the speakers'
        CAM++ frames (their exclusive turns); with ``heard``, the speakers it shows to be pieces of their nearest
        voice (:func:`speakerscribe.diarization.speaker_folding.apart_strays`) are folded too."""
        turns = result.exclusive or result.turns
        emb = frame_speaker_embeddings(self.frame_pool, frames, turns, labels, FRAME_HOP / SAMPLE_RATE)
        marked = None if heard is None else self._apart(emb, seconds, turns, labels, heard)
        target = fold_speakers(emb, seconds, fold=fold, alike=alike, least=least, marked=marked)
        if (target == np.arange(len(labels))).all():
            return result
        merged = {labels[k]: labels[int(target[k])] for k in range(len(labels))}
        # numbered again by first appearance, as pyannote numbers them
        first_seen = list(dict.fromkeys(merged[t.speaker] for t in sorted(turns, key=lambda t: t.start)))
        mapping = {old: f"SPEAKER_{first_seen.index(new):02d}" for old, new in merged.items()}

        def relabel(turns: tuple[SpeakerTurn, ...]) -> tuple[SpeakerTurn, ...]:
            return turn_pieces.join([SpeakerTurn(t.start, t.end, mapping.get(t.speaker, t.speaker)) for t in turns])

        return Diarization(relabel(result.turns), relabel(result.exclusive), result.known)

    @property
    def count_after_evidence(self) -> bool:
        """A requested count is applied only when the result without it breaks it. Needs a pipeline whose features
        can be kept for the second run (pyannote's ``SpeakerDiarization``, see :func:`features_once`) and that can
        run without a count."""
        return callable(getattr(self.pipeline, "get_segmentations", None)) and not getattr(
            self.pipeline, "_expects_num_speakers", False
        )

    @property
    def embedding_model(self):
        """pyannote's speaker-embedding inference object of the pipeline, or None when it has none."""
        return getattr(self.pipeline, "_embedding", None)

    @property
    def frame_pool(self):
        """The CAM++ model's pooling (frames -> one embedding), for embeddings taken from the frames the diarizer
        computed (only when it computed them: a CAM++ pipeline with shared frames)."""
        return self.embedding_model.model_.campplus.pool

    @property
    def can_name(self) -> bool:
        """Known speakers can be matched: the pipeline has a speaker-embedding model."""
        return self.embedding_model is not None

    def _name(self, result: Diarization, waveform: Waveform, frames, references, threshold: float) -> Diarization:
        turns = result.exclusive or result.turns
        labels = sorted({t.speaker for t in turns})
        names = tuple(r.name for r in references)
        if not labels:
            return Diarization(result.turns, result.exclusive, match_speakers([], None, names, None, threshold)[1])
        reference_embeddings, speaker_embeddings = self.embed(references, waveform, frames, turns, labels)
        mapping, matches = match_speakers(labels, speaker_embeddings, names, reference_embeddings, threshold)
        if self.name_piece_s is None or not result.exclusive:
            named = rename(result, mapping)
            return Diarization(named.turns, named.exclusive, matches)
        pieces = turn_pieces.cut(result.exclusive, piece_length(result.exclusive, self.name_piece_s))
        embeddings = self.embed_pieces(waveform, frames, [p for p in pieces if p.end - p.start >= MIN_PIECE_S])
        return name_pieces(result, mapping, matches, pieces, embeddings, reference_embeddings, threshold)

    def embed_pieces(self, waveform: Waveform, frames, pieces: list[SpeakerTurn], batch: int = 64) -> np.ndarray:
        """(len(pieces), D) embeddings of pieces of ``waveform``: pooled from the file's CAM++ frames when the
        diarizer computed them, else embedded ``batch`` pieces at a time by the pipeline's embedding model."""
        if not pieces:
            return np.zeros((0, 1), dtype=np.float32)
        if frames is not None:
            return turn_pieces.frame_embeddings(self.frame_pool, frames, pieces, FRAME_HOP / SAMPLE_RATE)
        clips = [(waveform.samples[int(p.start * SAMPLE_RATE) : int(p.end * SAMPLE_RATE)], ()) for p in pieces]
        return np.concatenate([self.embed_clips(clips[a : a + batch]) for a in range(0, len(clips), batch)])

    def embed_clips(self, clips: list[tuple[np.ndarray, tuple]]) -> np.ndarray:
        """(len(clips), D) embeddings of 16 kHz clips, each pooled over its spans (all of it when none), one batch,
        with the pipeline's embedding model (see :mod:`speakerscribe.speakers.voiceprints`)."""
        from .campplus import CAMPPlusEmbedding  # imports pyannote.audio: loaded by now

        model = getattr(self.embedding_model, "model_", None)
        if isinstance(model, CAMPPlusEmbedding):
            return campplus_clip_embeddings(model, clips)
        return waveform_embeddings(self.embedding_model, clips)

    def embed(self, references, waveform: Waveform, frames, turns: tuple[SpeakerTurn, ...], labels: list[str]):
        """(reference embeddings, speaker embeddings) from the pipeline's embedding model (see
        :mod:`speakerscribe.speakers.voiceprints`)."""
        from .campplus import CAMPPlusEmbedding  # imports pyannote.audio: loaded by now

        model = getattr(self.embedding_model, "model_", None)
        clips = [(r.waveform.samples, r.speech) for r in references]
        if isinstance(model, CAMPPlusEmbedding) and frames is not None:
            refs = campplus_clip_embeddings(model, clips)
            return refs, frame_speaker_embeddings(self.frame_pool, frames, turns, labels, FRAME_HOP / SAMPLE_RATE)
        pieces = [(speaker_speech(waveform.samples, turns, label), ()) for label in labels]
        both = self.embed_clips(clips + pieces)
        return both[: len(clips)], both[len(clips) :]

    def _recluster(
        self, result: Diarization, frames, lo: int | None, hi: int | None, narrowband: bool = False
    ) -> Diarization:
        """The second clustering pass; pyannote's labels stay when it breaks a requested speaker range."""
        exclusive, turns = recluster(
            result.exclusive,
            result.turns,
            frames,
            self.frame_pool,
            FRAME_HOP / SAMPLE_RATE,
            self.narrowband_recluster_options if narrowband else self.recluster_options,
        )
        count = len({t.speaker for t in exclusive})
        if (lo is not None and count < lo) or (hi is not None and count > hi):
            return result
        return Diarization(turns=turns, exclusive=exclusive)


def without_specks(result: Diarization) -> Diarization:
    """``result`` without the speakers heard for under ``MIN_SPEAKER_S`` in all, overlapped speech included, while
    a speaker heard for longer remains. pyannote's reconstruction can give a cluster a frame or two at a change of
    speaker (0.02 s: AMI trn03 without a count, held-out held-4p-00 telephone told four). Told a count, that speck
    met it, so the result with it replaced the answer without the count; and the RTTM output listed a speaker who
    never spoke."""
    labels = sorted({t.speaker for t in result.turns})
    seconds = _speaker_seconds(result.turns, labels)
    if len(labels) < 2 or seconds.max() < MIN_SPEAKER_S or seconds.min() >= MIN_SPEAKER_S:
        return result
    specks = {label for label, s in zip(labels, seconds) if s < MIN_SPEAKER_S}
    return dataclasses.replace(
        result,
        turns=tuple(t for t in result.turns if t.speaker not in specks),
        exclusive=tuple(t for t in result.exclusive if t.speaker not in specks),
    )


def _count(result: Diarization) -> int:
    return len({t.speaker for t in result.turns})


def _speaker_seconds(turns: tuple[SpeakerTurn, ...], labels: list[str]) -> np.ndarray:
    """Seconds of ``turns`` per label, in the order of ``labels``."""
    index = {label: k for k, label in enumerate(labels)}
    seconds = np.zeros(len(labels))
    for t in turns:
        seconds[index[t.speaker]] += t.end - t.start
    return seconds


@contextmanager
def features_once(pipeline):
    """Inside the block, a pyannote ``SpeakerDiarization`` computes a file's segmentation and embeddings once: a
    second run on the same file (with a count, after the run without one) only clusters and reconstructs again.
    Other pipelines are left as they are."""
    if not (
        callable(getattr(pipeline, "get_segmentations", None)) and callable(getattr(pipeline, "get_embeddings", None))
    ):
        yield
        return
    own = {name: pipeline.__dict__.get(name) for name in ("get_segmentations", "get_embeddings")}
    segment, embed, memo = pipeline.get_segmentations, pipeline.get_embeddings, {}

    def get_segmentations(file, hook=None):
        if "segmentations" not in memo:
            memo["segmentations"] = segment(file, hook=hook)
        return memo["segmentations"]

    def get_embeddings(file, binary_segmentations, exclude_overlap=False, hook=None):
        if "embeddings" not in memo:
            memo["embeddings"] = embed(file, binary_segmentations, exclude_overlap=exclude_overlap, hook=hook)
        return memo["embeddings"]

    pipeline.get_segmentations, pipeline.get_embeddings = get_segmentations, get_embeddings
    try:
        yield
    finally:
        for name, value in own.items():
            if value is None:
                del pipeline.__dict__[name]
            else:
                setattr(pipeline, name, value)


def measure_min_samples(pipeline) -> None:
    """Measure the embedding model's shortest input now, at load time: pyannote finds it on first use by running the
    model on ever shorter noise, and WeSpeaker's statistics pooling warns ``std(): degrees of freedom is <= 0`` on
    each too-short try (a measurement, not a fault), into the first request's log."""
    embedding = getattr(pipeline, "_embedding", None)
    if embedding is not None and hasattr(type(embedding), "min_num_samples"):
        with ignoring_warning(UserWarning, "std(): degrees of freedom is <= 0"):
            embedding.min_num_samples  # noqa: B018 - a cached property: computed once, here


def annotation_turns(annotation, duration: float) -> tuple[SpeakerTurn, ...]:
    """Turns clipped to the audio (pyannote's last frames can reach past its end), empty ones dropped."""
    turns = [
        SpeakerTurn(float(seg.start), min(float(seg.end), duration), str(label))
        for seg, _, label in annotation.itertracks(yield_label=True)
        if min(seg.end, duration) > seg.start
    ]
    return tuple(sorted(turns, key=lambda t: (t.start, t.end)))
