"""The GPU path, checked and measured in one prepared run on a machine with no network (issue 31's plan).

Here, on the CPU, once (it needs the set-up's models/ and data/, and PyPI for the wheels the GPU machine lacks):

    .venv/bin/python benchmarks/gpu_check.py prepare            # -> .gpu/ (about 60 MB: carry it)

There (``python3`` with torch + CUDA; the wheels installed to a target folder first):

    python3 -m pip install -q --no-index --no-deps --target /tmp/site .gpu/whl/*.whl
    PYTHONPATH=/tmp/site python3 benchmarks/gpu_check.py run --out "$OUT"

Parts, each a row group in ``OUT/gpu_check.jsonl`` (and a log), each bounded in time so one failure or hang leaves
the others' results:

1. ``correctness``: the handler on the GPU (bf16, the GPU default; and float32 with TF32 off) with tiny.en and the
   offline diarizer, on two festival conversations and one AMI excerpt, against the CPU results (float32) that
   ``prepare`` computed from the SAME weights (:mod:`speakerscribe_dev.gpu_pack`: int8-per-row weights, dequantized
   on both machines): word edit distance, speaker agreement on the aligned words, speaker counts, stage times.
2. ``latency``: the live server (``python -m speakerscribe.server``) on the GPU, 8 s and 60 s clips, >= 20 requests
   each, with and without the draft model; p50 / p95. The body is a JSON sample list (the GPU machine has no PyAV:
   its wheel is too large to carry), so the figure includes parsing ~1 MB (8 s) / ~8 MB (60 s) of JSON.
3. ``concurrency``: ``STATIC_CACHE=true MAX_CONCURRENCY=2``: two requests at once answer exactly what they answer one
   after the other.
4. ``live``: one Realtime stream (benchmarks/stream_latency.py): a turn's ``completed`` after the end of speech.
5. ``throughput``: benchmarks/gpu_floor.py: 60 min of audio, random large-v3-size weights, forced token counts, ours
   (batch 24 / 64) and the original approach (the transformers pipeline) in one process; then the static cache +
   compile path (last: its compile time is the unknown).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

PACK = REPO / ".gpu"
WHEELS = [  # what our code imports that the GPU machine's image lacks (its torch, transformers, numpy are used)
    "pyannote.audio==4.0.7 pyannote.core==6.1.0 pyannote.database==6.1.1 pyannote.metrics==4.2.0",
    "pyannote.pipeline==4.1.0 asteroid-filterbanks==0.4.0 torch-audiomentations==0.12.0 julius==0.2.8",
    "torch_pitch_shift==1.2.5 primePy==1.3 pytorch-metric-learning==2.9.0 optuna==5.1.0 colorlog==6.12.0",
    "opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-exporter-otlp==1.45.2",
    "opentelemetry-exporter-otlp-proto-common==1.45.2 opentelemetry-exporter-otlp-proto-http==1.45.2",
    "opentelemetry-proto==1.45.2 opentelemetry-semantic-conventions==0.66b2 googleapis-common-protos==1.76.0",
    "opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-http-transport==0.66b2",
    "pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5",
    "pydantic-settings==2.16.3 python-dotenv==1.2.4 librosa==0.11.0 audioread==3.1.0 soundfile==0.14.0",
    "soxr==1.1.0 pooch==1.9.0 decorator==5.3.1 platformdirs==4.14.9 cffi==2.1.1 pycparser==3.12",
    "silero-vad==6.2.3 starlette==1.10.0 uvicorn==0.55.0 python-multipart==0.0.34 websockets==17.4 sniffio==1.3.1",
]
CLIPS = {"short": 8.0, "long": 60.0}


# ----------------------------------------------------------------------------------------------- prepare (CPU)
def download_wheels(dest: Path) -> None:
    """cp312 manylinux wheels (the GPU image's Python); silero-vad without its ONNX files (only the TorchScript
    model is loaded), so the whole carry stays under the transfer limit."""
    import zipfile

    dest.mkdir(parents=True, exist_ok=True)
    platforms = [f"--platform={p}" for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")]
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
    command += ["--python-version", "3.12", "--implementation", "cp", *platforms, "-d", str(dest)]
    subprocess.run(command + " ".join(WHEELS).split(), check=True)
    for wheel in dest.glob("silero_vad-*.whl"):
        trimmed = wheel.with_suffix(".tmp")
        with zipfile.ZipFile(wheel) as zi, zipfile.ZipFile(trimmed, "w", zipfile.ZIP_DEFLATED) as zo:
            for item in zi.infolist():
                if item.filename.endswith(".onnx"):
                    continue
                data = zi.read(item.filename)
                if item.filename.endswith("RECORD"):
                    data = b"\n".join(line for line in data.split(b"\n") if b".onnx" not in line)
                zo.writestr(item, data)
        trimmed.replace(wheel)


def prepare_audio(dest: Path, live_lines: int) -> None:
    import shutil

    import soundfile as sf

    from speakerscribe_dev.conversation import MEETING, THREE_SPEAKERS, long_conversation, synthesize

    dest.mkdir(parents=True, exist_ok=True)
    speech = REPO / ".cache" / "speech"
    for name, lines in (("festival-meeting", MEETING), ("festival-three", THREE_SPEAKERS)):
        conv = synthesize(lines, speech, f"gpu_{name}")
        shutil.copyfile(conv.wav, dest / f"{name}.wav")
    shutil.copyfile(REPO / "data" / "ami" / "dev00.wav", dest / "ami-dev00.wav")
    live = synthesize(long_conversation(live_lines, seed=11), speech, f"live_{live_lines}")
    shutil.copyfile(live.wav, dest / f"live_{live_lines}.wav")
    shutil.copyfile(live.wav.with_suffix(".json"), dest / f"live_{live_lines}.json")
    a, rate = sf.read(str(dest / "festival-meeting.wav"), dtype="float32")
    b, _ = sf.read(str(dest / "ami-dev00.wav"), dtype="float32")
    sf.write(dest / "clip-short.wav", a[: int(CLIPS["short"] * rate)], rate, subtype="PCM_16")
    long = np.concatenate([b, a, b])  # the AMI excerpt is 30 s
    sf.write(dest / "clip-long.wav", long[: int(CLIPS["long"] * rate)], rate, subtype="PCM_16")


def conversation_files(pack: Path) -> dict[str, Path]:
    return {p.stem: p for p in sorted((pack / "audio").glob("*.wav")) if p.stem.split("-")[0] in ("festival", "ami")}


def read_wav(path: Path) -> np.ndarray:
    import soundfile as sf

    samples, rate = sf.read(str(path), dtype="float32")
    assert rate == 16000, path
    return samples


def handler_for(models: dict[str, Path], device: str, dtype: str, tf32: bool, **extra):
    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings

    settings = ModelSettings.given(
        asr_model=str(models["whisper-tiny.en"]),
        diarization_model=str(models["diarization"]),
        device=device,
        torch_dtype=dtype,
        allow_tf32=tf32,
        **extra,
    )
    return EndpointHandler(settings=settings)


def transcribe_files(handler, files: dict[str, Path]) -> dict[str, dict]:
    from speakerscribe.response import endpoint_response

    out = {}
    for name, path in files.items():
        samples = read_wav(path)
        t0 = time.perf_counter()
        result, options = handler.process({"inputs": samples, "parameters": {}})
        seconds = time.perf_counter() - t0
        response = endpoint_response(result, words=False)
        out[name] = {
            "response": response,
            "seconds": round(seconds, 3),
            "audio_s": round(len(samples) / 16000, 2),
            "timings": {k: round(v, 3) for k, v in result.timings.items()},
        }
    return out


def prepare(args) -> int:
    from speakerscribe_dev.gpu_pack import pack, unpack

    out = args.pack
    if not args.skip_wheels:
        download_wheels(out / "whl")
    manifest = pack(REPO / "models", out / "models")
    prepare_audio(out / "audio", args.live_lines)
    models = unpack(out / "models", REPO / ".cache" / "gpu-models")
    handler = handler_for(models, "cpu", "float32", False)
    reference = transcribe_files(handler, conversation_files(out))
    (out / "cpu_reference.json").write_text(json.dumps(reference, indent=1))
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"{out}: {size / 1e6:.1f} MB (models {manifest['bytes'] / 1e6:.1f} MB); CPU reference:")
    for name, row in reference.items():
        speakers = sorted({e["speaker"] for e in row["response"]["speakers"]})
        print(f"  {name}: {row['audio_s']} s in {row['seconds']} s, {len(speakers)} speakers")
    return 0


# ------------------------------------------------------------------------------------------ comparison helpers
def labelled_words(response: dict) -> list[tuple[str, str]]:
    """(word, speaker) in order, words lower-cased without punctuation."""
    import re

    words = []
    for entry in response.get("speakers") or []:
        for w in re.findall(r"[a-z0-9']+", entry["text"].lower()):
            words.append((w, entry["speaker"]))
    return words


def align(a: list[str], b: list[str]) -> tuple[int, list[tuple[int, int]]]:
    """Word edit distance and the matched index pairs (Levenshtein with a backtrace)."""
    n, m = len(a), len(b)
    d = np.zeros((n + 1, m + 1), dtype=np.int32)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            d[i, j] = min(d[i - 1, j] + 1, d[i, j - 1] + 1, d[i - 1, j - 1] + (a[i - 1] != b[j - 1]))
    pairs, i, j = [], n, m
    while i > 0 and j > 0:
        if d[i, j] == d[i - 1, j - 1] + (a[i - 1] != b[j - 1]):
            if a[i - 1] == b[j - 1]:
                pairs.append((i - 1, j - 1))
            i, j = i - 1, j - 1
        elif d[i, j] == d[i - 1, j] + 1:
            i -= 1
        else:
            j -= 1
    return int(d[n, m]), pairs[::-1]


def compare(cpu: dict, gpu: dict) -> dict:
    """How far the GPU response is from the CPU one: word edits, and of the words both have, the share whose
    speaker is the same after the best one-to-one renaming of the GPU's labels."""
    a, b = labelled_words(cpu), labelled_words(gpu)
    edits, pairs = align([w for w, _ in a], [w for w, _ in b])
    counts: dict[tuple[str, str], int] = {}
    for i, j in pairs:
        counts[(a[i][1], b[j][1])] = counts.get((a[i][1], b[j][1]), 0) + 1
    used_a, used_b, same = set(), set(), 0
    for (sa, sb), c in sorted(counts.items(), key=lambda kv: -kv[1]):
        if sa not in used_a and sb not in used_b:
            used_a.add(sa)
            used_b.add(sb)
            same += c
    return {
        "words_cpu": len(a),
        "words_gpu": len(b),
        "word_edits": edits,
        "text_equal": [w for w, _ in a] == [w for w, _ in b],
        "speaker_agreement": round(same / max(1, len(pairs)), 4),
        "speakers_cpu": len({s for _, s in a}),
        "speakers_gpu": len({s for _, s in b}),
    }


