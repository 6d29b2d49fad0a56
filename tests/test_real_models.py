"""Accuracy with real weights (Whisper tiny.en and base, pyannote segmentation-3.0 + CAM++) on festival
conversations whose truth is known exactly. Thresholds sit just above what was measured (README "Accuracy"), so a
change that hurts the words or the speakers fails here."""

from __future__ import annotations

import numpy as np
import pytest
from audio_helpers import wav_bytes
from conftest import CACHE, make_handler

from speakerscribe_dev.conversation import MEETING, long_conversation, synthesize
from speakerscribe_dev.evaluation import der, normalise, wer, word_attribution

pytestmark = pytest.mark.slow

# measured with benchmarks/accuracy.py (README "Accuracy"): tiny.en 0.082 / 0.036 / 0.035, base 0.047 / 0.040 / 0.041
WER_LIMITS = {
    "whisper-tiny.en": {"meeting": 0.10, "backchannels": 0.05, "several_minutes": 0.05},
    "whisper-base": {"meeting": 0.065, "backchannels": 0.055, "several_minutes": 0.055},
}
DER_LIMIT = 0.13  # measured 0.087-0.118: all of it missed speech in pauses inside turns; no confusion


@pytest.fixture(scope="session")
def conversations(speech_dir):
    return {
        "meeting": synthesize(MEETING, speech_dir, "meeting"),  # 38 s: turns straddle the 30 s window edge
        "backchannels": synthesize(long_conversation(20, seed=5, backchannel_every=2), speech_dir, "backchannels"),
        "several_minutes": synthesize(long_conversation(60, seed=2), speech_dir, "conv60"),  # ~4 min
    }


@pytest.fixture(scope="session", params=["whisper-tiny.en", "whisper-base"])
def real_handler(request, real_models):
    name = request.param
    handler = make_handler(
        ASR_MODEL=str(real_models / name),
        ASSISTANT_MODEL=str(real_models / f"{name}-draft"),
        DIARIZATION_MODEL=str(real_models / "diarization"),
    )
    return name, handler


@pytest.fixture(scope="session")
def outputs(real_handler, conversations):
    name, handler = real_handler
    return name, {
        key: handler({"inputs": conv.wav.read_bytes(), "parameters": {"return_timestamps": "word"}})
        for key, conv in conversations.items()
    }


@pytest.mark.parametrize("conversation", ["meeting", "backchannels", "several_minutes"])
def test_word_error_rate(outputs, conversations, conversation):
    name, out = outputs
    measured = wer(conversations[conversation].reference_text, out[conversation]["text"])
    assert measured <= WER_LIMITS[name][conversation], f"{name} WER {measured:.3f} on {conversation}"


@pytest.mark.parametrize("conversation", ["meeting", "backchannels", "several_minutes"])
def test_two_speakers_found_and_words_attributed(outputs, conversations, conversation):
    _, out = outputs
    labels = {u["speaker"] for u in out[conversation]["speakers"]}
    assert len(labels) == 2
    words = [w for u in out[conversation]["speakers"] for w in u["words"]]
    attribution = word_attribution(conversations[conversation], words)
    assert attribution.accuracy >= 0.97
    assert set(attribution.mapping.values()) == {"A", "B"}


def test_backchannels_are_attributed_to_their_own_speaker(outputs, conversations):
    _, out = outputs
    conv = conversations["backchannels"]
    words = [w for u in out["backchannels"]["speakers"] for w in u["words"]]
    mapping = word_attribution(conv, words).mapping
    backchannels = [t for t in conv.turns if t.speaker == "B" and t.end - t.start < 1.0]
    assert len(backchannels) >= 3
    for turn in backchannels:
        # a word's start, not its middle: cross-attention alignment stretches a word's end over the pause after it
        # (tiny.en in bfloat16 on an Intel CPU with AMX: "Right." 19.31-20.51 s for a turn of 19.31-19.61 s)
        inside = [w for w in words if turn.start - 0.3 <= w["start"] <= turn.end + 0.3]
        assert inside, f"no word found for the back-channel {turn.text!r} at {turn.start:.2f}s"
        assert all(mapping[w["speaker"]] == "B" for w in inside), (turn, inside)


