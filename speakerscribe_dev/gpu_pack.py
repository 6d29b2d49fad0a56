"""The offline models and test audio, packed small enough to travel to a GPU machine that has no network.

A GPU check compares the handler's output on the GPU with its output on this CPU, on the same weights. The prepared
models do not fit the transfer limit (tiny.en alone is 75 MB in float16), so every large weight matrix travels as
int8 with one float32 scale per output row, and BOTH sides run the dequantized weights: the CPU reference is
computed here from the unpacked folders, never from ``models/``. The unpacked weights are a faithful stand-in for
the real ones (per-row int8 rounding), and the comparison is exact in what it compares: the same numbers on two
devices. Every file travels xz-compressed (int8 weights near zero compress to about 5.5 bits: tiny.en 27 MB).

    pack(models, out)          -> out/ (weights as .q8.pt.xz, the other files as .xz, a manifest)
    unpack(pack_dir, dest)     -> dest/whisper-tiny.en, dest/diarization, dest/whisper-base-tokenizer
"""

from __future__ import annotations

import hashlib
import io
import json
import lzma
from pathlib import Path
from typing import Any

MIN_QUANTIZED = 4096  # tensors smaller than this (biases, norms, small convolutions) travel as they are

# what travels, relative to models/: (folder, weight files in it, other files in it)
FOLDERS = {
    "whisper-tiny.en": (
        ["model.safetensors"],
        [
            "config.json",
            "generation_config.json",
            "preprocessor_config.json",
            "tokenizer.json",
            "tokenizer_config.json",
        ],
    ),
    "diarization": (
        ["embedding/pytorch_model.bin"],  # segmentation-3.0 travels exact (6 MB; its LSTM does not shrink)
        ["config.yaml", "segmentation/pytorch_model.bin", "plda/plda.npz", "plda/xvec_transform.npz"],
    ),
    # only the multilingual tokenizer and generation config: the random large-v3-size models are built from them
    "whisper-base": ([], ["tokenizer.json", "tokenizer_config.json", "generation_config.json"]),
}


def quantize(t):
    """A float tensor -> {"q8": int8, "scale": float32 per row, "dtype": name} (rows = first dimension)."""
    import torch

    flat = t.detach().to(torch.float32).reshape(t.shape[0], -1)
    scale = flat.abs().amax(dim=1).clamp_min(1e-12) / 127.0
    q = torch.round(flat / scale[:, None]).clamp(-127, 127).to(torch.int8)
    return {"q8": q.reshape(t.shape), "scale": scale, "dtype": str(t.dtype).removeprefix("torch.")}


def dequantize(packed: dict):
    """The inverse of :func:`quantize`: q * scale in float32, then the tensor's own dtype (deterministic: the same
    bits on every machine)."""
    import torch

    q = packed["q8"]
    flat = q.reshape(q.shape[0], -1).to(torch.float32) * packed["scale"][:, None]
    return flat.reshape(q.shape).to(getattr(torch, packed["dtype"]))


def _is_packed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"q8", "scale", "dtype"}


def _walk(obj: Any, fn) -> Any:
    """``obj`` with every tensor replaced by ``fn(tensor)`` (dicts, lists and tuples followed; packed dicts are
    leaves)."""
    import torch

    if _is_packed(obj) or isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, dict):
        return type(obj)((k, _walk(v, fn)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return type(obj)(_walk(v, fn) for v in obj)
    return obj


def _pack_tensor(t):
    if t.is_floating_point() and t.dim() >= 2 and t.numel() >= MIN_QUANTIZED:
        return quantize(t)
    return t


def _unpack_tensor(t):
    return dequantize(t) if _is_packed(t) else t


def _load_weights(path: Path):
    import torch

    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    return torch.load(str(path), map_location="cpu", weights_only=False)  # our own prepared checkpoint


def _save_weights(obj, path: Path) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in obj.items()}, str(path), metadata={"format": "pt"})
    else:
        torch.save(obj, str(path))


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_xz(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(data, preset=6))


def _read_xz(path: Path) -> bytes:
    return lzma.decompress(path.read_bytes())


def pack(models: Path, out: Path) -> dict:
    """Write the travelling form of ``models`` into ``out``; returns the manifest (also ``out/manifest.json``)."""
    import torch

    out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"folders": {}}
    for folder, (weights, others) in FOLDERS.items():
        entry = {"weights": [], "files": []}
        for name in weights:
            packed = _walk(_load_weights(models / folder / name), _pack_tensor)
            buffer = io.BytesIO()
            torch.save(packed, buffer)
            _write_xz(out / folder / (name + ".q8.pt.xz"), buffer.getvalue())
            entry["weights"].append(name)
        for name in others:
            _write_xz(out / folder / (name + ".xz"), (models / folder / name).read_bytes())
            entry["files"].append(name)
        manifest["folders"][folder] = entry
    manifest["bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    return manifest


def unpack(pack_dir: Path, dest: Path) -> dict[str, Path]:
    """Rebuild the model folders from a pack; returns {folder name: path}. Rebuilds only what changed."""
    import torch

    manifest = json.loads((pack_dir / "manifest.json").read_text())
    stamp = hashlib.sha256((pack_dir / "manifest.json").read_bytes())
    for folder, entry in manifest["folders"].items():
        for name in entry["weights"]:
            stamp.update(sha256(pack_dir / folder / (name + ".q8.pt.xz")).encode())
        for name in entry["files"]:
            stamp.update(sha256(pack_dir / folder / (name + ".xz")).encode())
    key = stamp.hexdigest()
    done = dest / ".unpacked"
    paths = {folder: dest / folder for folder in manifest["folders"]}
    if done.is_file() and done.read_text() == key:
        return paths
    for folder, entry in manifest["folders"].items():
        for name in entry["weights"]:
            raw = io.BytesIO(_read_xz(pack_dir / folder / (name + ".q8.pt.xz")))
            packed = torch.load(raw, map_location="cpu", weights_only=False)  # written by pack() above
            _save_weights(_walk(packed, _unpack_tensor), dest / folder / name)
        for name in entry["files"]:
            (dest / folder / name).parent.mkdir(parents=True, exist_ok=True)
            (dest / folder / name).write_bytes(_read_xz(pack_dir / folder / (name + ".xz")))
    done.write_text(key)
    return paths