# ---------------------------------------------------------------------------------------------- run (GPU)
class Report:
    def __init__(self, out: Path):
        out.mkdir(parents=True, exist_ok=True)
        self.path = out / "gpu_check.jsonl"

    def add(self, part: str, **row) -> None:
        row = {"part": part, **row}
        print(json.dumps(row), flush=True)
        with open(self.path, "a") as f:
            f.write(json.dumps(row) + "\n")


def part_correctness(report: Report, models, pack: Path, device: str) -> None:
    import torch

    reference = json.loads((pack / "cpu_reference.json").read_text())
    files = conversation_files(pack)
    for dtype, tf32 in (("auto", True), ("float32", False)):
        t0 = time.perf_counter()
        handler = handler_for(models, device, dtype, tf32)
        load_s = time.perf_counter() - t0
        placement = handler.transcriber.models.placement
        transcribe_files(handler, {k: files[k] for k in list(files)[:1]})  # warm-up (CUDA kernels, caches)
        if device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        rows = transcribe_files(handler, files)
        peak = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else None
        for name, row in rows.items():
            report.add(
                "correctness",
                file=name,
                dtype=placement.dtype_name,
                tf32=tf32,
                load_s=round(load_s, 2),
                seconds=row["seconds"],
                cpu_seconds=reference[name]["seconds"],
                audio_s=row["audio_s"],
                timings=row["timings"],
                peak_gib=round(peak, 2) if peak is not None else None,
                **compare(reference[name]["response"], row["response"]),
            )
        del handler
        if device.startswith("cuda"):
            torch.cuda.empty_cache()


