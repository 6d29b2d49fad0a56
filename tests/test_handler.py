"""The handler as the Endpoints runtime loads and calls it, with tiny random models (plumbing, not accuracy)."""

from __future__ import annotations

import base64
import json
import logging
import time

import numpy as np
import pytest
from audio_helpers import tone, wav_bytes
from conftest import REPO, make_handler

from speakerscribe.errors import InputError, ModelLoadError

RATE = 16000


def speechlike(seconds: float, seed: int = 0) -> np.ndarray:
    """Amplitude-modulated harmonic tones: not speech, but audio with structure for plumbing tests."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    f0 = 120 + 40 * np.sin(2 * np.pi * 0.3 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / RATE) / k for k in range(1, 6))
    env = (np.sin(2 * np.pi * 2.5 * t) > -0.3).astype(np.float32)
    return (0.3 * x * env + 0.01 * rng.normal(size=t.size)).astype(np.float32)


@pytest.fixture(scope="module")
def clip() -> bytes:
    return wav_bytes(speechlike(12.0))


def body(audio: bytes, **params):
    return {"inputs": base64.b64encode(audio).decode(), "parameters": params}


def assert_original_shape(response: dict, duration: float):
    assert {"speakers", "chunks", "text"} <= set(response)
    json.dumps(response)  # plain JSON types only
    for c in response["chunks"]:
        assert set(c) >= {"timestamp", "text"}
        s, e = c["timestamp"]
        assert isinstance(s, float) and isinstance(e, float) and 0 <= s <= e <= duration + 1e-6
    for u in response["speakers"]:
        assert set(u) >= {"speaker", "timestamp", "text"} and u["speaker"].startswith("SPEAKER_")
    starts = [c["timestamp"][0] for c in response["chunks"]]
    assert starts == sorted(starts)
    assert response["text"] == "".join(c["text"] for c in response["chunks"])


def test_base64_and_raw_bytes_give_the_same_response(random_handler, clip):
    a = random_handler(body(clip, vad_filter=False))
    b = random_handler({"inputs": clip, "parameters": {"vad_filter": False}})
    assert_original_shape(a, 12.0)
    assert a["chunks"] == b["chunks"] and a["speakers"] == b["speakers"]
    assert a["chunks"], "the random model should emit some text for 12 s of audio with the VAD off"
    assert a["duration"] == pytest.approx(12.0)
    assert [u["text"] for u in a["speakers"]] == [c["text"] for c in a["chunks"]]


def test_body_without_parameters_uses_defaults(random_handler, clip):
    out = random_handler({"inputs": base64.b64encode(clip).decode()})
    assert_original_shape(out, 12.0)


def test_silence_gives_an_empty_result_not_an_error(random_handler):
    out = random_handler(body(wav_bytes(np.zeros(5 * RATE, dtype=np.float32))))
    assert out["speakers"] == [] and out["chunks"] == [] and out["text"] == ""
    assert out["duration"] == pytest.approx(5.0)


def test_zero_length_audio_gives_an_empty_result(random_handler):
    import io

    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.zeros(0, dtype=np.float32), RATE, format="WAV", subtype="PCM_16")
    out = random_handler(body(buf.getvalue()))
    assert out["chunks"] == [] and out["speakers"] == [] and out["duration"] == 0.0


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"inputs": ""}, "empty"),
        ({"inputs": "%%%not base64%%%"}, "base64"),
        ({"inputs": base64.b64encode(b"hello world, not audio").decode()}, "could not decode"),
        ({"parameters": {}}, "no `inputs`"),
        ({"inputs": "AAAA", "parameters": {"beam_size": 4}}, "unknown parameter 'beam_size'"),
        ({"inputs": "AAAA", "params": {}}, "unknown top-level"),
        ("just a string", "JSON object"),
    ],
)
def test_bad_requests_raise_input_error(random_handler, data, needle):
    with pytest.raises(InputError) as err:
        random_handler(data)
    assert needle in str(err.value)


def test_assisted_with_batch_size_above_one_is_rejected(random_handler, clip):
    with pytest.raises(InputError, match="batch_size"):
        random_handler(body(clip, assisted=True, batch_size=4))


def test_speculative_decoding_gives_exactly_the_greedy_output(random_models, clip):
    # float32: in bfloat16 (the CPU default where the CPU has it) a greedy step (one query: plain products,
    # speakerscribe.asr.attention) and the draft's verification (several queries: SDPA) round differently; and
    # the model's own weights (the default, said here: int8 steps would round differently too)
    handler = make_handler(
        ASR_MODEL=str(random_models.whisper_en),
        ASSISTANT_MODEL=str(random_models.draft_en),
        MAX_NEW_TOKENS="24",
        TORCH_DTYPE="float32",
        DECODER_QUANTIZATION="none",
    )
    plain = handler(body(clip, vad_filter=False, chunk_length_s=5, batch_size=1))
    assisted = handler(body(clip, vad_filter=False, chunk_length_s=5, assisted=True))
    assert len(plain["chunks"]) >= 2
    assert assisted["chunks"] == plain["chunks"]


def test_speculative_decoding_does_not_warn_on_every_draft_step(random_handler, clip, capfd):
    # Whisper generation configs set max_length 448; left on the draft, transformers logs a warning per draft step
    assert random_handler.transcriber.models.asr.assistant.generation_config.max_length is None
    capfd.readouterr()
    random_handler(body(clip, vad_filter=False, assisted=True))
    assert "seem to have been set" not in capfd.readouterr().err


def test_assisted_auto_runs_and_matches(random_handler, clip):
    auto = random_handler(body(clip, vad_filter=False, assisted="auto", batch_size=1))
    plain = random_handler(body(clip, vad_filter=False, batch_size=1))
    assert auto["chunks"] == plain["chunks"]


def test_same_waveform_feeds_whisper_and_the_diarizer_at_16k(random_handler, clip):
    transcriber = random_handler.transcriber
    seen = {}
    asr, diarizer = transcriber.models.asr, transcriber.models.diarizer
    real_transcribe, real_pipeline = asr.transcribe, diarizer.pipeline

    def spy_transcribe(waveform, *args, **kwargs):
        seen["asr"] = waveform
        return real_transcribe(waveform, *args, **kwargs)

    def spy_pipeline(audio, **kwargs):
        seen["rate"] = audio["sample_rate"]
        seen["diar"] = audio["waveform"]
        seen["kwargs"] = kwargs
        return real_pipeline(audio, **kwargs)

    asr.transcribe, diarizer.pipeline = spy_transcribe, spy_pipeline
    try:
        out = random_handler(body(clip, vad_filter=False, sampling_rate=8000, min_speakers=1, max_speakers=2))
    finally:
        asr.transcribe, diarizer.pipeline = real_transcribe, real_pipeline
    assert seen["rate"] == 16000  # the original told pyannote the request's sampling_rate
    np.testing.assert_array_equal(seen["diar"][0].numpy(), seen["asr"].samples)
    hook = seen["kwargs"].pop("hook")  # the request's cancellation checkpoint, called at every pyannote batch
    assert callable(hook)
    assert seen["kwargs"] == {"num_speakers": None, "min_speakers": 1, "max_speakers": 2}
    assert any("sampling_rate=8000 was not used" in w for w in out["warnings"])


def test_diarization_failure_keeps_the_transcript(random_handler, clip):
    diarizer = random_handler.transcriber.models.diarizer
    real = diarizer.pipeline

    def broken(audio, **kwargs):
        raise RuntimeError("segmentation exploded")

    diarizer.pipeline = broken
    try:
        out = random_handler(body(clip, vad_filter=False))
    finally:
        diarizer.pipeline = real
    # the same request with working diarization, less the second look (which needs the diarizer's turns)
    random_handler.transcriber.second_look = False
    try:
        reference = random_handler(body(clip, vad_filter=False))
    finally:
        random_handler.transcriber.second_look = True
    assert out["chunks"] == reference["chunks"] and out["text"] == reference["text"]
    assert out["speakers"] == []
    assert any("diarization failed" in w and "segmentation exploded" in w for w in out["warnings"])


def test_a_count_the_diarizer_does_not_meet_is_said_in_the_warnings(random_handler, clip):
    from pyannote.core import Annotation, Segment

    diarizer = random_handler.transcriber.models.diarizer
    real = diarizer.pipeline

    def two_voices(audio, num_speakers=None, min_speakers=None, max_speakers=None, hook=None):
        ann = Annotation()
        ann[Segment(0.0, 5.0)] = "SPEAKER_00"
        ann[Segment(5.0, 11.0)] = "SPEAKER_01"
        return ann

    two_voices.last_frames = None  # no CAM++ frames: the diarizer's frame-based steps stand aside
    diarizer.pipeline = two_voices
    try:
        asked = {n: random_handler(body(clip, vad_filter=False, num_speakers=n))["warnings"] for n in (2, 3)}
        ranged = random_handler(body(clip, vad_filter=False, min_speakers=3, max_speakers=4))["warnings"]
    finally:
        diarizer.pipeline = real
    assert not any("was asked for" in w for w in asked[2])
    assert any("num_speakers=3 was asked for and 2 speaker(s) were found" in w for w in asked[3])
    assert any("min_speakers=3, max_speakers=4 was asked for and 2 speaker(s)" in w for w in ranged)


def test_word_timestamps_and_grouping(random_handler, clip):
    out = random_handler(body(clip, vad_filter=False, return_timestamps="word", group_by_speaker=True))
    assert_original_shape(out, 12.0)
    words = [w for c in out["chunks"] for w in c["words"]]
    assert words and all(0 <= w["start"] <= w["end"] <= 12.0 for w in words)
    speakers = [u["speaker"] for u in out["speakers"]]
    assert all(a != b for a, b in zip(speakers, speakers[1:]))  # grouped: no two consecutive entries alike


def test_sample_list_input(random_handler):
    samples = speechlike(3.0)[::2]  # 8 kHz
    out = random_handler({"inputs": samples.tolist(), "parameters": {"sampling_rate": 8000, "vad_filter": False}})
    assert out["duration"] == pytest.approx(3.0, abs=0.01)


@pytest.fixture(scope="module")
def plain_handler(random_models):
    """Multilingual random Whisper, no draft model, no diarizer."""
    return make_handler(ASR_MODEL=str(random_models.whisper_ml), MAX_NEW_TOKENS="8")


def test_assisted_without_a_draft_model_is_an_error(plain_handler, clip):
    with pytest.raises(InputError, match="ASSISTANT_MODEL"):
        plain_handler(body(clip, assisted=True))


def test_speaker_counts_without_a_diarizer_warn_instead_of_failing(plain_handler, clip):
    out = plain_handler(body(clip, num_speakers=2, vad_filter=False))
    assert out["speakers"] == []
    assert any("no diarization model" in w for w in out["warnings"])


def test_language_is_detected_and_can_be_forced(plain_handler, clip):
    detected = plain_handler(body(clip, vad_filter=False))
    assert detected["language"] in {"en", "de", "fr", "es"}
    assert 0 < detected["language_probability"] <= 1
    forced = plain_handler(body(clip, vad_filter=False, language="German"))
    assert forced["language"] == "de" and forced["language_probability"] is None
    with pytest.raises(InputError, match="not supported"):
        plain_handler(body(clip, language="ja"))
    with pytest.raises(InputError, match="unknown language"):
        plain_handler(body(clip, language="klingon"))


def test_translate_needs_a_multilingual_model(random_handler, plain_handler, clip):
    with pytest.raises(InputError, match="English-only"):
        random_handler(body(clip, task="translate"))
    out = plain_handler(body(clip, task="translate", vad_filter=False))
    assert_original_shape(out, 12.0)


def test_repository_folder_is_the_default_asr_model(random_models, clip):
    handler = make_handler(path=random_models.whisper_en, MAX_NEW_TOKENS="4")
    assert handler.transcriber.models.asr.model.config.d_model == 64
    assert_original_shape(handler(body(clip, vad_filter=False)), 12.0)


def test_missing_model_is_a_clear_load_error(tmp_path):
    with pytest.raises(ModelLoadError, match="ASR_MODEL"):
        make_handler(ASR_MODEL=str(tmp_path / "no-such-model"))


def test_token_never_logged(random_models, caplog):
    caplog.set_level(logging.DEBUG)
    handler = make_handler(ASR_MODEL=str(random_models.whisper_en), HF_TOKEN="hf_do_not_print_me", MAX_NEW_TOKENS="4")
    handler(body(wav_bytes(tone(300, 1.0, RATE)), vad_filter=False))
    assert "hf_do_not_print_me" not in caplog.text
    assert "hf_do_not_print_me" not in repr(handler.settings)


def test_handler_module_imports_nothing_heavy_and_reads_no_settings_at_import():
    import subprocess
    import sys

    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import handler, config, diarization_utils; "
        "print(int('torch' in sys.modules), int('pyannote.audio' in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "ASR_MODEL": ""},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0", "0"]


def test_static_cache_path_gives_the_same_output(random_models, clip):
    # float32: the two caches run different kernels, so in bfloat16 (the CPU default where the CPU has it) they
    # round differently, and random weights turn any rounding into other tokens; the model's own weights (the
    # static cache never decodes on int8 ones)
    cached = make_handler(
        ASR_MODEL=str(random_models.whisper_en),
        MAX_NEW_TOKENS="24",
        STATIC_CACHE="true",
        WARMUP_BATCH_SIZE="2",
        TORCH_DTYPE="float32",
    )
    plain = make_handler(
        ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="24", TORCH_DTYPE="float32", DECODER_QUANTIZATION="none"
    )
    params = {"vad_filter": False, "chunk_length_s": 6, "batch_size": 2}
    assert cached(body(clip, **params))["chunks"] == plain(body(clip, **params))["chunks"]


def test_out_of_memory_retries_with_smaller_batches_then_reports_capacity(random_handler, clip):
    import torch

    from speakerscribe.errors import CapacityError

    asr = random_handler.transcriber.models.asr
    real = asr.transcribe
    seen = []

    def flaky(waveform, windows, opts, plan, *args, **kwargs):
        seen.append(plan.batch_size)  # the request asked for 8 (opts.batch_size); the plan is what this try uses
        assert opts.batch_size == 8
        if plan.batch_size > 1:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(waveform, windows, opts, plan, *args, **kwargs)

    asr.transcribe = flaky
    try:
        out = random_handler(body(clip, vad_filter=False, batch_size=8))
        # a second look (the random diarizer's turns without words) starts from the batch size that worked
        assert seen[:4] == [8, 4, 2, 1] and set(seen[4:]) <= {1} and out["chunks"]

        def always(*args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory.")

        asr.transcribe = always
        with pytest.raises(CapacityError, match="batch size 1") as err:
            random_handler(body(clip, vad_filter=False, batch_size=2))
        assert "CUDA" not in str(err.value)  # torch's message (device totals, process ids) stays in the log
    finally:
        asr.transcribe = real


def test_sequential_diarization_gives_the_same_result(random_models, clip):
    env = {
        "ASR_MODEL": str(random_models.whisper_en),
        "DIARIZATION_MODEL": str(random_models.pipeline),
        "MAX_NEW_TOKENS": "24",
    }
    sequential = make_handler(**env, OVERLAP_DIARIZATION="false")
    overlapped = make_handler(**env)
    a = sequential(body(clip, vad_filter=False))
    b = overlapped(body(clip, vad_filter=False))
    assert a["speakers"] == b["speakers"] and a["speakers"]
    assert sequential.transcriber.overlap is False and overlapped.transcriber.overlap is True


def test_no_thread_that_ran_the_diarizer_outlives_its_request(random_handler, clip):
    """A thread that ran PyTorch CPU kernels keeps an OpenMP team while it lives, which slows every small kernel of
    the process (speakerscribe.runtime): diarization runs in a thread of its own that ends with the request."""
    import threading

    def diarizing_threads():
        return [t for t in threading.enumerate() if t.name.startswith("diarize")]

    for _ in range(2):
        out = random_handler(body(clip, vad_filter=False))
        assert out["speakers"]
        deadline = time.monotonic() + 5
        while diarizing_threads() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not diarizing_threads()


def test_start_worker_hands_back_the_result_or_the_exception_and_ends():
    from speakerscribe.runtime import start_worker

    assert start_worker(lambda a, b: a + b, 2, 3, name="w").result(timeout=5) == 5
    failed = start_worker(lambda: 1 / 0, name="w")
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=5)


def test_concurrent_requests_give_the_same_answers_as_sequential_ones(random_handler, clip):
    from concurrent.futures import ThreadPoolExecutor

    other = wav_bytes(speechlike(9.0, seed=7))
    requests = [
        body(clip, vad_filter=False, return_timestamps="word"),
        body(other, vad_filter=False, return_timestamps="word"),
    ] * 2
    sequential = [random_handler(r) for r in requests]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(random_handler, requests))
    for a, b in zip(sequential, concurrent):
        assert a["chunks"] == b["chunks"] and a["speakers"] == b["speakers"]


def test_static_cache_decodes_take_turns_under_concurrent_requests(random_models, clip, monkeypatch):
    """With STATIC_CACHE the compiled decoder step (CUDA graphs) and its cache must not be entered by two requests
    at once: generate() calls are serialised, and answers equal the sequential ones."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from transformers.generation.utils import GenerationMixin

    cached = make_handler(
        ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="24", STATIC_CACHE="true", WARMUP_BATCH_SIZE="2"
    )
    other = wav_bytes(speechlike(12.0, seed=7))
    params = {"vad_filter": False, "chunk_length_s": 6, "batch_size": 2}
    requests = [body(clip, **params), body(other, **params)] * 3
    sequential = [cached(r)["chunks"] for r in requests]

    real, lock, state = GenerationMixin.generate, threading.Lock(), {"inside": 0, "most": 0}

    def counting(self, *args, **kwargs):
        with lock:
            state["inside"] += 1
            state["most"] = max(state["most"], state["inside"])
        try:
            time.sleep(0.02)  # widen the window in which an unserialised call would overlap
            return real(self, *args, **kwargs)
        finally:
            with lock:
                state["inside"] -= 1

    monkeypatch.setattr(GenerationMixin, "generate", counting)
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = [out["chunks"] for out in pool.map(cached, requests)]
    assert concurrent == sequential
    assert state["most"] == 1


