"""The automatic precision on a CPU: bfloat16 where the CPU multiplies it natively, float32 elsewhere; and
bfloat16 Whisper writes the same words as float32 on real weights, so the choice is about speed, not output."""

from __future__ import annotations

import pytest
from conftest import make_handler

from speakerscribe import runtime
from speakerscribe_dev.conversation import MEETING, synthesize
from speakerscribe_dev.evaluation import normalise, wer


def cpuinfo(tmp_path, flags: str):
    path = tmp_path / "cpuinfo"
    path.write_text(f"processor\t: 0\nvendor_id\t: GenuineIntel\nflags\t\t: {flags}\n\nprocessor\t: 1\n")
    return str(path)


@pytest.mark.parametrize(
    ("flags", "native"),
    [
        ("fpu sse2 avx2 fma avx512f avx512bw avx512_bf16 avx512_vnni", True),  # Cooper Lake, Zen 4
        ("fpu sse2 avx2 avx512f avx512bw amx_bf16 amx_tile amx_int8", True),  # Sapphire Rapids
        ("fpu sse2 avx2 fma avx512f avx512bw avx512_vnni", False),  # Cascade Lake: emulated, slower than float32
        ("fpu sse2 avx2 fma", False),
        ("fpu sse2 avx2 avx512_bf16x", False),  # whole flags only
    ],
)
def test_native_bf16_is_read_from_the_cpu_flags(tmp_path, flags, native):
    assert runtime.cpu_has_native_bf16(cpuinfo(tmp_path, flags)) is native


def test_unreadable_cpu_flags_mean_float32(tmp_path):
    assert runtime.cpu_has_native_bf16(str(tmp_path / "missing")) is False
    (tmp_path / "empty").write_text("processor\t: 0\n")
    assert runtime.cpu_has_native_bf16(str(tmp_path / "empty")) is False


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("torch_version", ["2.14.1+cpu", "2.15.0", "2.8.0+cpu", "2.13.9"])
def test_auto_dtype_on_a_cpu_follows_native_bf16_and_the_torch_version(monkeypatch, native, torch_version):
    import torch

    monkeypatch.setattr(runtime, "cpu_has_native_bf16", lambda *a: native)
    monkeypatch.setattr(torch, "__version__", torch_version)
    recent = torch_version.startswith(("2.14", "2.15"))  # bfloat16 on 2.8 cost AMI coverage (runtime.py)
    assert runtime.resolve_placement("cpu", "auto").dtype_name == ("bfloat16" if native and recent else "float32")
    # an explicit choice is kept either way
    assert runtime.resolve_placement("cpu", "float32").dtype_name == "float32"
    assert runtime.resolve_placement("cpu", "bfloat16").dtype_name == "bfloat16"


@pytest.mark.slow
def test_bf16_whisper_writes_the_float32_words_on_real_weights(real_models, speech_dir):
    """Both precisions, explicitly (so it runs on every CPU; emulated bfloat16 is only slower): the festival
    meeting's words through the whole handler. Measured with benchmarks/peers.py: tiny.en WER 0.049 float32,
    0.046 bfloat16 on 6.9 min of conversation."""
    conv = synthesize(MEETING, speech_dir, "meeting")
    texts = {}
    for dtype in ("float32", "bfloat16"):
        handler = make_handler(ASR_MODEL=str(real_models / "whisper-tiny.en"), TORCH_DTYPE=dtype)
        assert handler.transcriber.models.placement.dtype_name == dtype
        texts[dtype] = handler({"inputs": conv.wav.read_bytes()})["text"]
    assert wer(conv.reference_text, texts["bfloat16"]) <= 0.10  # the float32 limit of test_real_models
    # the two agree word for word but for a few roundings (measured 0 of 84 here)
    assert wer(normalise(texts["float32"]), normalise(texts["bfloat16"])) <= 0.05
