"""The tight decoding loop (speakerscribe.asr.greedy) against transformers' ``generate``, in the same run, interleaved
(these machines are noisy: compare the ratios, not the seconds).

    .venv/bin/python benchmarks/greedy_loop.py [--models whisper-tiny.en whisper-base] [--batches 1 4 8]
        [--seconds 4 30] [--repeats 3] [--temperature 0]

For each model, window length and batch size: the festival meeting cut into windows of that length, encoded once;
then greedy decoding with timestamps both ways (the engine's loop stop included), the median wall time over the
repeats, the tokens generated, the time per decoding step and the ratio. With ``--temperature`` above 0 both
sample at it (the loop from its own generator, ``generate`` from the global one, both seeded 0), as the engine's
fallbacks do. The token sequences must be identical (the script exits 1 otherwise). CPU, float32, SDPA attention,
all threads torch is given.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


SEED = 0


def tight_loop(engine, states, ids, limit, temperature=0.0):
    import torch

    from speakerscribe.asr.greedy import greedy_decode

    rules, stop = engine.timestamp_rules, engine.ends_in_loop
    generator = torch.Generator().manual_seed(SEED) if temperature > 0 else None
    return greedy_decode(
        engine.model,
        states,
        ids,
        rules,
        limit,
        stop_row=stop,
        projection=engine.projection,
        temperature=temperature,
        generator=generator,
    )


def transformers_generate(engine, states, ids, limit, temperature=0.0):
    """The engine's ``generate`` call before the tight loop (sampling: from the seeded global generator)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        return engine.generate_with_transformers(
            BaseModelOutput(last_hidden_state=states), ids, limit, temperature=temperature
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["whisper-tiny.en", "whisper-base"])
    parser.add_argument("--root", type=Path, default=REPO / "models")
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--seconds", nargs="+", type=float, default=[4.0, 30.0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--temperature", type=float, default=0.0, help="above 0: both sample at it")
    args = parser.parse_args(argv)

    import soundfile as sf
    import torch

    from speakerscribe.asr.engine import WhisperEngine
    from speakerscribe.records import SAMPLE_RATE, Span, Waveform
    from speakerscribe.runtime import resolve_placement
    from speakerscribe_dev.conversation import MEETING, synthesize

    speech = REPO / ".cache" / "speech"
    speech.mkdir(parents=True, exist_ok=True)
    audio, rate = sf.read(str(synthesize(MEETING, speech, "meeting").wav), dtype="float32")
    assert rate == SAMPLE_RATE
    mode = f"sampling at {args.temperature:g}" if args.temperature > 0 else "greedy"
    print(f"threads {torch.get_num_threads()}, meeting {len(audio) / rate:.1f} s, {mode}")
    print("| model | window | batch | generate s | tight loop s | ratio | tokens | ms/step generate | ms/step loop |")
    print("|---|---|---|---|---|---|---|---|---|")
    identical = True
    for name in args.models:
        engine = WhisperEngine.load(str(args.root / name), resolve_placement("cpu"))
        model, eos = engine.model, engine.eos
        prompt = engine.prompt_ids("en", "transcribe")
        for seconds in args.seconds:
            n = int(seconds * rate)
            starts = [s * n for s in range(len(audio) // n)]
            for batch in args.batches:
                windows = [Span(s / rate, (s + n) / rate) for s in starts[:batch]]
                if len(windows) < batch:
                    continue
                with torch.inference_mode():
                    enc = engine.encode(engine.features(Waveform(audio), windows))
                states = enc.last_hidden_state
                ids = torch.tensor([prompt], dtype=torch.long).repeat(batch, 1)
                limit = model.config.max_target_positions - 1 - len(prompt)

                ours = functools.partial(tight_loop, engine, states, ids, limit, args.temperature)
                theirs = functools.partial(transformers_generate, engine, states, ids, limit, args.temperature)
                times = {"theirs": [], "ours": []}
                outputs = {}
                with torch.inference_mode():
                    ours()  # warm-up
                    for _ in range(args.repeats):
                        for key, fn in (("theirs", theirs), ("ours", ours)):
                            t0 = time.perf_counter()
                            outputs[key] = fn()
                            times[key].append(time.perf_counter() - t0)
                same = outputs["ours"].tolist() == outputs["theirs"].tolist()
                identical &= same
                steps = outputs["ours"].shape[1] - len(prompt)
                tokens = int((outputs["ours"][:, len(prompt) :] != eos).sum())
                a, b = statistics.median(times["theirs"]), statistics.median(times["ours"])
                print(
                    f"| {name} | {seconds:g} s | {batch} | {a:.3f} | {b:.3f} | {b / a:.2f} | {tokens} | "
                    f"{1000 * a / max(steps, 1):.1f} | {1000 * b / max(steps, 1):.1f} |"
                    + ("" if same else " **tokens differ**")
                )
                sys.stdout.flush()
    print("identical tokens everywhere" if identical else "TOKENS DIFFER")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