def start_server(env: dict, log: Path):
    from k6_bench import free_port, start

    port = free_port()
    command = [sys.executable, "-m", "speakerscribe.server", "--log-level", "warning"]
    return start(command, {**env, "PORT": str(port)}, port, log), f"http://127.0.0.1:{port}"


def stop_server(proc) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def body(samples: np.ndarray, params: dict) -> str:
    return json.dumps({"inputs": np.round(samples, 5).tolist(), "parameters": params})


def post(url: str, samples: np.ndarray | str, params: dict | None = None) -> tuple[float, dict]:
    """One request (``samples`` as a sample array, or a body made by :func:`body`); its seconds and answer."""
    import requests

    data = samples if isinstance(samples, str) else body(samples, params or {})
    t0 = time.perf_counter()
    r = requests.post(url, data=data, headers={"Content-Type": "application/json"}, timeout=300)
    seconds = time.perf_counter() - t0
    r.raise_for_status()
    return seconds, r.json()


def percentiles(values: list[float]) -> dict:
    return {
        "p50_ms": round(float(np.percentile(values, 50)) * 1000, 1),
        "p95_ms": round(float(np.percentile(values, 95)) * 1000, 1),
        "n": len(values),
    }


def base_env(models) -> dict:
    return {
        "ASR_MODEL": str(models["whisper-tiny.en"]),
        "DIARIZATION_MODEL": str(models["diarization"]),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
    }


