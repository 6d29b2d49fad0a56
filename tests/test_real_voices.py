"""The real-voice conversation set (``speakerscribe_dev.real_voices``): truth inside the audio and tight around the
speech, people split by group, the telephone channel, and byte-identical regeneration.

The set is made by scripts/setup.sh (about a minute from scratch, 1 s when it verifies); the fixture makes it
when it is missing."""

from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np
import pytest
from conftest import REPO

from speakerscribe_dev import real_voices
from speakerscribe_dev.telephone import mu_law_decode, mu_law_encode, telephone
from speakerscribe_dev.voice_pieces import read_wav

RATE = 16_000


@pytest.fixture(scope="module")
def folder():
    return real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")


@pytest.fixture(scope="module")
def manifest(folder):
    return json.loads((folder / "manifest.json").read_text())


@pytest.fixture(scope="module")
def conversations(folder):
    return real_voices.load(folder)


def _rms_db(x: np.ndarray) -> float:
    return 10 * np.log10(np.mean(x.astype(np.float64) ** 2) + 1e-20)


def test_truth_lies_inside_the_audio_and_names_the_people(conversations):
    for conv in conversations:
        samples = read_wav(conv.wav)
        assert abs(len(samples) / RATE - conv.uem[1]) < 1e-3, conv.uri
        assert 30.0 <= conv.uem[1] <= 120.0, conv.uri
        assert all(0.0 <= t.start < t.end <= conv.uem[1] for t in conv.turns), conv.uri
        assert conv.speakers == tuple(sorted(conv.people)), conv.uri
        assert all(0.29 <= t.end - t.start <= 8.001 for t in conv.turns), conv.uri
        for person in conv.people:  # nobody overlaps themself
            own = sorted((t.start, t.end) for t in conv.turns if t.speaker == person)
            assert all(b[0] > a[1] for a, b in itertools.pairwise(own)), (conv.uri, person)


def test_truth_is_tight_outside_the_turns_is_only_the_noise_floor(conversations):
    """Between turns the meeting audio is at the -65 dBFS floor: no speech is missing from the truth."""
    for conv in (c for c in conversations if c.quality == "meeting"):
        samples = read_wav(conv.wav)
        busy = np.zeros(len(samples), dtype=bool)
        for t in conv.turns:
            busy[max(0, int(t.start * RATE) - 160) : int(t.end * RATE) + 160] = True
        quiet = samples[~busy]
        assert len(quiet) > RATE, conv.uri  # pauses exist
        assert _rms_db(quiet) < -60.0, conv.uri
        # and every turn carries sound well above the floor
        assert min(_rms_db(samples[int(t.start * RATE) : int(t.end * RATE)]) for t in conv.turns) > -50.0, conv.uri


def test_each_conversation_uses_people_of_one_group_and_groups_are_disjoint(manifest):
    groups = {g: set(m) for g, m in manifest["groups"].items()}
    assert set(groups) == {"calibration", "held-out"}
    assert not groups["calibration"] & groups["held-out"]
    used = {g: set() for g in groups}
    for e in manifest["conversations"]:
        assert set(e["people"]) <= groups[e["group"]], e["id"]
        assert e["n_speakers"] == len(set(e["people"])) == len(e["people"]), e["id"]
        assert e["genders"] == [manifest["people"][p]["gender"] for p in e["people"]], e["id"]
        used[e["group"]] |= set(e["people"])
    assert not used["calibration"] & used["held-out"]
    for person, record in manifest["people"].items():
        assert record["group"] in groups and person in groups[record["group"]]
        assert record["gender"] in ("female", "male", "unknown")


def test_enough_conversations_of_each_kind(manifest):
    for group, quality in itertools.product(("calibration", "held-out"), real_voices.QUALITIES):
        rows = [e for e in manifest["conversations"] if e["group"] == group and e["quality"] == quality]
        two = [e for e in rows if e["n_speakers"] == 2]
        assert len(two) >= 20 and len(rows) - len(two) >= 10, (group, quality)
        assert {"same-gender", "mixed"} <= {e["pairing"] for e in two}, (group, quality)


