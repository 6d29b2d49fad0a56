"""Synthetic conversations with known truth, spoken by two festival voices (US male diphone, US female HTS).

Every turn is synthesised on its own, resampled to 16 kHz and placed after a chosen pause, so the true turn times
follow from the clip lengths. Results are cached by content: the same script gives the same files.

Needs Debian's festival: ``apt-get install -y --no-install-recommends festival festvox-kallpc16k festvox-kdlpc16k
festvox-us-slt-hts festvox-italp16k`` (the last one, an Italian female voice "I", only for language-detection tests).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from speakerscribe.records import SAMPLE_RATE

VOICES = {
    "A": "(voice_kal_diphone)",  # US male, diphone
    "B": "(voice_cmu_us_slt_arctic_hts)",  # US female, HTS
    "C": "(voice_ked_diphone)",  # a second US male diphone voice: the hard pair with "A"
    "I": "(voice_lp_diphone)",  # Italian female (language detection)
}
SYNTH_WORKERS = 4  # festival processes at once (each mostly start-up: more than the cores pays)
FESTIVAL_HINT = (
    "festival is needed to synthesise test speech: apt-get install -y --no-install-recommends "
    "festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts festvox-italp16k"
)


@dataclass(frozen=True)
class Line:
    speaker: str  # "A" (male) or "B" (female)
    text: str
    pause_after: float = 0.6


@dataclass(frozen=True)
class TrueTurn:
    speaker: str
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Conversation:
    wav: Path
    turns: tuple[TrueTurn, ...]
    duration: float

    @property
    def reference_text(self) -> str:
        return " ".join(t.text for t in self.turns)

    def rttm(self, uri: str = "conversation") -> str:
        return "".join(
            f"SPEAKER {uri} 1 {t.start:.3f} {t.end - t.start:.3f} <NA> <NA> {t.speaker} <NA> <NA>\n" for t in self.turns
        )


def _speak(text: str, voice: str, out: Path) -> np.ndarray:
    """One line spoken by festival into ``out``, read back at 16 kHz mono."""
    import soundfile as sf

    from speakerscribe.audio.decode import resample

    subprocess.run(["text2wave", "-eval", voice, "-o", str(out)], input=text.encode(), check=True, capture_output=True)
    samples, rate = sf.read(str(out), dtype="float32", always_2d=True)
    return resample(samples.mean(axis=1), rate)


def synthesize(lines: list[Line], out_dir: str | Path, name: str, lead_in: float = 0.5) -> Conversation:
    """Speak ``lines`` into ``out_dir/name.wav`` (16 kHz, 16-bit) with ``name.json`` holding the true turns."""
    import soundfile as sf

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(json.dumps([asdict(x) for x in lines] + [lead_in]).encode()).hexdigest()[:16]
    wav, meta = out / f"{name}.wav", out / f"{name}.json"
    if wav.is_file() and meta.is_file():
        data = json.loads(meta.read_text())
        if data.get("key") == key:
            return Conversation(wav, tuple(TrueTurn(**t) for t in data["turns"]), data["duration"])
    pieces = [np.zeros(int(lead_in * SAMPLE_RATE), dtype=np.float32)]
    turns: list[TrueTurn] = []
    t = lead_in
    if shutil.which("text2wave") is None:
        raise RuntimeError(FESTIVAL_HINT)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(SYNTH_WORKERS) as pool:
        # one festival process per line, a few at once: festival's start-up (process and voice loading) is most of
        # a line's time, and the clips are the same whatever the order they are made in
        clips = pool.map(
            lambda item: _speak(item[1].text, VOICES[item[1].speaker], Path(tmp) / f"turn{item[0]}.wav"),
            enumerate(lines),
        )
        for line, clip in zip(lines, clips, strict=True):
            clip = _trim(clip)
            pieces.append(clip)
            turns.append(TrueTurn(line.speaker, round(t, 3), round(t + len(clip) / SAMPLE_RATE, 3), line.text))
            t += len(clip) / SAMPLE_RATE
            gap = np.zeros(int(line.pause_after * SAMPLE_RATE), dtype=np.float32)
            pieces.append(gap)
            t += len(gap) / SAMPLE_RATE
    audio = np.concatenate(pieces)
    audio = 0.8 * audio / max(1e-6, float(np.abs(audio).max()))
    sf.write(str(wav), audio, SAMPLE_RATE, subtype="PCM_16")
    duration = round(len(audio) / SAMPLE_RATE, 3)
    meta.write_text(json.dumps({"key": key, "duration": duration, "turns": [asdict(x) for x in turns]}, indent=1))
    return Conversation(wav, tuple(turns), duration)


def _trim(clip: np.ndarray, threshold: float = 0.01) -> np.ndarray:
    """Cut leading/trailing near-silence that festival adds, so the true turn times are the spoken times."""
    loud = np.flatnonzero(np.abs(clip) > threshold * max(1e-6, float(np.abs(clip).max())))
    if loud.size == 0:
        return clip
    return clip[max(0, loud[0] - 80) : loud[-1] + 80]


# ------------------------------------------------------------------------------------------------ scripts
MEETING = [
    Line("A", "Good morning everyone, thanks for joining the call today."),
    Line("B", "Morning. Happy to be here."),
    Line("A", "Let us start with the budget review for the third quarter."),
    Line("B", "Okay.", 0.5),
    Line("A", "Revenue grew by twelve percent, while costs stayed flat."),
    Line("B", "That is great news. What about the marketing spend?"),
    Line("A", "Marketing went up slightly, because of the new campaign."),
    Line("B", "Right, I remember that. The campaign brought in many new customers.", 0.8),
    Line("A", "Exactly. So next quarter we want to hire two more engineers."),
    Line("B", "Sounds good. Let us meet on Thursday to finalise the plan."),
]

_SENTENCES_A = [
    "The project started in the spring with a small team of four people.",
    "We moved the servers to a new data centre last month.",
    "Our customers asked for faster delivery and better support.",
    "I think the new design is much easier to use.",
    "The report will be ready by the end of the week.",
    "We should test the system before the release.",
    "Last year the company opened an office in the north.",
    "The training session went well and everyone learned a lot.",
    "I will send the numbers to the whole team tomorrow morning.",
    "The weather was terrible, so the flight was delayed by two hours.",
    "We need a clear plan for the next six months.",
    "The budget for travel is smaller than last year.",
]
_SENTENCES_B = [
    "That makes sense to me.",
    "How many people are working on it now?",
    "I agree, the old version was confusing.",
    "Can you share the slides after the meeting?",
    "We had a similar problem with the database.",
    "What did the customers say about the price?",
    "I can help with the testing if you need me.",
    "Let us keep the meeting short today.",
    "The new office looks very nice in the photos.",
    "Who is responsible for the documentation?",
    "I will book a room for the workshop.",
    "Please remind me to call the supplier.",
]
_BACKCHANNELS = ["Uh huh.", "Right.", "Okay.", "Yes.", "I see."]

# Three people, two of them male diphone voices (A and C) that are much closer to each other than to B.
THREE_SPEAKERS = [
    Line("A", "Thanks for coming. We have three items on the agenda this afternoon."),
    Line("C", "Before we start, I moved the review to next Tuesday."),
    Line("B", "That works for me. Who is taking the notes today?"),
    Line("C", "I can take them, and I will send them out tonight."),
    Line("A", "Good. The first item is the new office in the north."),
    Line("B", "The lease is signed, and the furniture arrives next week."),
    Line("C", "The network will be ready on Monday, if the supplier is on time."),
    Line("A", "And the second item is hiring for the support team."),
    Line("C", "We interviewed five people and two of them were excellent."),
    Line("B", "Let us make both offers before the end of the month."),
    Line("A", "Agreed. The last item is the budget for next year."),
    Line("C", "I will prepare the numbers and share them on Friday."),
]


def long_conversation(
    n_lines: int, seed: int = 0, backchannel_every: int = 5, pauses: tuple[float, float] = (0.4, 1.2)
) -> list[Line]:
    """A deterministic two-speaker script of ``n_lines`` turns: long statements, questions, back-channels.

    ``pauses``: range of the silence after each turn; short pauses make Whisper put two speakers in one segment.
    """
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        speaker = "A" if i % 2 == 0 else "B"
        if speaker == "B" and backchannel_every and (i // 2) % backchannel_every == backchannel_every - 1:
            text = rng.choice(_BACKCHANNELS)  # every n-th reply of B is a short back-channel
        else:
            pool = _SENTENCES_A if speaker == "A" else _SENTENCES_B
            text = rng.choice(pool)
            if speaker == "A" and rng.random() < 0.5:
                text += " " + rng.choice(_SENTENCES_A)
        lines.append(Line(speaker, text, round(rng.uniform(*pauses), 2)))
    return lines
