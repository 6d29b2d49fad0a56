"""The second clustering pass (pure logic, synthetic embeddings and frames) and entry widening."""

from __future__ import annotations

import numpy as np
import torch

from speakerscribe.diarization.recluster import ReclusterOptions, cluster_pieces, recluster
from speakerscribe.merge import widen_to_turns
from speakerscribe.records import SpeakerTurn, Utterance
from speakerscribe.speakers.pieces import join


def _voice(rng, centre, n):
    v = centre[None, :] + 0.05 * rng.standard_normal((n, centre.size))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_cluster_pieces_splits_two_voices_and_folds_a_tiny_cluster():
    rng = np.random.default_rng(0)
    a, b, c = (np.eye(16)[k] for k in range(3))
    emb = np.vstack([_voice(rng, a, 10), _voice(rng, b, 10), _voice(rng, 0.2 * a + c, 1)])
    seconds = np.full(len(emb), 2.0)
    labels = cluster_pieces(emb, seconds, ReclusterOptions(), seconds.sum())
    assert len(set(labels[:10])) == 1 and len(set(labels[10:20])) == 1 and labels[0] != labels[10]
    assert labels[20] == labels[0]  # 2 s of 42 s is under 15%: folded into the nearest voice


def test_cluster_pieces_keeps_one_voice_whole():
    rng = np.random.default_rng(1)
    emb = _voice(rng, np.eye(16)[0], 12)
    assert set(cluster_pieces(emb, np.full(12, 2.0), ReclusterOptions(), 24.0)) == {0}


def test_recluster_splits_a_merged_speaker_and_relabels_overlapping_turns_consistently():
    """Frames: 'A' and 'C' voices alternate inside pyannote's SPEAKER_00; SPEAKER_01 is a third voice."""
    frame_s, dim = 0.02, 8
    voices = {"A": np.eye(dim)[0], "B": np.eye(dim)[1], "C": np.eye(dim)[2]}
    truth = [(0, 4, "A"), (4.5, 8.5, "C"), (9, 13, "B"), (13.5, 17.5, "A"), (18, 22, "C")]
    n = int(23 / frame_s)
    frames = np.zeros((dim, n), dtype=np.float32)
    rng = np.random.default_rng(2)
    for s, e, v in truth:
        a, b = int(s / frame_s), int(e / frame_s)
        frames[:, a:b] = voices[v][:, None] + 0.05 * rng.standard_normal((dim, b - a))
    first_pass = {"A": "SPEAKER_00", "C": "SPEAKER_00", "B": "SPEAKER_01"}
    exclusive = tuple(SpeakerTurn(s, e, first_pass[v]) for s, e, v in truth)
    overlapping = exclusive + (SpeakerTurn(12.5, 14.0, "SPEAKER_00"),)  # SPEAKER_00 (A) talks over B

    def pool(chunk, weights):  # mean of the weighted frames, as a stand-in for CAM++'s pooling head
        return (chunk * weights[:, None, :]).sum(-1) / weights.sum(-1, keepdim=True)

    new_exclusive, new_turns = recluster(exclusive, overlapping, torch.from_numpy(frames), pool, frame_s)
    label_of = {}
    for (s, e, v), t in zip(truth, new_exclusive):
        assert (t.start, t.end) == (s, e)
        label_of.setdefault(v, set()).add(t.speaker)
    assert all(len(x) == 1 for x in label_of.values())
    assert len(set.union(*label_of.values())) == 3  # A, B and C apart
    (a_label,) = label_of["A"]
    assert any(t.speaker == a_label and t.start <= 12.5 and t.end >= 14.0 for t in new_turns)
    assert {t.speaker for t in new_turns} == {t.speaker for t in new_exclusive}


def test_join_merges_touching_turns_of_one_speaker_only():
    joined = join([SpeakerTurn(0, 1, "X"), SpeakerTurn(1, 2, "X"), SpeakerTurn(2, 3, "Y"), SpeakerTurn(3.5, 4, "X")])
    assert joined == (SpeakerTurn(0, 2, "X"), SpeakerTurn(2, 3, "Y"), SpeakerTurn(3.5, 4, "X"))


def test_widen_to_turns_reaches_turn_edges_but_never_a_neighbour():
    turns = (SpeakerTurn(0.5, 4.0, "A"), SpeakerTurn(4.2, 9.0, "B"))
    entries = [
        Utterance("A", 1.0, 3.5, " one"),
        Utterance("B", 4.6, 6.0, " two"),
        Utterance("B", 6.4, 8.0, " three"),  # same turn as "two": they meet, they do not overlap
    ]
    out = widen_to_turns(entries, turns)
    assert [(u.start, u.end) for u in out] == [(0.5, 4.0), (4.2, 6.4), (6.4, 9.0)]
    assert all(u.text == e.text for u, e in zip(out, entries))
    for prev, cur in zip(out, out[1:]):
        assert prev.end <= cur.start + 1e-9


def test_widen_to_turns_never_shortens_and_ignores_entries_outside_turns():
    turns = (SpeakerTurn(2.0, 3.0, "A"),)
    entries = [Utterance("A", 1.0, 3.5, " x"), Utterance("B", 5.0, 6.0, " y")]
    out = widen_to_turns(entries, turns)
    assert [(u.start, u.end) for u in out] == [(1.0, 3.5), (5.0, 6.0)]
