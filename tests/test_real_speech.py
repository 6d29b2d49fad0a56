"""Real recorded meetings (AMI excerpts from pyannote.audio's sdist) through the default deployment: whisper-base
+ the offline diarization, default request parameters. Thresholds come from the train + development files only
(README "Accuracy"); the test files are measured by benchmarks/accuracy.py, never tuned on."""

from __future__ import annotations

import logging

import pytest
from conftest import REPO, make_handler

from speakerscribe.asr.tokens import compression_ratio
from speakerscribe.response import endpoint_response
from speakerscribe_dev import ami
from speakerscribe_dev.evaluation import evaluate_recording, summarise

pytestmark = pytest.mark.slow

# measured on train + development with benchmarks/accuracy.py --sets ami (README "Accuracy"); limits sit a little
# outside the measurement so a regression fails here
LIMITS = {  # measured (train + development, 2026-12-01, third round): 0, 0.877, 6, 0.303, 0.342, 0.353, 0.943
    "empty": 0,  # trn01 (quiet far-field speech the VAD hears only in moments) was empty before the third round
    # 0.809 before the third round, 0.780 before the second look; 0.847 in bfloat16 on an Intel CPU with AMX
    # (2026-12-06: trn01's last 1.6 s falls to Whisper's no-speech rule there, 6 words against float32's 8; float32
    # 0.884 once a 1 s tail of trn06 no longer brings back 40 words of its window as new text); 0.836 there once
    # single queries went through SDPA on AMX (2026-12-06, evening): trn01 alone moved (0.543 -> 0.406, 6 -> 5 words:
    # its 3.3 s of speech are four far-field moments, whose coverage swings with rounding); float32 0.886
    "coverage": 0.83,
    # 5 until 2026-12-07: trn03's second speaker was 0.02 s at the change of speaker (1.11-1.13 s; the real second
    # person speaks 0-1.18 s, inside the main speaker's turn), a speck no longer reported (diarizer.MIN_SPEAKER_S)
    "count_exact_diarizer": 4,
    "der_diarizer": 0.33,
    "der_exclusive": 0.37,
    "der_entries": 0.37,  # 0.384 before entries were cut down to heard speech
    "entries_above_exclusive": 0.03,  # the target: within 3 points of the exclusive output (measured 1.1)
    "words_single_right": 0.92,
}


@pytest.fixture(scope="session")
def ami_folder():
    return ami.prepare(REPO / "data" / "ami")


@pytest.fixture(scope="session")
def tuning_results(real_models, ami_folder):
    handler = make_handler(
        ASR_MODEL=str(real_models / "whisper-base"), DIARIZATION_MODEL=str(real_models / "diarization")
    )
    rows, outputs = [], {}
    recovered = _Collect()
    logger = logging.getLogger("speakerscribe.asr")
    logger.addHandler(recovered)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        for rec in ami.load(ami_folder, ami.TUNING_SPLITS):
            result, _ = handler.process({"inputs": rec.wav.read_bytes()})
            out = endpoint_response(result, words=True)  # default entries carry their word times internally
            outputs[rec.uri] = out
            rows.append(evaluate_recording(rec, out, result.diarization))
    finally:
        logger.removeHandler(recovered)
        logger.setLevel(level)
    return rows, outputs, recovered.messages


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def test_data_is_the_pinned_protocol(ami_folder):
    recs = ami.load(ami_folder)
    assert [r.uri for r in recs if r.split == "train"] == [f"trn{k:02d}" for k in range(10)]
    assert {r.split for r in recs} == {"train", "development", "test"} and len(recs) == 14
    assert all(r.uem == (0.0, 30.0) and r.turns for r in recs)


def test_real_meetings_meet_the_train_dev_limits(tuning_results):
    rows, _, _ = tuning_results
    s = summarise(rows)
    assert s["empty"] <= LIMITS["empty"], s
    assert s["coverage"] >= LIMITS["coverage"], s
    assert s["count_exact_diarizer"] >= LIMITS["count_exact_diarizer"], s
    for key in ("der_diarizer", "der_exclusive", "der_entries"):
        assert s[key] <= LIMITS[key], (key, s)
    assert s["der_entries"] - s["der_exclusive"] <= LIMITS["entries_above_exclusive"], s
    assert s["words_single_right"] >= LIMITS["words_single_right"], s


def test_speech_the_vad_hears_only_in_moments_is_transcribed_and_said(tuning_results):
    """trn01: four people, 6 s of short far-field utterances; the VAD passes frames over its threshold but no region,
    so Whisper hears the whole excerpt (its no-speech test decides) and the response says so."""
    _, outputs, _ = tuning_results
    out = outputs["trn01"]
    assert len(out["text"].split()) >= 3, out["text"]
    assert any("speech detector heard speech only in moments" in w for w in out.get("warnings", [])), out


def test_no_repetition_loop_survives_in_real_meetings(tuning_results):
    _, outputs, _ = tuning_results
    for uri, out in outputs.items():
        for chunk in out["chunks"]:
            text = chunk["text"]
            assert len(text) < 60 or compression_ratio(text) <= 2.4, (uri, text)


def test_default_entries_hold_one_speaker_each(tuning_results):
    _, outputs, _ = tuning_results
    for out in outputs.values():
        for entry in out["speakers"]:
            assert {w["speaker"] for w in entry["words"]} == {entry["speaker"]}


def test_greedy_failures_on_real_meetings_were_decoded_again(tuning_results):
    """Greedy whisper-base fails on some of these windows (loops, low confidence): they are re-decoded at higher
    temperatures instead of being dropped."""
    _, _, messages = tuning_results
    assert any("attempts, kept temperature" in m for m in messages), messages
