"""Throughput and short-clip latency on a GPU without downloaded weights: random weights in the real Whisper
large-v3 and large-v3-turbo architectures, every 30 s window forced to decode exactly ``--tokens`` tokens, our
engine side by side with the original approach (the transformers ASR pipeline, chunk 30, batch 24) in one run.

    python benchmarks/gpu_floor.py --tokenizer .gpu/tokenizer --arch large-v3 --minutes 60 --batch 24 64
    python benchmarks/gpu_floor.py --tokenizer models/whisper-base --arch tiny --minutes 1   # CPU smoke run

``--tokenizer``: a folder with a multilingual Whisper tokenizer (tokenizer.json, tokenizer_config.json); the
prepared ``models/whisper-base`` has one (copy those two files, ~4 MB, to carry them to a GPU machine).
Prints a table and, with ``--results``, appends it to benchmarks/RESULTS.md with the date, hardware and command.
"""

from __future__ import annotations

import argparse
import datetime as dt
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

ARCHS = {
    # d_model, encoder layers, decoder layers, heads, ffn, mel bins
    "large-v3": (1280, 32, 32, 20, 5120, 128),
    "large-v3-turbo": (1280, 32, 4, 20, 5120, 128),
    "distil-large-v3": (1280, 32, 2, 20, 5120, 128),
    "tiny": (384, 4, 4, 6, 1536, 80),
}