def part_latency(report: Report, models, pack: Path, out: Path, requests_per_case: int) -> None:
    from speakerscribe.models.whisper_convert import cut_assistant

    draft = models["whisper-tiny.en"].parent / "whisper-tiny.en-draft"
    if not (draft / "config.json").is_file():
        cut_assistant(models["whisper-tiny.en"], draft, 1)
    proc, url = start_server({**base_env(models), "ASSISTANT_MODEL": str(draft)}, out / "server_latency.log")
    try:
        for clip in CLIPS:
            samples = read_wav(pack / "audio" / f"clip-{clip}.wav")
            for assisted in (False, True):
                params = {"assisted": True, "batch_size": 1} if assisted else {"batch_size": 24}
                request = body(samples, params)
                post(url, request)  # warm-up
                times = [post(url, request)[0] for _ in range(requests_per_case)]
                report.add("latency", clip=clip, seconds=CLIPS[clip], assisted=assisted, **percentiles(times))
    finally:
        stop_server(proc)


def part_concurrency(report: Report, models, pack: Path, out: Path) -> None:
    env = {**base_env(models), "STATIC_CACHE": "true", "MAX_CONCURRENCY": "2", "WARMUP_BATCH_SIZE": "24"}
    t0 = time.perf_counter()
    proc, url = start_server(env, out / "server_concurrency.log")
    start_s = time.perf_counter() - t0
    try:
        files = conversation_files(pack)
        names = [n for n in files if n != "festival-three"][:2]
        inputs = {n: read_wav(files[n]) for n in names}
        sequential = {n: post(url, inputs[n], {})[1] for n in names}
        answers: dict[str, dict] = {}
        threads = [
            threading.Thread(target=lambda n=n: answers.__setitem__(n, post(url, inputs[n], {})[1])) for n in names
        ]
        t1 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        together_s = time.perf_counter() - t1
        for n in names:
            report.add(
                "concurrency",
                file=n,
                server_start_s=round(start_s, 1),
                together_s=round(together_s, 2),
                identical=without_timings(answers.get(n)) == without_timings(sequential[n]),
                **compare(sequential[n], answers.get(n) or {}),
            )
    finally:
        stop_server(proc)


def without_timings(response: dict | None) -> dict | None:
    """A response without its stage times (which differ between any two runs)."""
    return None if response is None else {k: v for k, v in response.items() if k != "timings"}


