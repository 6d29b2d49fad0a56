"""Speaker attribution on hand-built inputs, including every failure of the original nearest-end merge."""

from __future__ import annotations

import numpy as np
import pytest

from speakerscribe.merge import (
    assign,
    attribute_chunks,
    attribute_words,
    build_timeline,
    group_by_speaker,
    overlap_matrix,
    trim_to_speech,
)
from speakerscribe.records import Chunk, SpeakerTurn, Utterance, Word


def turns(*spec):
    return [SpeakerTurn(s, e, who) for s, e, who in spec]


def test_chunk_goes_to_speaker_with_largest_overlap():
    t = turns((0, 4, "A"), (4, 10, "B"))
    out = attribute_chunks([Chunk(0, 3, " a"), Chunk(3, 9, " b"), Chunk(3.5, 4.4, " c")], t)
    assert [u.speaker for u in out] == ["A", "B", "A"]
    assert [u.text for u in out] == [" a", " b", " c"]


def test_backchannel_does_not_take_the_other_speakers_chunk():
    # A talks 0-12 with a 0.5 s "uh-huh" from B at 4.0-4.5; Whisper cut A's speech into 0-8 and 8-12.
    # The original's nearest-end rule gave B the whole 8-12 chunk; the overlap rule keeps both with A.
    t = turns((0, 4, "A"), (4, 4.5, "B"), (4.5, 12, "A"))
    out = attribute_chunks([Chunk(0, 8, " first half"), Chunk(8, 12, " second half")], t)
    assert [u.speaker for u in out] == ["A", "A"]


def test_backchannel_chunk_of_its_own_goes_to_its_speaker():
    t = turns((0, 6, "A"), (6.2, 6.7, "B"), (6.9, 12, "A"))
    out = attribute_chunks([Chunk(0, 6, " long"), Chunk(6.2, 6.7, " Uh-huh."), Chunk(6.9, 12, " more")], t)
    assert [u.speaker for u in out] == ["A", "B", "A"]


def test_chunk_outside_every_turn_goes_to_nearest_turn():
    t = turns((0, 2, "A"), (10, 12, "B"))
    out = attribute_chunks([Chunk(2.5, 3, " x"), Chunk(8, 9.5, " y"), Chunk(20, 21, " z"), Chunk(-1, -0.5, " w")], t)
    assert [u.speaker for u in out] == ["A", "B", "B", "A"]


def test_gap_ties_go_to_the_earlier_turn():
    t = turns((0, 2, "A"), (4, 6, "B"))
    assert attribute_chunks([Chunk(2.5, 3.5, " x")], t)[0].speaker == "A"


def test_empty_transcript_or_no_turns_gives_empty_result():
    assert attribute_chunks([], turns((0, 1, "A"))) == []
    assert attribute_chunks([Chunk(0, 1, " hi")], []) == []
    assert attribute_words([], turns((0, 1, "A"))) == []
    assert group_by_speaker([]) == []


def test_zero_length_turns_are_ignored_and_zero_length_chunks_still_attributed():
    t = turns((1, 1, "Z"), (0, 5, "A"))
    out = attribute_chunks([Chunk(2, 2, " blip")], t)
    assert [u.speaker for u in out] == ["A"]


def test_overlapping_turns_of_one_speaker_are_not_double_counted():
    # A's turns overlap each other (0-4 and 2-6 = 6 s of A), B holds 5-11 (6 s) - chunk 0-11: A has 6, B has 6
    # with union; without union A would count 8 and win wrongly by more.
    tl = build_timeline(turns((0, 4, "A"), (2, 6, "A"), (5, 11, "B")))
    ov = overlap_matrix(tl, np.array([0.0]), np.array([11.0]))
    assert ov[0].tolist() == pytest.approx([6.0, 6.0])


def test_overlap_matrix_matches_brute_force():
    rng = np.random.default_rng(0)
    spec = []
    for k in range(60):
        s = float(rng.uniform(0, 100))
        spec.append((s, s + float(rng.uniform(0.1, 5)), f"S{k % 4}"))
    tl = build_timeline(turns(*spec))
    a = rng.uniform(-5, 105, 200)
    b = a + rng.uniform(0, 10, 200)
    ov = overlap_matrix(tl, a, b)
    grid = np.linspace(-5, 120, 125001)  # 1 ms resolution
    step = grid[1] - grid[0]
    for j, label in enumerate(tl.labels):
        active = np.zeros_like(grid, dtype=bool)
        for s, e, who in spec:
            if who == label:
                active |= (grid >= s) & (grid < e)
        cum = np.concatenate([[0.0], np.cumsum(active) * step])
        idx_a = np.searchsorted(grid, a)
        idx_b = np.searchsorted(grid, b)
        brute = cum[idx_b] - cum[idx_a]
        assert np.allclose(ov[:, j], brute, atol=0.01)