def test_static_cache_on_cuda_decodes_in_the_thread_that_warmed_it_up(random_models, clip, monkeypatch):
    """On an H200 (torch 2.11) every STATIC_CACHE request failed: the warm-up compiled the decoder step with CUDA
    graphs in the loading thread, whose graph trees live in that thread's local storage, and each request decodes
    in a thread of its own (pytorch/pytorch#123177). On CUDA the engine hands all static-cache decoding, the
    warm-up's too, to one thread of its own. No GPU here: the engine is given that thread as on CUDA, and every
    generate() call must then run in it, whichever thread asked, with the same answers."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from transformers.generation.utils import GenerationMixin

    from speakerscribe.asr.engine import own_cuda_graph_state
    from speakerscribe.runtime import OwnThread

    cached = make_handler(
        ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="24", STATIC_CACHE="true", WARMUP_BATCH_SIZE="2"
    )
    asr = cached.transcriber.models.asr
    assert asr.decoder_thread is None  # on the CPU requests keep their own threads (nothing is compiled)
    other = wav_bytes(speechlike(12.0, seed=7))
    params = {"vad_filter": False, "chunk_length_s": 6, "batch_size": 2}
    requests = [body(clip, **params), body(other, **params)] * 2
    expected = [cached(r)["chunks"] for r in requests]

    real, threads = GenerationMixin.generate, []

    def recording(self, *args, **kwargs):
        import torch

        threads.append((threading.get_ident(), torch.is_inference_mode_enabled()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(GenerationMixin, "generate", recording)
    asr.decoder_thread = OwnThread("static-cache decoder", setup=own_cuda_graph_state)
    asr.warmup(2)
    import torch

    # the thread has CUDA-graph-tree state of its own, whichever thread imported cudagraph_trees first
    assert asr.decoder_thread.run(torch._C._is_key_in_tls, "tree_manager_containers")
    assert asr.decoder_thread.run(asr.decoder_thread.run, len, "abc") == 3  # a call from inside runs at once
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = [out["chunks"] for out in pool.map(cached, requests)]
    assert answers == expected
    assert len(threads) > len(requests)  # the warm-up and every request decoded through generate()
    assert {ident for ident, _ in threads} == {asr.decoder_thread.ident}
    assert all(inference for _, inference in threads)  # grad mode is per thread: the decoder thread sets its own

    def broken(self, *args, **kwargs):
        raise RuntimeError("decoder failed")

    monkeypatch.setattr(GenerationMixin, "generate", broken)
    with pytest.raises(RuntimeError, match="decoder failed"):  # an error reaches the request that asked
        cached(requests[0])
    monkeypatch.setattr(GenerationMixin, "generate", real)
    assert cached(requests[1])["chunks"] == expected[1]  # and the thread goes on serving


def test_tf32_is_restored_only_when_the_last_guarded_call_ends(monkeypatch):
    import threading

    from speakerscribe import runtime

    applied = []
    monkeypatch.setattr(runtime, "apply_tf32", lambda allow: applied.append(allow))
    inside, release = threading.Barrier(3), threading.Event()

    def diarize():
        with runtime.tf32_guard(True):
            inside.wait()
            release.wait()

    workers = [threading.Thread(target=diarize) for _ in range(2)]
    for w in workers:
        w.start()
    inside.wait()  # both are inside the guard
    release.set()
    for w in workers:
        w.join()
    assert applied == [True]  # once, after the last one left; never while the other was still running