def test_no_runaway_repetition_on_several_minutes(outputs, conversations):
    _, out = outputs
    hyp = normalise(out["several_minutes"]["text"]).split()
    ref = normalise(conversations["several_minutes"].reference_text).split()
    assert 0.9 <= len(hyp) / len(ref) <= 1.1
    for chunk in out["several_minutes"]["chunks"]:
        tokens = normalise(chunk["text"]).split()
        assert len(tokens) <= 3 * (chunk["timestamp"][1] - chunk["timestamp"][0]) + 5  # <= ~3 words per second


def test_follow_ups_and_the_second_look_recover_words_whisper_skipped(
    real_handler, outputs, conversations, monkeypatch, real_models
):
    """whisper-base drops short replies inside 30 s windows of the backchannel conversation. The follow-ups (and
    the tails decoded again on the windows' own encodings) decode the speech the VAD heard and no chunk covers; the
    second look (diarized speech without words) is the safety net behind them and never costs words (README "How it
    works"). With both off, the same request loses them.

    In float32 on the model's own weights, where those skipped replies were found: in bfloat16 (the default on a
    CPU with native bfloat16) whisper-base happens to keep them, and there would be nothing to recover."""
    from speakerscribe import pipeline
    from speakerscribe.asr import refill

    name, handler = real_handler
    conv = conversations["backchannels"]
    models = handler.transcriber.models
    if models.placement.dtype_name == "float32" and models.asr.int8_steps is None:
        both = wer(conv.reference_text, outputs[1]["backchannels"]["text"])
    else:
        handler = make_handler(
            ASR_MODEL=str(real_models / name),
            DIARIZATION_MODEL=str(real_models / "diarization"),
            TORCH_DTYPE="float32",
            DECODER_QUANTIZATION="none",
        )
        both = wer(conv.reference_text, handler({"inputs": conv.wav.read_bytes()})["text"])
    handler.transcriber.second_look = False
    try:
        without_look = wer(conv.reference_text, handler({"inputs": conv.wav.read_bytes()})["text"])
        monkeypatch.setattr(pipeline, "MAX_FOLLOW_UP_ROUNDS", 0)
        monkeypatch.setattr(refill, "refill_tails", lambda *args, **kwargs: ([], []))  # nor tails decoded again
        neither = wer(conv.reference_text, handler({"inputs": conv.wav.read_bytes()})["text"])
    finally:
        handler.transcriber.second_look = True
    assert both <= without_look + 0.005, f"{name}: {both:.3f} with the second look, {without_look:.3f} without"
    assert both <= neither + 0.005, f"{name}: {both:.3f} with both, {neither:.3f} with neither"
    if name == "whisper-base":  # measured 0.031 with both (and with follow-ups alone), 0.053 with neither (2026-12-06)
        assert both <= neither - 0.015, f"{both:.3f} with both, {neither:.3f} with neither"


def test_times_are_ordered_and_inside_the_audio(outputs, conversations):
    _, out = outputs
    for key, conv in conversations.items():
        chunks = out[key]["chunks"]
        starts = [c["timestamp"][0] for c in chunks]
        assert starts == sorted(starts)
        assert all(0 <= c["timestamp"][0] <= c["timestamp"][1] <= conv.duration for c in chunks)
        for c in chunks:
            assert all(
                c["timestamp"][0] - 1e-6 <= w["start"] <= w["end"] <= c["timestamp"][1] + 1e-6 for w in c["words"]
            )
        # nothing dropped at the end: the last reference words are in the transcript
        tail = normalise(conv.turns[-1].text).split()[-2:]
        assert " ".join(tail) in normalise(out[key]["text"])


