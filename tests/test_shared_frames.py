"""Shared-frame speaker embeddings: installed only where the model supports it, same shapes as pyannote's."""

from __future__ import annotations

import numpy as np
import torch

from speakerscribe.shared_frames import FRAME_HOP, file_frames, install


def test_installs_on_campplus_pipelines_only(random_models):
    from pyannote.audio import Pipeline

    pipeline = Pipeline.from_pretrained(random_models.pipeline)
    assert install(pipeline)

    class Other:
        _embedding = type("E", (), {"model_": torch.nn.Linear(2, 2)})()

    assert not install(Other())


def test_embeddings_have_pyannotes_shape_and_are_finite(random_models):
    from pyannote.audio import Pipeline
    from test_handler import speechlike

    pipeline = Pipeline.from_pretrained(random_models.pipeline)
    reference = Pipeline.from_pretrained(random_models.pipeline)
    install(pipeline)
    audio = torch.from_numpy(speechlike(23.0))[None]
    file = {"waveform": audio, "sample_rate": 16000, "uri": "x"}
    seg = pipeline.get_segmentations(file)
    from pyannote.audio.utils.signal import binarize

    binary = seg if pipeline._segmentation.model.specifications.powerset else binarize(seg)
    ours = pipeline.get_embeddings(file, binary, exclude_overlap=True)
    theirs = reference.get_embeddings(file, binary, exclude_overlap=True)
    assert ours.shape == theirs.shape
    assert np.isfinite(ours).all()


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
