"""Read CTranslate2 ``model.bin`` files (binary format version 6) into numpy arrays.

Layout, little-endian: ``u32 version``, ``str spec_name``, ``u32 spec_revision``, ``u32 n_variables``, then per
variable ``str name, u8 rank, u32[rank] shape, u8 dtype, u32 n_bytes, bytes``; then ``u32 n_aliases`` and pairs of
``str alias, str target``. A ``str`` is a ``u16`` length that counts a trailing NUL, then the bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}
SUPPORTED_VERSION = 6


class CT2FormatError(ValueError):
    """The file is not a CTranslate2 model this reader understands."""


@dataclass(frozen=True)
class CT2Model:
    spec_name: str
    spec_revision: int
    variables: dict[str, np.ndarray]

    def get(self, name: str) -> np.ndarray:
        try:
            return self.variables[name]
        except KeyError:
            raise CT2FormatError(f"variable {name!r} missing from the CTranslate2 model") from None

    def scalar(self, name: str) -> int:
        return int(self.get(name).reshape(-1)[0])


class _Cursor:
    def __init__(self, buf: memoryview):
        self.buf = buf
        self.off = 0

    def unpack(self, fmt: str):
        size = struct.calcsize("<" + fmt)
        if self.off + size > len(self.buf):
            raise CT2FormatError("truncated CTranslate2 file")
        values = struct.unpack_from("<" + fmt, self.buf, self.off)
        self.off += size
        return values[0] if len(values) == 1 else values

    def string(self) -> str:
        n = self.unpack("H")
        raw = bytes(self.buf[self.off : self.off + n])
        self.off += n
        return raw.rstrip(b"\x00").decode("utf-8")

    def take(self, n: int) -> memoryview:
        if self.off + n > len(self.buf):
            raise CT2FormatError("truncated CTranslate2 file")
        out = self.buf[self.off : self.off + n]
        self.off += n
        return out


def parse_ct2(data: bytes) -> CT2Model:
    """Parse the bytes of a CTranslate2 ``model.bin``; arrays are copied out of ``data``."""
    cur = _Cursor(memoryview(data))
    version = cur.unpack("I")
    if version != SUPPORTED_VERSION:
        raise CT2FormatError(f"CTranslate2 binary version {version}; only {SUPPORTED_VERSION} is supported")
    spec_name = cur.string()
    spec_revision = cur.unpack("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(cur.unpack("I")):
        name = cur.string()
        rank = cur.unpack("B")
        shape = tuple(cur.unpack("I") for _ in range(rank))
        dtype_code = cur.unpack("B")
        n_bytes = cur.unpack("I")
        if dtype_code not in _DTYPES:
            raise CT2FormatError(f"variable {name!r} has unknown dtype code {dtype_code}")
        raw = cur.take(n_bytes)
        array = np.frombuffer(raw, dtype=_DTYPES[dtype_code]).copy()
        expected = int(np.prod(shape)) if shape else 1
        if array.size != expected:
            raise CT2FormatError(f"variable {name!r}: {array.size} values for shape {shape}")
        variables[name] = array.reshape(shape)
    if cur.off < len(cur.buf):
        for _ in range(cur.unpack("I")):
            alias, target = cur.string(), cur.string()
            if target in variables:
                variables[alias] = variables[target]
    return CT2Model(spec_name=spec_name, spec_revision=spec_revision, variables=variables)