@pytest.mark.parametrize("shared_frames", ["true", "false"])
def test_diarization_error_rate(real_models, conversations, shared_frames):
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.models.loading import load_transcriber
    from speakerscribe.models.settings import ModelSettings
    from speakerscribe.options import RequestOptions

    transcriber = load_transcriber(
        ModelSettings.given(
            asr_model=str(real_models / "whisper-tiny.en"),
            diarization_model=str(real_models / "diarization"),
            diarization_shared_frames=shared_frames,
        )
    )
    assert transcriber.models.diarizer.shared_frames is (shared_frames == "true")
    for key in ("meeting", "backchannels"):
        conv = conversations[key]
        result = transcriber.run(decode_audio(conv.wav.read_bytes()).waveform, RequestOptions())
        turns = [(t.start, t.end, t.speaker) for t in result.diarization.exclusive]
        detail = der(conv, turns)
        assert detail["diarization error rate"] <= DER_LIMIT, (key, detail)
        assert detail["confusion"] <= 0.01 * detail["total"], (key, detail)
        assert len({t[2] for t in turns}) == 2


@pytest.mark.parametrize("noise", ["silence", "white", "hum", "brown"])
@pytest.mark.parametrize("vad_filter", [True, False])
def test_silence_and_noise_give_no_words_and_no_speakers(real_handler, noise, vad_filter):
    _, handler = real_handler
    rng = np.random.default_rng(0)
    n = 10 * 16000
    signal = {
        "silence": np.zeros(n),
        "white": 0.1 * rng.standard_normal(n),
        "hum": 0.3 * np.sin(2 * np.pi * 50 * np.arange(n) / 16000),
        "brown": np.cumsum(rng.standard_normal(n)) / 400,
    }[noise]
    signal = (signal / max(1.0, np.abs(signal).max())).astype(np.float32)
    out = handler({"inputs": wav_bytes(signal), "parameters": {"vad_filter": vad_filter}})
    assert out["text"] == "" and out["chunks"] == [] and out["speakers"] == []


def test_assisted_decoding_gives_the_same_words_as_plain(real_handler, conversations, real_models):
    name, handler = real_handler
    clip = conversations["meeting"].wav.read_bytes()
    params = {"batch_size": 1, "chunk_length_s": 15}
    plain = handler({"inputs": clip, "parameters": params})
    assisted = handler({"inputs": clip, "parameters": {"assisted": True, "chunk_length_s": 15}})
    assert len(plain["chunks"]) >= 4
    # the defaults (bfloat16 where the CPU has it): the draft's tokens are checked several at once, which rounds
    # differently; measured on the meeting: tiny.en the same words, base one phrase ("joining us today" /
    # "joining us a call today")
    assert wer(plain["text"], assisted["text"]) <= 0.05
    # float32 on the model's own weights: identical to the last digit
    exact = make_handler(
        ASR_MODEL=str(real_models / name),
        ASSISTANT_MODEL=str(real_models / f"{name}-draft"),
        TORCH_DTYPE="float32",
        DECODER_QUANTIZATION="none",
    )
    plain = exact({"inputs": clip, "parameters": params})
    assert exact({"inputs": clip, "parameters": {"assisted": True, "chunk_length_s": 15}})["chunks"] == plain["chunks"]


def test_prepared_folders_are_what_the_manifest_says(real_models):
    import json

    manifest = json.loads((real_models / "manifest.json").read_text())
    assert set(manifest) >= {"whisper-tiny.en", "whisper-base", "diarization"}
    assert manifest["whisper-base"]["multilingual"] is True and manifest["whisper-tiny.en"]["multilingual"] is False
    for name in ("whisper-tiny.en", "whisper-base"):
        assert (real_models / name / "model.safetensors").is_file()
        assert (real_models / f"{name}-draft" / "config.json").is_file()
    assert (real_models / "diarization" / "config.yaml").is_file()
    assert CACHE.exists()


