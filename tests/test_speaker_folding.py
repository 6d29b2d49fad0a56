"""fold_speakers: stray speakers into the nearest voice, alike speakers into one (speaker-level records only)."""

from __future__ import annotations

import numpy as np

from speakerscribe.diarization.speaker_folding import fold_speakers

# four speakers: A, B, a short piece that sounds like B, and a longer one that sounds mostly like A
VOICES = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.1, 1.0, 0.0], [0.9, 0.1, 0.4]])
SECONDS = np.array([30.0, 20.0, 1.0, 6.0])


def test_the_smallest_fold_first_each_into_the_nearest_voice():
    assert fold_speakers(VOICES, SECONDS, fold=1).tolist() == [0, 1, 1, 3]
    assert fold_speakers(VOICES, SECONDS, fold=2).tolist() == [0, 1, 1, 0]
    assert fold_speakers(VOICES, SECONDS).tolist() == [0, 1, 2, 3]  # nothing asked, nothing moves


def test_a_speaker_never_folds_into_itself_and_the_floor_holds():
    assert fold_speakers(VOICES, SECONDS, fold=10).tolist() == [0, 0, 0, 0]  # everyone into one, at most
    assert fold_speakers(VOICES, SECONDS, fold=10, least=3).tolist() == [0, 1, 1, 3]
    assert fold_speakers(VOICES[:1], SECONDS[:1], fold=1).tolist() == [0]


def test_alike_speakers_join_under_the_label_holding_more_speech():
    # B-like (1 s) and B are alike (0.995); A-like (6 s) and A at 0.91; A and B not at all
    assert fold_speakers(VOICES, SECONDS, alike=0.99).tolist() == [0, 1, 1, 3]
    assert fold_speakers(VOICES, SECONDS, alike=0.9).tolist() == [0, 1, 1, 0]
    assert fold_speakers(VOICES, SECONDS, alike=0.9, least=3).tolist() == [0, 1, 1, 3]
    assert fold_speakers(VOICES, SECONDS, alike=0.999).tolist() == [0, 1, 2, 3]
    held_more_by_the_second = np.array([1.0, 20.0, 30.0, 6.0])
    assert fold_speakers(VOICES, held_more_by_the_second, alike=0.99).tolist() == [0, 2, 2, 3]


def test_a_group_sounds_like_all_it_holds():
    # C sits between A and B: alike to neither alone (0.71), but after A and A' join, the group is still A
    voices = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [1.0, 0.05]])
    target = fold_speakers(voices, np.array([10.0, 10.0, 10.0, 10.0]), alike=0.9)
    assert target.tolist() == [0, 1, 2, 0]
