"""Assemble a pyannote.audio 4 ``SpeakerDiarization`` pipeline folder that ``Pipeline.from_pretrained`` loads.

Layout (every path relative, so the folder can move)::

    config.yaml            pipeline class, sub-model locations, clustering hyper-parameters
    segmentation/pytorch_model.bin    pyannote segmentation checkpoint (segmentation-3.0 or random)
    embedding/pytorch_model.bin       CAM++ checkpoint (speakerscribe.diarization.campplus; or WeSpeaker, random)
    plda/xvec_transform.npz, plda/plda.npz

pyannote 4 loads a PLDA whatever the clustering; agglomerative clustering never uses it, so an identity PLDA of the
embedding's dimension is written to satisfy the loader.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

PIPELINE_CLASS = "pyannote.audio.pipelines.SpeakerDiarization"


def lightning_checkpoint(model, pyannote_version: str) -> dict[str, Any]:
    """The dict pyannote's ``Model.from_pretrained`` expects in ``pytorch_model.bin`` for ``model``."""
    import lightning

    return {
        "pytorch-lightning_version": lightning.__version__,
        "state_dict": model.state_dict(),
        "hparams_name": "kwargs",
        "hyper_parameters": dict(model.hparams),
        "pyannote.audio": {
            "versions": {"pyannote.audio": pyannote_version},
            "architecture": {"module": type(model).__module__, "class": type(model).__name__},
            "specifications": model.specifications,
        },
    }


def write_identity_plda(folder: Path, dimension: int, lda_dimension: int = 128) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lda_dim = min(lda_dimension, dimension)
    lda = np.eye(dimension, lda_dim, dtype=np.float64)
    np.savez(folder / "xvec_transform.npz", mean1=np.zeros(dimension), mean2=np.zeros(lda_dim), lda=lda)
    np.savez(folder / "plda.npz", mu=np.zeros(lda_dim), tr=np.eye(lda_dim), psi=np.ones(lda_dim))


def config_yaml(
    *,
    clustering_threshold: float,
    min_cluster_size: int,
    min_duration_off: float,
    segmentation_step: float,
    embedding_batch_size: int,
    segmentation_batch_size: int,
    embedding_exclude_overlap: bool,
    pyannote_version: str,
) -> str:
    return f"""# Written by speakerscribe.models; load with pyannote.audio.Pipeline.from_pretrained(<this folder>)
dependencies:
  pyannote.audio: {pyannote_version}
pipeline:
  name: {PIPELINE_CLASS}
  params:
    segmentation: $model/segmentation
    segmentation_step: {segmentation_step}
    embedding: $model/embedding
    embedding_exclude_overlap: {str(embedding_exclude_overlap).lower()}
    plda: $model/plda
    clustering: AgglomerativeClustering
    embedding_batch_size: {embedding_batch_size}
    segmentation_batch_size: {segmentation_batch_size}
params:
  segmentation:
    min_duration_off: {min_duration_off}
  clustering:
    method: centroid
    min_cluster_size: {min_cluster_size}
    threshold: {clustering_threshold}
"""


def write_pipeline_folder(
    out_dir: str | Path,
    segmentation_checkpoint: bytes,
    embedding_model,
    *,
    clustering_threshold: float = 0.6,
    min_cluster_size: int = 1,
    min_duration_off: float = 0.0,
    segmentation_step: float = 0.1,
    embedding_batch_size: int = 32,
    segmentation_batch_size: int = 32,
    embedding_exclude_overlap: bool = True,
) -> Path:
    """Write the folder; ``segmentation_checkpoint`` is the bytes of a pyannote segmentation ``pytorch_model.bin``."""
    import pyannote.audio
    import torch

    version = pyannote.audio.__version__
    out = Path(out_dir)
    (out / "segmentation").mkdir(parents=True, exist_ok=True)
    (out / "segmentation" / "pytorch_model.bin").write_bytes(segmentation_checkpoint)
    (out / "embedding").mkdir(parents=True, exist_ok=True)
    torch.save(lightning_checkpoint(embedding_model, version), out / "embedding" / "pytorch_model.bin")
    write_identity_plda(out / "plda", embedding_model.dimension)
    (out / "config.yaml").write_text(
        config_yaml(
            clustering_threshold=clustering_threshold,
            min_cluster_size=min_cluster_size,
            min_duration_off=min_duration_off,
            segmentation_step=segmentation_step,
            embedding_batch_size=embedding_batch_size,
            segmentation_batch_size=segmentation_batch_size,
            embedding_exclude_overlap=embedding_exclude_overlap,
            pyannote_version=version,
        )
    )
    return out