def test_default_entries_are_the_word_level_split_and_chunk_mode_keeps_chunks(real_handler, outputs, conversations):
    """Default entries are cut at speaker changes between words (the word-level attribution, tested in
    test_merge*), without showing the words; ``speaker_entries: "chunk"`` is the original one entry per chunk."""
    _, handler = real_handler
    _, word_level = outputs
    conv = conversations["backchannels"]
    split = handler({"inputs": conv.wav.read_bytes()})
    chunked = handler({"inputs": conv.wav.read_bytes(), "parameters": {"speaker_entries": "chunk"}})
    assert all("words" not in e for e in split["speakers"])  # word times are used, not shown unless asked
    shown = [{k: v for k, v in e.items() if k != "words"} for e in word_level["backchannels"]["speakers"]]
    assert split["speakers"] == shown
    assert [e["timestamp"] for e in chunked["speakers"]] == [c["timestamp"] for c in chunked["chunks"]]
    assert "".join(e["text"] for e in split["speakers"]) == split["text"]  # nothing lost by splitting
    for entry in word_level["backchannels"]["speakers"]:
        assert {w["speaker"] for w in entry["words"]} == {entry["speaker"]}
        # an entry's span is cut to heard speech (a word stretched over a pause may reach past it), but every word
        # of the entry lies at least partly inside it
        start, end = entry["timestamp"]
        assert all(min(w["end"], end) >= max(w["start"], start) for w in entry["words"]), entry

    def entry_accuracy(out):
        entries = [
            {"start": e["timestamp"][0], "end": e["timestamp"][1], "speaker": e["speaker"]} for e in out["speakers"]
        ]
        return word_attribution(conv, entries).accuracy

    assert entry_accuracy(split) >= 0.95


def test_three_speakers_two_of_them_similar_male_voices(real_handler, speech_dir):
    """Two male diphone voices and a female voice: segmentation-3.0 gives the two male voices one local speaker,
    so pyannote's clustering merges them; the second clustering pass (speakerscribe.diarization.recluster) tells them
    apart."""
    from speakerscribe_dev.conversation import THREE_SPEAKERS

    _, handler = real_handler
    conv = synthesize(THREE_SPEAKERS, speech_dir, "three_speakers")
    out = handler({"inputs": conv.wav.read_bytes(), "parameters": {"return_timestamps": "word"}})
    assert wer(conv.reference_text, out["text"]) <= 0.12
    words = [w for u in out["speakers"] for w in u["words"]]
    attribution = word_attribution(conv, words)
    assert len({u["speaker"] for u in out["speakers"]}) == 3
    assert set(attribution.mapping.values()) == {"A", "B", "C"}
    assert attribution.accuracy >= 0.95  # measured 0.984


def test_without_the_second_pass_the_two_male_voices_are_merged(real_models, speech_dir):
    """The reason for speakerscribe.diarization.recluster: pyannote's own clustering cannot separate them."""
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.runtime import resolve_placement
    from speakerscribe_dev.conversation import THREE_SPEAKERS

    conv = synthesize(THREE_SPEAKERS, speech_dir, "three_speakers")
    waveform = decode_audio(conv.wav.read_bytes()).waveform
    placement = resolve_placement("cpu", "auto", "auto")
    found = {}
    for second_pass in (False, True):
        diarizer = SpeakerDiarizer.load(str(real_models / "diarization"), placement, recluster=second_pass)
        turns = diarizer(waveform).exclusive
        found[second_pass] = (len({t.speaker for t in turns}), der(conv, [(t.start, t.end, t.speaker) for t in turns]))
    assert found[False][0] == 2 and found[False][1]["confusion"] > 5.0
    assert found[True][0] == 3 and found[True][1]["confusion"] < 1.5