def part_live(report: Report, models, pack: Path, out: Path, lines: int, timeout: float) -> None:
    command = [
        sys.executable,
        str(REPO / "benchmarks" / "stream_latency.py"),
        "--models",
        str(models["diarization"].parent),
    ]
    command += ["--model", "whisper-tiny.en", "--streams", "1", "--lines", str(lines), "--audio", str(pack / "audio")]
    run_logged(report, "live", command, out / "live.log", timeout)


def part_throughput(
    report: Report, models, out: Path, arch: str, minutes: float, original_minutes: float, timeout: float
) -> None:
    floor = [sys.executable, str(REPO / "benchmarks" / "gpu_floor.py"), "--tokenizer", str(models["whisper-base"])]
    floor += ["--arch", arch, "--minutes", str(minutes), "--original-minutes", str(original_minutes)]
    plain = floor + ["--batch", "24", "64", "--also-generate", "--clip-repeats", "3"]
    run_logged(report, "throughput", plain, out / "throughput.log", timeout * 0.5)
    run_logged(
        report,
        "throughput-static",
        floor + ["--batch", "24", "64", "--static-only", "--skip-original", "--clip-repeats", "3"],
        out / "throughput_static.log",
        timeout * 0.5,
    )


def run_logged(report: Report, part: str, command: list[str], log: Path, timeout: float) -> None:
    """A benchmark in a process of its own, its output in ``log``; its table lines (and the tail, if it failed) go
    into the report."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        try:
            code = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    text = log.read_text()
    rows = [line for line in text.splitlines() if line.startswith("|") or line.startswith("{")]
    report.add(
        part, exit=code, seconds=round(time.perf_counter() - t0, 1), rows=rows, tail=text[-1500:] if code else ""
    )


def run(args) -> int:
    import torch

    from speakerscribe_dev.gpu_pack import unpack

    report = Report(args.out)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    hardware = torch.cuda.get_device_name(0) if device == "cuda" else "CPU"
    import transformers

    report.add(
        "machine", device=device, hardware=hardware, torch=torch.__version__, transformers=transformers.__version__
    )
    models = unpack(args.pack / "models", Path(args.work) / "models")
    parts = {
        "correctness": lambda: part_correctness(report, models, args.pack, device),
        "latency": lambda: part_latency(report, models, args.pack, args.out, args.requests),
        "concurrency": lambda: part_concurrency(report, models, args.pack, args.out),
        "live": lambda: part_live(report, models, args.pack, args.out, args.live_lines, args.live_timeout),
        "throughput": lambda: part_throughput(
            report, models, args.out, args.arch, args.minutes, args.original_minutes, args.throughput_timeout
        ),
    }
    for name in args.parts:
        t0 = time.perf_counter()
        try:
            parts[name]()
            report.add(name + "-done", seconds=round(time.perf_counter() - t0, 1))
        except Exception as exc:  # one part's failure is a result; the next part still runs
            import traceback

            report.add(name + "-failed", error=f"{type(exc).__name__}: {exc}"[:2000], tb=traceback.format_exc()[-3000:])
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare", help="here, on the CPU: the pack to carry and the CPU reference")
    p.add_argument("--pack", type=Path, default=PACK)
    p.add_argument("--skip-wheels", action="store_true")
    p.add_argument("--live-lines", type=int, default=12)
    r = sub.add_parser("run", help="there, on the GPU")
    r.add_argument("--pack", type=Path, default=PACK)
    r.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", REPO / ".cache" / "gpu-check")))
    r.add_argument("--work", default="/tmp/gpu-check")
    r.add_argument("--parts", nargs="+", default=["correctness", "latency", "concurrency", "live", "throughput"])
    r.add_argument("--requests", type=int, default=20)
    r.add_argument("--live-lines", type=int, default=12)
    r.add_argument("--live-timeout", type=float, default=120)
    r.add_argument("--arch", default="large-v3", help="the random model's architecture (tiny: a CPU smoke run)")
    r.add_argument("--minutes", type=float, default=60)
    r.add_argument("--original-minutes", type=float, default=10)
    r.add_argument("--throughput-timeout", type=float, default=300)
    args = parser.parse_args(argv)
    return prepare(args) if args.command == "prepare" else run(args)


if __name__ == "__main__":
    raise SystemExit(main())