def test_assign_is_vectorised_over_many_pieces():
    t = turns(*[(i, i + 1, "A" if i % 2 == 0 else "B") for i in range(1000)])
    tl = build_timeline(t)
    starts = np.arange(1000) + 0.1
    who = assign(tl, starts, starts + 0.8)
    assert [tl.labels[k] for k in who[:4]] == ["A", "B", "A", "B"]
    assert len(who) == 1000


def test_words_split_chunk_at_speaker_change():
    words = (Word(" Hi", 0.0, 0.4), Word(" there.", 0.4, 1.0), Word(" Yes.", 1.2, 1.6), Word(" Go", 1.7, 2.0))
    chunk = Chunk(0, 2.0, " Hi there. Yes. Go", words)
    t = turns((0, 1.05, "A"), (1.1, 1.65, "B"), (1.65, 3, "A"))
    out = attribute_words([chunk], t)
    assert [(u.speaker, u.text) for u in out] == [("A", " Hi there."), ("B", " Yes."), ("A", " Go")]
    assert all(w.speaker == u.speaker for u in out for w in u.words)
    assert [(u.start, u.end) for u in out] == [(0.0, 1.0), (1.2, 1.6), (1.7, 2.0)]


def test_group_by_speaker_merges_consecutive_entries():
    t = turns((0, 5, "A"), (5, 8, "B"))
    out = group_by_speaker(attribute_chunks([Chunk(0, 2, " a"), Chunk(2, 4, " b"), Chunk(5, 7, " c")], t))
    assert [(u.speaker, u.start, u.end, u.text) for u in out] == [("A", 0, 4, " a b"), ("B", 5, 7, " c")]


def test_zero_length_piece_inside_a_turn_belongs_to_that_turn():
    t = turns((0, 10, "A"), (10.5, 11, "B"))
    assert [u.speaker for u in attribute_chunks([Chunk(9.9, 9.9, " x"), Chunk(10.7, 10.7, " y")], t)] == ["A", "B"]


def spans(*pairs):
    return np.array([p[0] for p in pairs], dtype=float), np.array([p[1] for p in pairs], dtype=float)


def entry(speaker, *words):
    ws = tuple(Word(text, a, b, None, speaker) for text, a, b in words)
    return Utterance(speaker, ws[0].start, ws[-1].end, "".join(w.text for w in ws), ws)


def test_trim_cuts_the_pause_out_of_an_entry_and_splits_it_there():
    # the aligner stretched " well" over a 2 s pause: speech is heard 0-1.2 and 3.2-4.0 only
    u = entry("A", (" So", 0.0, 0.5), (" well", 0.5, 3.2), (" yes", 3.2, 4.0))
    out = trim_to_speech([u], *spans((0.0, 1.2), (3.2, 4.0)))
    assert [(x.start, x.end, x.text) for x in out] == [(0.0, 1.2, " So well"), (3.2, 4.0, " yes")]
    assert [w for x in out for w in x.words] == list(u.words)  # words unchanged, in order, none lost


def test_trim_keeps_words_no_detector_heard_and_entries_without_words():
    heard = spans((5.0, 6.0))
    quiet = entry("B", (" OK.", 1.0, 2.5))  # overlaps no speech: Whisper heard it, keep its own span
    chunk_only = Utterance("A", 7.0, 8.0, " x")
    out = trim_to_speech([quiet, chunk_only], *heard)
    assert [(x.start, x.end, x.text) for x in out] == [(1.0, 2.5, " OK."), (7.0, 8.0, " x")]


def test_trim_one_span_of_speech_keeps_the_entry_whole_and_clips_its_edges():
    u = entry("A", (" a", 0.0, 1.0), (" b", 1.0, 2.0), (" c", 2.0, 3.5))
    out = trim_to_speech([u], *spans((0.4, 3.0)))
    assert [(x.start, x.end, x.text) for x in out] == [(0.4, 3.0, " a b c")]
    assert out[0].words == u.words


def test_trim_gives_a_word_over_a_pause_the_speech_it_overlaps_most():
    u = entry("A", (" one", 0.0, 0.4), (" two", 0.4, 2.6), (" three", 2.6, 3.0))
    # " two" overlaps 0.4-0.6 (0.2 s) and 2.0-3.0 (0.6 s): it belongs with " three"
    out = trim_to_speech([u], *spans((0.0, 0.6), (2.0, 3.0)))
    assert [(x.start, x.end, x.text) for x in out] == [(0.0, 0.4, " one"), (2.0, 3.0, " two three")]
