"""Whisper's decoder stepped by speakerscribe.asr.steps against transformers' decoder, in the same run, interleaved
(these machines are noisy: compare the ratios, not the seconds).

    .venv/bin/python benchmarks/decoder_steps.py [--models whisper-tiny.en whisper-base] [--rows 1 8]
        [--steps 100] [--repeats 5] [--clips 8 30 60] [--requests 3]

Two measurements a model, both with the service's settings (``TORCH_DTYPE=auto``, the step attention):

* decoder steps: the first 30 s of a real recording (below) encoded into ``--rows`` rows, ``--steps`` teacher-forced
  steps (the tokens greedy decoding chose) through each decoder, the median time a step over the repeats, and
  whether every step's hidden states were equal to the last bit;
* whole requests (ASR only, word times): real recordings (the real-voice set, ``data/real_voices``: recorded
  people, one conversation in the room and one over the telephone channel) cut to each of ``--clips`` seconds, each
  request once with the steps and once with transformers' decoder (``DecoderSteps.of`` answering None), alternating,
  the median wall time, and whether the two wrote the same words at the same times.

Exits 1 where the hidden states or the words differ.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


@contextmanager
def transformers_decoder():
    """Within the block the tight loop runs transformers' decoder (the steps answer None)."""
    from speakerscribe.asr.steps import DecoderSteps

    original = DecoderSteps.of
    DecoderSteps.of = classmethod(lambda cls, decoder: None)
    try:
        yield
    finally:
        DecoderSteps.of = original


def step_times(engine, audio, rate: int, rows: int, steps: int, repeats: int) -> dict:
    """Per-step milliseconds of both decoders over the same teacher-forced tokens from ``audio`` (at most 30 s),
    and whether they agreed."""
    import torch

    from speakerscribe.asr.greedy import greedy_decode
    from speakerscribe.asr.steps import DecoderSteps

    features = engine.feature_extractor([audio] * rows, sampling_rate=rate, return_tensors="pt").input_features
    model = engine.model
    with torch.inference_mode():
        states = model.model.encoder(features.to(model.dtype)).last_hidden_state
        prompt = torch.tensor([[engine.sot]] * rows)
        decoded = greedy_decode(model, states, prompt, engine.timestamp_rules, steps, min_new_tokens=steps)
    inputs = [prompt] + [decoded[:, i : i + 1] for i in range(1, decoded.shape[1] - 1)]
    decoder, own = model.model.decoder, DecoderSteps.of(model.model.decoder)
    if own is None:
        raise SystemExit("the steps do not apply to this model here (not a CPU decoder with the step attention)")

    def theirs():
        cache, out = None, []
        for ids in inputs:
            step = decoder(input_ids=ids, encoder_hidden_states=states, past_key_values=cache, use_cache=True)
            cache = step.past_key_values
            out.append(step.last_hidden_state)
        return out

    def ours():
        cache, out = None, []
        for ids in inputs:
            hidden, cache = own(ids, states, cache)
            out.append(hidden)
        return out

    times = {"transformers": [], "steps": []}
    with torch.inference_mode():
        equal = all(torch.equal(a, b) for a, b in zip(theirs(), ours()))
        for _ in range(repeats):
            for name, run in (("transformers", theirs), ("steps", ours)):
                start = time.perf_counter()
                run()
                times[name].append((time.perf_counter() - start) * 1000 / len(inputs))
    return {name: statistics.median(values) for name, values in times.items()} | {"equal": equal}


def recordings(seconds: float) -> list[tuple[str, object, int]]:
    """(name, audio, rate): the first ``seconds`` of the first real-voice conversation long enough, in the room
    and over the telephone channel."""
    import soundfile as sf

    from speakerscribe_dev import real_voices

    folder = real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")
    chosen = []
    for telephone in (False, True):
        for conv in sorted(real_voices.load(folder), key=lambda c: c.uri):
            if ("telephone" in str(conv.wav)) == telephone and conv.uem[1] >= seconds:
                audio, rate = sf.read(str(conv.wav), dtype="float32")
                chosen.append((conv.uri, audio[: int(seconds * rate)], rate))
                break
    if not chosen:
        raise SystemExit(f"no real-voice conversation lasts {seconds:g} s")
    return chosen


def request_times(handler, audio, rate: int, requests: int) -> dict:
    import io

    import soundfile as sf

    buffer = io.BytesIO()
    sf.write(buffer, audio, rate, format="WAV")
    body = {"inputs": buffer.getvalue(), "parameters": {"return_timestamps": "word"}}
    handler(body)  # warm-up
    times, outputs = {"transformers": [], "steps": []}, {}
    for _ in range(requests):
        for name in ("transformers", "steps"):
            start = time.perf_counter()
            if name == "transformers":
                with transformers_decoder():
                    out = handler(body)
            else:
                out = handler(body)
            times[name].append(time.perf_counter() - start)
            outputs[name] = [(w["word"], w["start"], w["end"]) for c in out["chunks"] for w in c.get("words", [])]
    same = outputs["transformers"] == outputs["steps"]
    return {name: statistics.median(values) for name, values in times.items()} | {
        "same": same,
        "words": len(outputs["steps"]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["whisper-tiny.en", "whisper-base"])
    parser.add_argument("--rows", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--clips", nargs="+", type=float, default=[8, 30, 60])
    parser.add_argument("--requests", type=int, default=3)
    args = parser.parse_args(argv)

    from speakerscribe.endpoint import EndpointHandler
    from speakerscribe.models.settings import ModelSettings

    failed = False
    _, step_audio, step_rate = recordings(30)[0]
    print("| model | measured | transformers | steps | transformers / steps | same |")
    print("|---|---|---|---|---|---|")
    for name in args.models:
        settings = ModelSettings.given(asr_model=str(REPO / "models" / name))
        handler = EndpointHandler(settings=settings)  # ASR only: no diarization model
        engine = handler.transcriber.models.asr
        for rows in args.rows:
            t = step_times(engine, step_audio, step_rate, rows, args.steps, args.repeats)
            failed |= not t["equal"]
            print(
                f"| {name} | a step, {rows} row(s) | {t['transformers']:.2f} ms | {t['steps']:.2f} ms "
                f"| {t['transformers'] / t['steps']:.2f} | {'bit-equal' if t['equal'] else 'DIFFER'} |"
            )
        for seconds in args.clips:
            for uri, audio, rate in recordings(seconds):
                r = request_times(handler, audio, rate, args.requests)
                failed |= not r["same"]
                print(
                    f"| {name} | {seconds:g} s of {uri} ({r['words']} words) | {r['transformers']:.3f} s "
                    f"| {r['steps']:.3f} s | {r['transformers'] / r['steps']:.2f} "
                    f"| {'same words' if r['same'] else 'DIFFER'} |"
                )
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
