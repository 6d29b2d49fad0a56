"""Merge scaling: 10 hours of synthetic chunks and speaker turns, our overlap merge against the original's
nearest-end argmin merge, in the same run.

    .venv/bin/python benchmarks/merge_scaling.py [--hours 10] [--repeats 5]

Prints the median and minimum seconds of each and the ratio. No models are loaded.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def synthetic(hours: float, seed: int = 0):
    """Whisper-like chunks (2-8 s) and diarizer-like turns (0.3-12 s, 4 speakers, back-channels) over ``hours``."""
    from speakerscribe.records import Chunk, SpeakerTurn

    rng = np.random.default_rng(seed)
    total = hours * 3600
    chunk_bounds = np.cumsum(rng.uniform(2, 8, int(total / 4)))
    chunk_bounds = chunk_bounds[chunk_bounds < total]
    chunks = [
        Chunk(float(a), float(b), f" chunk {i}")
        for i, (a, b) in enumerate(zip(np.concatenate([[0.0], chunk_bounds[:-1]]), chunk_bounds))
    ]
    turn_len = np.where(
        rng.random(int(total / 3)) < 0.15, rng.uniform(0.3, 0.8, int(total / 3)), rng.uniform(1, 12, int(total / 3))
    )
    starts = np.concatenate([[0.0], np.cumsum(turn_len + rng.uniform(0, 0.5, turn_len.size))[:-1]])
    keep = starts < total
    speakers = rng.integers(0, 4, turn_len.size)
    turns = [
        SpeakerTurn(float(s), float(s + d), f"SPEAKER_{k:02d}")
        for s, d, k in zip(starts[keep], turn_len[keep], speakers[keep])
    ]
    return chunks, turns


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from baseline import join_segments, nearest_end_merge

    from speakerscribe.merge import assign, attribute_chunks, timeline_from_arrays

    chunks, turns = synthetic(args.hours)
    chunk_dicts = [{"timestamp": (c.start, c.end), "text": c.text} for c in chunks]
    joined = join_segments((t.start, t.end, t.speaker) for t in turns)

    def clock(fn, repeats):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times), min(times)

    ours_med, ours_min = clock(lambda: attribute_chunks(chunks, turns), args.repeats)
    base_med, base_min = clock(lambda: nearest_end_merge(joined, chunk_dicts), max(1, min(args.repeats, 3)))

    # the assignment kernels alone: arrays in, one speaker per chunk out
    c_start = np.array([c.start for c in chunks])
    c_end = np.array([c.end for c in chunks])
    labels = tuple(sorted({t.speaker for t in turns}))
    index = {label: k for k, label in enumerate(labels)}
    t_start = np.array([t.start for t in turns])
    t_end = np.array([t.end for t in turns])
    t_spk = np.array([index[t.speaker] for t in turns])
    j_end = np.array([j["segment"]["end"] for j in joined])
    j_spk = np.array([index[j["speaker"]] for j in joined])
    kernel_ours, _ = clock(
        lambda: assign(timeline_from_arrays(t_start, t_end, t_spk, labels), c_start, c_end), args.repeats
    )
    kernel_base, _ = clock(lambda: nearest_end_kernel(c_end, j_end, j_spk), max(1, min(args.repeats, 3)))

    print(f"{args.hours:g} h: {len(chunks)} chunks, {len(turns)} turns ({len(joined)} joined)")
    print("| merge | ours (overlap, vectorised) ms | original (nearest-end argmin) ms | speed-up |")
    print("|---|---|---|---|")
    print(
        f"| records in, attributed entries out (median) | {ours_med * 1000:.1f} | {base_med * 1000:.1f} "
        f"| {base_med / ours_med:.0f}x |"
    )
    print(
        f"| arrays in, speaker per chunk out (median) | {kernel_ours * 1000:.2f} | {kernel_base * 1000:.1f} "
        f"| {kernel_base / kernel_ours:.0f}x |"
    )
    print(f"speed-up (median): {base_med / ours_med:.0f}x (records), {kernel_base / kernel_ours:.0f}x (kernels)")
    return 0


def nearest_end_kernel(chunk_ends: np.ndarray, turn_ends: np.ndarray, turn_speakers: np.ndarray) -> np.ndarray:
    """The original merge's loop on arrays: per turn, argmin over the remaining chunk ends, assign up to it."""
    out = np.full(chunk_ends.size, -1)
    pos = 0
    for end, speaker in zip(turn_ends, turn_speakers):
        if pos >= chunk_ends.size:
            break
        upto = pos + int(np.argmin(np.abs(chunk_ends[pos:] - end)))
        out[pos : upto + 1] = speaker
        pos = upto + 1
    return out


if __name__ == "__main__":
    raise SystemExit(main())
