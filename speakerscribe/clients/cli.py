"""Command line: transcribe and diarize audio files with the same parameters the endpoint takes.

    python -m speakerscribe.cli meeting.wav [more files] --format txt [--output-dir out/] [--num-speakers 2]

Models come from the same environment variables as the endpoint (ASR_MODEL, ASSISTANT_MODEL, DIARIZATION_MODEL,
...) or from ``--asr-model``/``--assistant-model``/``--diarization-model``. Every request parameter is a flag:
``--batch-size``, ``--return-timestamps word``, ... People known to be in the recording are named with
``--speaker NAME=FILE`` (an audio file of NAME speaking alone; repeatable). Exit status: 0 on success, 2 on bad
input or usage, 1 when a model could not be loaded or processing failed.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any, get_args

from ..errors import InputError, ModelLoadError, SpeakerscribeError
from ..formats import FILE_FORMATS, render
from ..models.settings import InferenceConfig, ModelSettings, parse_parameters
from ..runtime import configure_logging

MODEL_FLAGS = ("asr_model", "assistant_model", "diarization_model")
# parameters that take reference clips: the CLI reads them from files given with --speaker NAME=FILE
CLIP_PARAMETERS = ("known_speakers", "known_speaker_names", "known_speaker_references")


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_parameter_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("request parameters (same names as the endpoint's `parameters`)")
    group.add_argument(
        "--speaker",
        dest="speakers",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="a person known to be in the recording and an audio file of them speaking alone (1-60 s); matching "
        "speakers are labelled NAME instead of SPEAKER_NN (repeatable; needs a diarization model)",
    )
    for name, field in InferenceConfig.model_fields.items():
        if name in CLIP_PARAMETERS:
            continue
        choices = None
        literal = [a for a in get_args(field.annotation) if isinstance(a, str)] if field.annotation else []
        if name in ("task", "return_timestamps"):
            choices = literal or None
        default = field.default
        # values stay strings: pydantic converts and validates them exactly as it does the endpoint's
        group.add_argument(
            _flag(name),
            dest=name,
            default=None,
            choices=choices,
            help=f"{field.description or name} (default: {default})",
        )


def parameters_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return {
        name: getattr(args, name)
        for name in InferenceConfig.model_fields
        if name not in CLIP_PARAMETERS and getattr(args, name) is not None
    }


def known_speakers_from_args(args: argparse.Namespace) -> dict[str, str]:
    """``--speaker NAME=FILE`` flags -> {name: base64 of the file}; InputError for a malformed flag or a missing
    file (the clips themselves are checked as the endpoint checks them)."""
    import base64

    out: dict[str, str] = {}
    for flag in args.speakers:
        name, sep, path = flag.partition("=")
        if not sep or not name.strip() or not path:
            raise InputError(f"--speaker {flag[:100]!r}: use --speaker NAME=FILE (an audio file of NAME alone)")
        if not Path(path).is_file():
            raise InputError(f"--speaker {name.strip()[:80]!r}: no such file: {path[:200]}")
        if name.strip() in out:
            raise InputError(f"--speaker {name.strip()[:80]!r} is given twice")
        out[name.strip()] = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m speakerscribe.cli", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files", nargs="+", type=Path, help="audio files (wav, flac, mp3, ogg, m4a, webm, ...); folders with --endpoint"
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=(*FILE_FORMATS, "all"),
        default="txt",
        help="output format (default: txt); all: every format at once, local files with --output-dir",
    )
    parser.add_argument(
        "--output-dir",
        "-o",
        type=Path,
        default=None,
        help="write <file stem>.<format> here instead of printing to stdout",
    )
    parser.add_argument("--asr-model", default=None, help="overrides ASR_MODEL")
    parser.add_argument("--assistant-model", default=None, help="overrides ASSISTANT_MODEL")
    parser.add_argument("--diarization-model", default=None, help="overrides DIARIZATION_MODEL")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    remote = parser.add_argument_group(
        "remote: send the files to deployed or local endpoints instead of loading models (speakerscribe.clients.batch)"
    )
    remote.add_argument("--endpoint", action="append", default=[], metavar="URL", help="endpoint URL (repeatable)")
    remote.add_argument("--token", default=None, help="bearer token (default: SPEAKERSCRIBE_TOKEN, then HF_TOKEN)")
    remote.add_argument("--concurrency", type=int, default=None, help="files in flight (default: 2 per endpoint)")
    remote.add_argument("--retries", type=int, default=5, help="attempts per file (default 5)")
    remote.add_argument("--request-timeout", type=float, default=3600, help="seconds per request (default 3600)")
    remote.add_argument("--overwrite", action="store_true", help="redo files whose output exists (default: skip)")
    parser.add_argument("--verbose", "-v", action="store_true", help="log model loading and timings")
    add_parameter_flags(parser)
    return parser


class Progress:
    """A one-line progress bar on stderr, driven by the pipeline's stage and batch callbacks."""

    def __init__(self, enabled: bool, label: str):
        self.enabled = enabled and sys.stderr.isatty() or enabled and os.environ.get("SPEAKERSCRIBE_PROGRESS") == "1"
        self.label = label
        self.t0 = time.perf_counter()

    def __call__(self, stage: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        width = 24
        filled = int(width * done / max(1, total))
        elapsed = time.perf_counter() - self.t0
        sys.stderr.write(
            f"\r{self.label}: {stage:<12} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {elapsed:5.1f}s"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(logging.INFO if args.verbose else logging.WARNING, "%(levelname)s %(message)s")
    try:
        known = known_speakers_from_args(args)
        cfg = parse_parameters(parameters_from_args(args) | ({"known_speakers": known} if known else {}))
        options = cfg.to_options()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.format == "all" and (args.endpoint or not args.output_dir):
        print(
            "error: --format all writes one file per format: give --output-dir, and use it without --endpoint "
            "(there choose one format per run)",
            file=sys.stderr,
        )
        return 2
    if args.endpoint:
        return run_remote(args, options, known)
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        print(f"error: no such file: {', '.join(missing)}", file=sys.stderr)
        return 2
    if args.output_dir:
        args.output_dir.mkdir(parents=True, exist_ok=True)

    from ..models.loading import load_transcriber

    # the flags override the environment's ASR_MODEL / ASSISTANT_MODEL / DIARIZATION_MODEL
    overrides = {name: getattr(args, name) for name in MODEL_FLAGS if getattr(args, name)}
    try:
        transcriber = load_transcriber(ModelSettings(**overrides))
    except (ModelLoadError, ValueError, RuntimeError) as exc:
        print(f"error: could not load the models: {exc}", file=sys.stderr)
        return 1
    try:
        references = reference_clips(transcriber, options)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    status = 0
    for path in args.files:
        code = run_file(path, transcriber, options, references, args)
        status = 1 if code == 1 else max(status, code)  # as before: our failure's 1 is the last word
    return status


def run_file(path: Path, transcriber, options, references, args) -> int:
    """One local file through the pipeline, its output written or printed; 0, or the exit status of its error
    (2: the input, 1: our failure), printed to stderr."""
    from ..audio.decode import decode_audio

    progress = Progress(not args.no_progress, path.name)
    try:
        waveform = decode_audio(path.read_bytes()).waveform
        result = transcriber.run(waveform, options, progress=progress, references=references)
    except SpeakerscribeError as exc:
        progress.close()
        print(f"error: {path}: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, InputError) else 1
    progress.close()
    for warning in result.warnings:
        print(f"warning: {path}: {warning}", file=sys.stderr)
    if args.output_dir:
        for fmt in FILE_FORMATS if args.format == "all" else (args.format,):
            text = render(result, fmt, words=options.attribution.show_words, uri=path.stem)
            (args.output_dir / f"{path.stem}.{fmt}").write_text(text, encoding="utf-8")
    else:
        text = render(result, args.format, words=options.attribution.show_words, uri=path.stem)
        if len(args.files) > 1 and args.format == "txt":
            print(f"== {path}")
        sys.stdout.write(text)
    return 0


def reference_clips(transcriber, options):
    """The --speaker clips decoded and checked once, for every file."""
    from ..endpoint import known_references

    if not options.known:
        return ()
    transcriber.check(options)
    return known_references(transcriber, options.known)[0]


def run_remote(args: argparse.Namespace, options, known_speakers: dict[str, str]) -> int:
    """``--endpoint``: the files and folders through remote endpoints, one output per file (see
    speakerscribe.clients.batch)."""
    from ..response import result_from_response
    from .batch import BatchClient, BatchError, InputsError, ProgressLine, expand

    if args.output_dir is None:
        print("error: --endpoint writes one output per file: give --output-dir", file=sys.stderr)
        return 2
    if (args.concurrency is not None and args.concurrency < 1) or args.retries < 1:
        print("error: --concurrency and --retries must be at least 1", file=sys.stderr)
        return 2
    words = options.attribution.show_words

    def render_output(data, item) -> str:
        if args.format == "json":
            import json

            return json.dumps(data, ensure_ascii=False, indent=1) + "\n"
        return render(result_from_response(data), args.format, words=words, uri=item.source.stem)

    token = args.token or os.environ.get("SPEAKERSCRIBE_TOKEN") or os.environ.get("HF_TOKEN") or None
    parameters = {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in parameters_from_args(args).items()}
    try:
        items = expand(args.files, args.output_dir, args.format)
        client = BatchClient(
            args.endpoint,
            token,
            parameters,
            args.concurrency,
            args.retries,
            args.request_timeout,
            render_output,
            known_speakers,
        )
        line = ProgressLine(not args.no_progress)
        outcomes, progress = client.run(items, overwrite=args.overwrite, report=line)
    except InputsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    per_endpoint = ", ".join(f"{e.url}: {e.done}" for e in client.endpoints)
    line.close(f"{progress.line()}; files per endpoint: {per_endpoint}")
    return 1 if any(not o.ok for o in outcomes) else 0


if __name__ == "__main__":
    raise SystemExit(main())
