"""pyannote pipelines in the layouts of the Hub repositories users deploy, with random weights, written into a
Hugging Face cache (``<cache>/models--org--name/refs/main`` + ``snapshots/<revision>/...``, what a download
leaves), so tests resolve them by Hub id with ``HF_HUB_OFFLINE=1`` as a deployment does.

* ``pyannote/speaker-diarization-3.1``: its ``config.yaml`` (agglomerative clustering, no PLDA) naming two more
  repositories, ``pyannote/segmentation-3.0`` and ``pyannote/wespeaker-voxceleb-resnet34-LM``
  (``pytorch_model.bin`` each);
* ``pyannote/speaker-diarization-community-1``: ``config.yaml`` (VBx clustering) and ``segmentation/``,
  ``embedding/``, ``plda/`` in the one repository.

The weights come from a folder written by :func:`speakerscribe_dev.random_models.write_random_pipeline` with
``embedding="wespeaker"`` (a small random PyanNet, a random WeSpeaker ResNet34, an identity PLDA of its size).
"""

from __future__ import annotations

from pathlib import Path

REVISION = "0123456789abcdef0123456789abcdef01234567"  # any commit hash: refs/main points at it

PIPELINE_3_1 = "pyannote/speaker-diarization-3.1"
SEGMENTATION_3_0 = "pyannote/segmentation-3.0"
WESPEAKER = "pyannote/wespeaker-voxceleb-resnet34-LM"
COMMUNITY_1 = "pyannote/speaker-diarization-community-1"

# pyannote/speaker-diarization-3.1's config.yaml as published
CONFIG_3_1 = """version: 3.1.0

pipeline:
  name: pyannote.audio.pipelines.SpeakerDiarization
  params:
    clustering: AgglomerativeClustering
    embedding: pyannote/wespeaker-voxceleb-resnet34-LM
    embedding_batch_size: 32
    embedding_exclude_overlap: true
    segmentation: pyannote/segmentation-3.0
    segmentation_batch_size: 32

params:
  clustering:
    method: centroid
    min_cluster_size: 12
    threshold: 0.7045654963945799
  segmentation:
    min_duration_off: 0.0
"""

# pyannote/speaker-diarization-community-1's config.yaml as published
CONFIG_COMMUNITY_1 = """pipeline:
  name: pyannote.audio.pipelines.SpeakerDiarization
  params:
    clustering: VBxClustering
    segmentation: $model/segmentation
    segmentation_batch_size: 32
    embedding: $model/embedding
    embedding_batch_size: 32
    embedding_exclude_overlap: true
    plda: $model/plda

params:
  clustering:
    threshold: 0.6
    Fa: 0.07
    Fb: 0.8
  segmentation:
    min_duration_off: 0.0
"""


def cache_file(cache: str | Path, repo_id: str, path: str, data: bytes) -> Path:
    """Put ``data`` at ``path`` in ``repo_id``'s snapshot in the Hugging Face cache ``cache`` (HF_HUB_CACHE)."""
    repo = Path(cache) / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(REVISION)
    target = repo / "snapshots" / REVISION / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


def write_3_1(cache: str | Path, weights: str | Path) -> str:
    """speaker-diarization-3.1 and the two repositories its config names; returns its Hub id."""
    weights = Path(weights)
    for repo, sub in ((SEGMENTATION_3_0, "segmentation"), (WESPEAKER, "embedding")):
        cache_file(cache, repo, "pytorch_model.bin", (weights / sub / "pytorch_model.bin").read_bytes())
    cache_file(cache, PIPELINE_3_1, "config.yaml", CONFIG_3_1.encode())
    return PIPELINE_3_1


def write_community_1(cache: str | Path, weights: str | Path, plda: bool = True) -> str:
    """speaker-diarization-community-1 (without its ``plda/`` folder when ``plda`` is false); returns its Hub id."""
    weights = Path(weights)
    cache_file(cache, COMMUNITY_1, "config.yaml", CONFIG_COMMUNITY_1.encode())
    for sub in ("segmentation", "embedding"):
        cache_file(cache, COMMUNITY_1, f"{sub}/pytorch_model.bin", (weights / sub / "pytorch_model.bin").read_bytes())
    if plda:
        for name in ("xvec_transform.npz", "plda.npz"):
            cache_file(cache, COMMUNITY_1, f"plda/{name}", (weights / "plda" / name).read_bytes())
    return COMMUNITY_1