def _share_above(samples: np.ndarray, hz: float, n: int = 4096) -> float:
    """Share of the signal's power above ``hz`` (Hann-windowed frames of ``n`` samples)."""
    frames = samples[: len(samples) // n * n].reshape(-1, n).astype(np.float64) * np.hanning(n)
    power = (np.abs(np.fft.rfft(frames, axis=1)) ** 2).sum(axis=0)
    freqs = np.fft.rfftfreq(n, 1 / RATE)
    return float(power[freqs > hz].sum() / power.sum())


def test_telephone_quality_has_no_energy_above_the_band_and_meeting_quality_does(conversations):
    for conv in conversations:
        share = _share_above(read_wav(conv.wav), 3600.0)
        if conv.quality == "telephone":
            assert share < 5e-4, conv.uri  # mu-law noise only (about -40 dB)
        else:
            assert share > 1e-3, conv.uri


def test_no_voice_is_20_db_below_another(conversations):
    for conv in (c for c in conversations if c.quality == "meeting"):
        samples = read_wav(conv.wav)
        levels = {}
        for person in conv.people:
            mine = [samples[int(t.start * RATE) : int(t.end * RATE)] for t in conv.turns if t.speaker == person]
            levels[person] = _rms_db(np.concatenate(mine))
        assert max(levels.values()) - min(levels.values()) < 20.0, (conv.uri, levels)


def test_regenerating_a_conversation_gives_the_same_bytes(folder, manifest):
    entries = {e["id"]: e for e in manifest["conversations"]}
    for conversation in ("held-3p-01", "cal-2p-05"):
        files = real_voices.regenerate(folder, conversation)
        for quality in real_voices.QUALITIES:
            entry = entries[f"{conversation}.{quality}"]
            assert hashlib.sha256(files[quality]).hexdigest() == entry["sha256"]
            assert (folder / entry["wav"]).read_bytes() == files[quality]
        assert hashlib.sha256(files["rttm"]).hexdigest() == entry["rttm_sha256"]


def test_mu_law_round_trip_is_within_its_step():
    x = np.linspace(-1.0, 1.0, 20001)
    codes = mu_law_encode(x)
    assert codes.dtype == np.uint8 and codes.min() == 0 and codes.max() == 255
    assert np.all(np.diff(codes.astype(int)) >= 0)  # monotonic
    y = mu_law_decode(codes)
    # 8-bit mu-law: a step is about 1/128 of the companded range, so the relative error stays under ~4.5 % for
    # signals well above the smallest step, and the absolute error near zero under one small step (~2e-4)
    big = np.abs(x) > 0.01
    assert np.max(np.abs(y[big] - x[big]) / np.abs(x[big])) < 0.045
    assert np.max(np.abs(y[~big] - x[~big])) < 2e-3


def test_telephone_channel_passes_the_voice_band_only():
    t = np.arange(2 * RATE) / RATE
    for hz, passes in ((1000.0, True), (2500.0, True), (5000.0, False), (7000.0, False), (100.0, False)):
        tone = 0.3 * np.sin(2 * np.pi * hz * t).astype(np.float32)
        out = telephone(tone, RATE)
        assert len(out) == len(tone)
        gain_db = _rms_db(out[RATE // 4 : -RATE // 4]) - _rms_db(tone[RATE // 4 : -RATE // 4])
        assert (abs(gain_db) < 1.0) if passes else (gain_db < -25.0), (hz, gain_db)


def test_a_word_is_right_only_inside_a_turn_of_the_person_its_label_maps_to():
    from speakerscribe_dev.evaluation import words_on_right_speaker

    reference = [(0.0, 2.0, "ann"), (1.5, 4.0, "bob")]
    words = [
        {"start": 0.2, "end": 0.6, "speaker": "S0"},  # 0.4: ann's turn, S0 -> ann: right
        {"start": 1.6, "end": 1.8, "speaker": "S1"},  # 1.7: both talk, S1 -> bob: right
        {"start": 3.0, "end": 3.4, "speaker": "S0"},  # 3.2: bob's turn, S0 -> ann: wrong
        {"start": 4.2, "end": 4.6, "speaker": "S1"},  # 4.4: nobody's turn: wrong
        {"start": 0.8, "end": 1.0, "speaker": "S2"},  # an unmapped label: wrong
    ]
    assert words_on_right_speaker(reference, words, {"S0": "ann", "S1": "bob"}) == (2, 5)
