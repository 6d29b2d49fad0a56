"""What travels to a GPU machine (speakerscribe_dev.gpu_pack) and how benchmarks/gpu_check.py compares a GPU answer
with the CPU's: the packed weights come back within half an int8 step of the originals, identical on every unpack,
the other files byte for byte, and the unpacked folders load and transcribe; the comparison finds word edits and
renamed speakers."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import REPO

from speakerscribe_dev import gpu_pack

sys.path.insert(0, str(REPO / "benchmarks"))


def test_int8_rows_round_trip_within_half_a_step():
    import torch

    w = torch.randn(64, 3, 5, generator=torch.manual_seed(0)) * torch.logspace(-3, 1, 64)[:, None, None]
    w[7] = 0.0  # an all-zero row must not divide by zero
    packed = gpu_pack.quantize(w.to(torch.float16))
    back = gpu_pack.dequantize(packed)
    assert packed["q8"].dtype == torch.int8 and back.dtype == torch.float16 and back.shape == w.shape
    step = packed["scale"][:, None, None]
    # half a step of int8 plus float16's own rounding of the result
    err = (back.float() - w.to(torch.float16).float()).abs()
    assert bool((err <= step / 2 + back.float().abs() * 2**-10 + 1e-7).all())
    assert bool((back[7] == 0).all())
    # every row is scaled on its own: the smallest row's error is far below what one scale for all would give
    row_error = float((back[0].float() - w[0].to(torch.float16).float()).abs().max())
    assert row_error < 0.01 * float(w.abs().max()) / 254


@pytest.fixture()
def models_dir(random_models, tmp_path) -> Path:
    """A models/ folder laid out as the set-up lays it out, from the random models."""
    import shutil

    root = tmp_path / "models"
    shutil.copytree(random_models.whisper_en, root / "whisper-tiny.en")
    shutil.copytree(random_models.pipeline, root / "diarization")
    shutil.copytree(random_models.whisper_ml, root / "whisper-base")
    return root


def test_pack_unpack_gives_the_same_folders_within_rounding_and_they_load(models_dir, tmp_path):
    import torch
    from safetensors.torch import load_file

    manifest = gpu_pack.pack(models_dir, tmp_path / "pack")
    files = [p for p in (tmp_path / "pack").rglob("*") if p.is_file() and p.name != "manifest.json"]
    assert manifest["bytes"] == sum(p.stat().st_size for p in files)
    paths = gpu_pack.unpack(tmp_path / "pack", tmp_path / "a")
    again = gpu_pack.unpack(tmp_path / "pack", tmp_path / "b")
    for folder, (weights, others) in gpu_pack.FOLDERS.items():
        for name in others:  # byte for byte
            assert (paths[folder] / name).read_bytes() == (models_dir / folder / name).read_bytes(), name
        for name in weights:  # the same bits on every unpack (float32 products, round-to-nearest casts)
            assert (paths[folder] / name).read_bytes() == (again[folder] / name).read_bytes(), name
    original = load_file(str(models_dir / "whisper-tiny.en" / "model.safetensors"))
    unpacked = load_file(str(paths["whisper-tiny.en"] / "model.safetensors"))
    assert original.keys() == unpacked.keys()
    quantized = 0
    for key, w in original.items():
        u = unpacked[key]
        assert u.dtype == w.dtype and u.shape == w.shape, key
        if w.dim() >= 2 and w.numel() >= gpu_pack.MIN_QUANTIZED:
            quantized += 1
            rows = w.float().reshape(w.shape[0], -1)
            half_step = rows.abs().amax(dim=1, keepdim=True) / 127 / 2
            err = (u.float().reshape(rows.shape) - rows).abs()
            # half an int8 step of the row, plus float16's own rounding of each stored value
            assert bool((err <= half_step + u.float().reshape(rows.shape).abs() * 2**-10 + 1e-7).all()), key
        else:
            assert torch.equal(u, w), key
    assert quantized > 0
    # a second unpack into the same place finds it done and rewrites nothing
    stamp = (paths["whisper-tiny.en"] / "model.safetensors").stat().st_mtime_ns
    gpu_pack.unpack(tmp_path / "pack", tmp_path / "a")
    assert (paths["whisper-tiny.en"] / "model.safetensors").stat().st_mtime_ns == stamp
    # ... and unpacks again when any packed file changed, a configuration file too
    config = tmp_path / "pack" / "whisper-tiny.en" / "config.json.xz"
    gpu_pack._write_xz(config, gpu_pack._read_xz(config).replace(b"{", b"{ ", 1))
    gpu_pack.unpack(tmp_path / "pack", tmp_path / "a")
    assert (paths["whisper-tiny.en"] / "config.json").read_bytes().startswith(b"{ ")

    from gpu_check import handler_for

    handler = handler_for(paths, "cpu", "float32", False)
    from audio_helpers import tone

    out = handler({"inputs": tone(220.0, 4.0, 16000), "parameters": {"vad_filter": False}})
    assert isinstance(out["text"], str) and "speakers" in out


def test_compare_counts_word_edits_and_ignores_how_speakers_are_named():
    from gpu_check import align, compare, without_timings

    cpu = {
        "speakers": [
            {"speaker": "SPEAKER_00", "text": " Hello there, how are you?"},
            {"speaker": "SPEAKER_01", "text": " Fine, thanks."},
        ]
    }
    renamed = {
        "speakers": [
            {"speaker": "SPEAKER_01", "text": " Hello there, how are you?"},
            {"speaker": "SPEAKER_00", "text": " Fine, thanks."},
        ]
    }
    row = compare(cpu, renamed)
    assert row["text_equal"] and row["word_edits"] == 0 and row["speaker_agreement"] == 1.0
    changed = {
        "speakers": [
            {"speaker": "A", "text": " Hello there, how were you?"},
            {"speaker": "A", "text": " Fine, thanks."},
        ]
    }
    row = compare(cpu, changed)
    assert not row["text_equal"] and row["word_edits"] == 1
    assert row["speakers_gpu"] == 1 and row["speaker_agreement"] == pytest.approx(4 / 6, abs=1e-3)
    edits, pairs = align(list("kitten"), list("sitting"))
    assert edits == 3 and len(pairs) == 4
    assert without_timings({"text": "x", "timings": {"asr": 1.0}}) == {"text": "x"}
    assert np.isfinite(row["speaker_agreement"])
