"""speakerscribe's pyannote pipeline (speakerscribe.diarization.pyannote_pipeline): shared-frame embeddings for CAM++
and
WeSpeaker ResNet34 (the same embeddings and labels as pyannote's per-window path), pyannote's shapes; clustering
bounded to max_embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from speakerscribe.diarization.bounded_clustering import evenly_spaced
from speakerscribe.diarization.shared_frames import FRAME_HOP, file_frames

AMI = Path(__file__).resolve().parents[1] / "data" / "ami"


@pytest.fixture(scope="module")
def ami_folder() -> Path:
    from speakerscribe_dev import ami

    return ami.prepare(AMI)


@pytest.fixture(scope="module")
def resnet_pipeline(tmp_path_factory):
    """A pipeline folder with pyannote's WeSpeaker ResNet34 at its real size (random weights)."""
    from speakerscribe_dev.random_models import write_random_pipeline

    return write_random_pipeline(tmp_path_factory.mktemp("resnet") / "pipeline", embedding="wespeaker")


def test_build_uses_shared_frames_on_campplus_and_resnet_pipelines_only(random_models, resnet_pipeline):
    from pyannote.audio import Pipeline
    from pyannote.audio.pipelines import SpeakerDiarization

    from speakerscribe.diarization.pyannote_pipeline import (
        BoundedAgglomerativeClustering,
        SharedFrameDiarization,
        build,
        supports_shared_frames,
    )

    pipeline = build(Pipeline.from_pretrained(random_models.pipeline))
    assert type(pipeline) is SharedFrameDiarization and isinstance(pipeline, SpeakerDiarization)
    assert type(pipeline.clustering) is BoundedAgglomerativeClustering
    off = build(Pipeline.from_pretrained(random_models.pipeline), shared_frames=False)
    assert type(off) is SpeakerDiarization and type(off.clustering) is BoundedAgglomerativeClustering
    # the pipeline keeps pyannote's hyper-parameters
    assert pipeline.parameters(instantiated=True) == off.parameters(instantiated=True)

    class Other:
        _embedding = type("E", (), {"model_": torch.nn.Linear(2, 2)})()

    assert not supports_shared_frames(Other())
    assert type(build(Pipeline.from_pretrained(resnet_pipeline))) is SharedFrameDiarization
    other = Other()
    assert build(other) is other and type(other) is Other


