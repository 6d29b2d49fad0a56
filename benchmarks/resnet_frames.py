"""Shared frames for WeSpeaker ResNet34 pipelines: a community-1-shaped pipeline (the real segmentation-3.0, a
random ResNet34 at its real size, VBx with a neutral PLDA, community-1's config) diarizing the same audio with and
without shared frames, in one process, alternating the order (compare the ratio, not the seconds).

    .venv/bin/python benchmarks/resnet_frames.py [--seconds 60] [--repeats 2]

The audio is AMI meeting excerpts (data/ami) joined end to end. Also prints how far the shared-frame embeddings are
from pyannote's own (cosine over active (window, speaker) pairs) and whether the labelled turns are identical.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def meeting_audio(seconds: float, ami: Path) -> np.ndarray:
    import soundfile as sf

    parts, total = [], 0
    for wav in sorted(ami.glob("trn*.wav")):
        samples, _ = sf.read(wav, dtype="float32")
        parts.append(samples)
        total += samples.size
        if total >= seconds * 16000:
            break
    return np.concatenate(parts)[: int(seconds * 16000)]


def recorded(pipeline, store: dict, key: str) -> None:
    """Keep what the pipeline's ``get_embeddings`` returns under ``store[key]``."""
    real = pipeline.get_embeddings

    def recording(*args, **kwargs):
        store[key] = real(*args, **kwargs)
        return store[key]

    pipeline.get_embeddings = recording


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--ami", type=Path, default=REPO / "data" / "ami")
    args = parser.parse_args(argv)

    import torch

    from speakerscribe.runtime import configure_pyannote_environment

    configure_pyannote_environment()
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.pyannote_pipeline import SharedFrameDiarization, build
    from speakerscribe_dev.random_models import write_community1_pipeline

    with tempfile.TemporaryDirectory() as tmp:  # the weights are in memory once loaded: nothing left in /tmp
        folder = write_community1_pipeline(
            Path(tmp) / "community-1", args.models / "diarization" / "segmentation" / "pytorch_model.bin"
        )
        pipelines = {
            "per window": build(Pipeline.from_pretrained(folder), shared_frames=False),
            "shared frames": build(Pipeline.from_pretrained(folder)),
        }
    assert type(pipelines["shared frames"]) is SharedFrameDiarization
    embeddings: dict[str, np.ndarray] = {}
    for name, pipeline in pipelines.items():
        recorded(pipeline, embeddings, name)
    audio = meeting_audio(args.seconds, args.ami)
    file = {"waveform": torch.from_numpy(audio)[None], "sample_rate": 16000}
    print(f"audio {audio.size / 16000:.1f} s (AMI), {torch.get_num_threads()} threads, {args.repeats} repeats")
    wall: dict[str, list[float]] = {n: [] for n in pipelines}
    turns = {}
    ratios = []
    for repeat in range(args.repeats):
        order = list(pipelines) if repeat % 2 == 0 else list(reversed(pipelines))
        for name in order:
            start = time.perf_counter()
            with torch.inference_mode():
                out = pipelines[name](dict(file))
            wall[name].append(time.perf_counter() - start)
            turns[name] = [
                (round(s.start, 3), round(s.end, 3), k) for s, _, k in out.speaker_diarization.itertracks(True)
            ]
        ratios.append(wall["per window"][-1] / wall["shared frames"][-1])
        print(
            f"repeat {repeat}: per window {wall['per window'][-1]:.2f} s, shared frames "
            f"{wall['shared frames'][-1]:.2f} s, ratio {ratios[-1]:.2f}"
        )
    ours, theirs = embeddings["shared frames"], embeddings["per window"]
    active = np.isfinite(theirs).all(-1) & (np.abs(theirs).sum(-1) > 0)
    unit = lambda x: x / np.linalg.norm(x, axis=-1, keepdims=True)  # noqa: E731
    cosine = (unit(ours) * unit(theirs)).sum(-1)[active]
    print(
        f"embeddings: {active.sum()} active (window, speaker) pairs, cosine min {cosine.min():.4f} "
        f"median {np.median(cosine):.4f}"
    )
    print(
        f"labelled turns identical: {turns['per window'] == turns['shared frames']} "
        f"({len(turns['shared frames'])} turns)"
    )
    print(
        f"median wall: per window {statistics.median(wall['per window']):.2f} s, shared frames "
        f"{statistics.median(wall['shared frames']):.2f} s"
    )
    print(f"speed-up (median of per-repeat ratios): {statistics.median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