def random_whisper(arch: str, tokenizer_dir: Path, device: str, dtype):
    import torch
    from transformers import (
        AutoTokenizer,
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
    )

    d_model, enc, dec, heads, ffn, mels = ARCHS[arch]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    gen = (
        GenerationConfig.from_pretrained(tokenizer_dir) if (tokenizer_dir / "generation_config.json").exists() else None
    )
    vocab = tokenizer.get_vocab()
    config = WhisperConfig(
        vocab_size=max(51865, len(vocab)),
        d_model=d_model,
        encoder_layers=enc,
        decoder_layers=dec,
        encoder_attention_heads=heads,
        decoder_attention_heads=heads,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        num_mel_bins=mels,
        decoder_start_token_id=vocab["<|startoftranscript|>"],
        eos_token_id=vocab["<|endoftext|>"],
        pad_token_id=vocab["<|endoftext|>"],
        bos_token_id=vocab["<|endoftext|>"],
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = WhisperForConditionalGeneration(config).to(dtype).eval()
    if gen is not None:
        model.generation_config = gen
    model.generation_config.alignment_heads = [[dec - 1, 0]]
    return model, WhisperFeatureExtractor(feature_size=mels), tokenizer


def decode_with_generate(engine) -> None:
    """``engine`` decodes its windows with transformers' ``generate`` (the path of the draft model and the static
    cache) instead of the tight loop: the two loops side by side in one run, the same windows and token counts."""
    import torch

    from speakerscribe.asr import decoding

    def generate(encoder_outputs, prompt, assistant=None, temperature=0.0, check=None):
        batch = encoder_outputs.last_hidden_state.shape[0]
        ids = torch.tensor([prompt], device=engine.placement.device, dtype=torch.long).repeat(batch, 1)
        limit = engine.model.config.max_target_positions - 1
        new_tokens = min(engine.max_new_tokens or limit, limit - len(prompt))
        return decoding.generate_with_transformers(engine, encoder_outputs, ids, new_tokens, assistant, temperature)

    engine.generate = generate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokenizer", type=Path, required=True)
    parser.add_argument("--arch", choices=sorted(ARCHS), default="large-v3", nargs="+")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--tokens", type=int, default=112, help="tokens decoded per 30 s window")
    parser.add_argument("--batch", type=int, nargs="+", default=[24])
    parser.add_argument("--static-cache", action="store_true", help="also run our static-cache (compiled) path")
    parser.add_argument("--skip-original", action="store_true")
    parser.add_argument("--static-only", action="store_true", help="only our static-cache (compiled) path")
    parser.add_argument(
        "--also-generate", action="store_true", help="also ours with transformers' generate instead of the tight loop"
    )
    parser.add_argument(
        "--original-minutes", type=float, default=None, help="time the original approach on this much (default all)"
    )
    parser.add_argument("--clip-seconds", type=float, default=8.0)
    parser.add_argument("--clip-repeats", type=int, default=10)
    parser.add_argument("--results", type=Path, default=None, help="append the table to this markdown file")
    args = parser.parse_args()

    import torch
    from transformers import pipeline

    from speakerscribe.asr.engine import WhisperEngine
    from speakerscribe.models.settings import InferenceConfig
    from speakerscribe.pipeline import Models, Transcriber
    from speakerscribe.records import Waveform
    from speakerscribe.runtime import resolve_placement

    placement = resolve_placement()
    device = placement.device
    rng = np.random.default_rng(0)
    samples = (0.1 * rng.standard_normal(int(args.minutes * 60 * 16000))).astype(np.float32)
    clip = samples[: int(args.clip_seconds * 16000)].copy()
    duration = len(samples) / 16000
    hardware = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "CPU"
    lines = [
        f"### {dt.date.today()} - {hardware} - torch {torch.__version__} - {placement.dtype_name}",
        "",
        f"`{' '.join(sys.argv)}`",
        "",
        f"{duration / 60:.0f} min of audio, {args.tokens} tokens forced per 30 s window, greedy, random weights.",
        "",
        "| arch | system | batch | RTFx (audio s / wall s) | ratio vs original | 8 s clip p50 ms | peak GiB |",
        "|---|---|---|---|---|---|---|",
    ]

    def sync():
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def reset_peak():
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def peak() -> str:
        return f"{torch.cuda.max_memory_allocated() / 2**30:.1f}" if torch.cuda.is_available() else "-"

    original = samples[: int((args.original_minutes or args.minutes) * 60 * 16000)]
    original_duration = len(original) / 16000

    for arch in args.arch:
        model, fe, tok = random_whisper(arch, args.tokenizer, device, placement.dtype)
        baseline_rtf = None
        if not args.skip_original:
            asr = pipeline(
                "automatic-speech-recognition",
                model=model,
                tokenizer=tok,
                feature_extractor=fe,
                device=device,
                dtype=placement.dtype,
            )
            kwargs = {"min_new_tokens": args.tokens, "max_new_tokens": args.tokens}
            asr(clip.copy(), chunk_length_s=30, batch_size=24, return_timestamps=True, generate_kwargs=kwargs)
            sync()
            reset_peak()
            t0 = time.perf_counter()
            asr(original.copy(), chunk_length_s=30, batch_size=24, return_timestamps=True, generate_kwargs=kwargs)
            sync()
            baseline_rtf = original_duration / (time.perf_counter() - t0)
            baseline_peak = peak()
            lat = []
            for _ in range(args.clip_repeats):
                t0 = time.perf_counter()
                asr(clip.copy(), chunk_length_s=30, batch_size=24, return_timestamps=True, generate_kwargs=kwargs)
                sync()
                lat.append(time.perf_counter() - t0)
            lines.append(
                f"| {arch} | original (pipeline, {original_duration / 60:.1f} min) | 24 | {baseline_rtf:.0f} | 1.0 | "
                f"{statistics.median(lat) * 1000:.0f} | {baseline_peak} |"
            )
            print(lines[-1], flush=True)
        modes = [("ours, static cache", True)] if args.static_only else [("ours", False)]
        if args.static_cache and not args.static_only:
            modes.append(("ours, static cache", True))
        if args.also_generate:
            modes.append(("ours, decoding with generate", False))
        for name, static in modes:
            engine = WhisperEngine(model, fe, tok, placement, max_new_tokens=args.tokens, static_cache=static)
            engine.min_new_tokens = args.tokens
            if name.endswith("generate"):
                decode_with_generate(engine)
            ours = Transcriber(Models(engine, None, None, placement))
            for batch in args.batch:
                cfg = InferenceConfig(batch_size=batch, vad_filter=False).to_options()
                t_warm = time.perf_counter()
                if static:
                    engine.warmup(batch)
                ours.run(Waveform(clip), cfg)
                sync()
                warm_s = time.perf_counter() - t_warm
                reset_peak()
                t0 = time.perf_counter()
                result = ours.run(Waveform(samples), cfg)
                sync()
                rtf = duration / (time.perf_counter() - t0)
                run_peak = peak()
                lat = []
                for _ in range(args.clip_repeats):
                    t0 = time.perf_counter()
                    ours.run(Waveform(clip), InferenceConfig(batch_size=1, vad_filter=False).to_options())
                    sync()
                    lat.append(time.perf_counter() - t0)
                ratio = f"{rtf / baseline_rtf:.1f}" if baseline_rtf else "-"
                stages = ", ".join(f"{k} {v:.1f}s" for k, v in result.timings.items() if k.startswith("asr_"))
                lines.append(
                    f"| {arch} | {name} ({stages}; warm-up {warm_s:.0f}s) | {batch} | {rtf:.0f} | {ratio} | "
                    f"{statistics.median(lat) * 1000:.0f} | {run_peak} |"
                )
                print(lines[-1], flush=True)
        del model
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    table = "\n".join(lines) + "\n"
    print(table)
    if args.results:
        with open(args.results, "a") as f:
            f.write("\n" + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