def test_embeddings_have_pyannotes_shape_and_are_finite(random_models):
    from pyannote.audio import Pipeline
    from test_handler import speechlike

    from speakerscribe.diarization.pyannote_pipeline import build

    pipeline = build(Pipeline.from_pretrained(random_models.pipeline))
    reference = Pipeline.from_pretrained(random_models.pipeline)
    audio = torch.from_numpy(speechlike(23.0))[None]
    file = {"waveform": audio, "sample_rate": 16000, "uri": "x"}
    seg = pipeline.get_segmentations(file)
    from pyannote.audio.utils.signal import binarize

    binary = seg if pipeline._segmentation.model.specifications.powerset else binarize(seg)
    ours = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    theirs = reference.get_embeddings(file, binary, exclude_overlap=True)
    assert ours.shape == theirs.shape
    assert np.isfinite(ours).all()
    assert pipeline.last_frames.shape[1] == -(-audio.shape[1] // FRAME_HOP)  # kept for the second pass


def test_clustering_links_at_most_max_embeddings_evenly_spaced(random_models):
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.pyannote_pipeline import build

    assert evenly_spaced(10, 10) is None
    keep = evenly_spaced(100, 7)
    assert len(keep) == 7 and keep[0] == 0 and keep[-1] == 99 and np.all(np.diff(keep) >= 14)
    pipeline = build(Pipeline.from_pretrained(random_models.pipeline), max_embeddings=5)
    rng = np.random.default_rng(0)
    embeddings = rng.standard_normal((40, 3, 8)).astype(np.float32)  # (chunks, local speakers, dimension)
    from pyannote.core import SlidingWindow, SlidingWindowFeature

    turns = np.zeros((40, 48, 3), dtype=np.float32)
    for k in range(3):  # each local speaker talks alone for a third of every chunk
        turns[:, 16 * k : 16 * (k + 1), k] = 1.0
    active = SlidingWindowFeature(turns, SlidingWindow(duration=10.0, step=1.0))
    chosen, chunk_idx, speaker_idx = pipeline.clustering.filter_embeddings(embeddings, active)
    assert len(chosen) == 5 and np.all(np.diff(chunk_idx) >= 0)  # in time order
    np.testing.assert_array_equal(chosen, embeddings[chunk_idx, speaker_idx])
    from pyannote.audio.pipelines.clustering import KMeansClustering

    other = Pipeline.from_pretrained(random_models.pipeline)
    other.clustering = KMeansClustering()
    build(other, max_embeddings=5)
    assert isinstance(other.clustering, KMeansClustering) and other.clustering.max_embeddings == 5
    assert len(other.clustering.filter_embeddings(embeddings, active)[0]) == 5
    unbounded = build(Pipeline.from_pretrained(random_models.pipeline), max_embeddings=10_000)
    assert len(unbounded.clustering.filter_embeddings(embeddings, active)[0]) == 120


def test_file_frames_cover_the_whole_file_in_order(random_models):
    from pyannote.audio import Model

    model = Model.from_pretrained(random_models.pipeline, subfolder="embedding").eval()
    samples = 16000 * 25 + 123
    wave = torch.randn(1, samples) * 0.1
    with torch.inference_mode():
        frames = file_frames(model, wave, block_s=10.0, context_s=2.5)
    assert frames.shape == (model.campplus.channels, -(-samples // FRAME_HOP))
    assert torch.isfinite(frames).all()
    # a block computed alone (with the same context) gives the same frames as inside the whole file
    with torch.inference_mode():
        alone = file_frames(model, wave[:, : 16000 * 15], block_s=10.0, context_s=2.5)
    torch.testing.assert_close(frames[:, :400], alone[:, :400], rtol=1e-4, atol=1e-4)


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.slow
def test_resnet_shared_frames_give_pyannotes_embeddings_and_labels(resnet_pipeline, ami_folder):
    """Real speech (16 s of an AMI meeting), windows every 5 s (starting on both trunk phases), the random ResNet34:
    every active (window, speaker) embedding within cosine 0.99 of pyannote's own, and the same labelled turns."""
    import soundfile as sf
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.diarization.pyannote_pipeline import SharedFrameDiarization, build
    from speakerscribe.runtime import Placement

    samples, rate = sf.read(ami_folder / "dev00.wav", dtype="float32")
    file = {"waveform": torch.from_numpy(samples[: 16 * rate])[None], "sample_rate": rate}
    ours, theirs = build(Pipeline.from_pretrained(resnet_pipeline)), Pipeline.from_pretrained(resnet_pipeline)
    assert type(ours) is SharedFrameDiarization and type(theirs) is not SharedFrameDiarization
    seen = {}
    for name, pipeline in (("ours", ours), ("theirs", theirs)):
        real = pipeline.get_embeddings

        def recording(*args, _name=name, _real=real, **kwargs):
            seen[_name] = _real(*args, **kwargs)
            return seen[_name]

        pipeline.get_embeddings = recording
    out_ours, out_theirs = ours(dict(file)), theirs(dict(file))
    active = ~np.isnan(seen["theirs"]).any(-1) & (np.abs(seen["theirs"]).sum(-1) > 0)
    cosine = (_unit(seen["ours"]) * _unit(seen["theirs"])).sum(-1)[active]
    assert cosine.size >= 4 and cosine.min() >= 0.99 and np.median(cosine) >= 0.999, cosine
    assert ours.last_frames is None  # only CAM++ frames are kept (second pass, naming)
    turns = [(round(s.start, 3), round(s.end, 3), k) for s, _, k in out_ours.speaker_diarization.itertracks(True)]
    reference = [(round(s.start, 3), round(s.end, 3), k) for s, _, k in out_theirs.speaker_diarization.itertracks(True)]
    assert turns and turns == reference
    diarizer = SpeakerDiarizer.from_pipeline(
        Pipeline.from_pretrained(resnet_pipeline), Placement("cpu", "float32", "sdpa")
    )
    assert isinstance(diarizer.pipeline, SharedFrameDiarization) and not diarizer.shared_frames


def test_resnet_trunk_in_blocks_equals_the_trunk_over_the_whole_input(resnet_pipeline):
    """Blocks with CONTEXT fbank frames on each side give the frames of one pass over everything; without the
    context they do not (so the comparison can tell)."""
    from pyannote.audio import Model

    from speakerscribe.diarization import resnet_frames as rf

    model = Model.from_pretrained(resnet_pipeline, subfolder="embedding").eval()
    fbank = torch.randn(700, 80)
    with torch.inference_mode():
        whole = rf.trunk_frames(model, fbank, block=10_000).float()
        blocks = rf.trunk_frames(model, fbank, block=200, batch=2).float()
        bare = rf.trunk_frames(model, fbank, block=200, context=0).float()
    assert whole.shape == blocks.shape == (256 * 10, 700 // rf.TIME_STRIDE + (700 % rf.TIME_STRIDE > 0))
    torch.testing.assert_close(blocks, whole, rtol=2e-3, atol=2e-3 * whole.abs().max().item())
    assert (bare - whole).abs().max() > 0.05 * whole.abs().max()
