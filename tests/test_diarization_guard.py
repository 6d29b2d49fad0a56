"""The service's diarizer on real voices (issue 26), guarded in CI: calibration-group conversations at both
qualities, the diarizer exactly as the service builds it (cannot-link clustering, second pass, a count applied only
when the result without it breaks it). Limits are the calibration measurement of these files
(``benchmarks/sweep_constraints.py``, README "Real voices") plus a margin; the count rule is checked file by file."""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.slow

# calibration conversations (people never in the held-out group), as (quality, people, how many)
CHOSEN = (("telephone", 2, 4), ("meeting", 2, 4), ("telephone", 3, 1), ("meeting", 3, 1))
# mean DER limits per quality: measured on these files with the shipped settings (telephone 0.247, meeting 0.070;
# benchmarks/sweep_constraints.py --per-file, the commands at WIDEBAND_RULES and FOLD_RULES below), plus about 0.03.
# The meeting figure was 0.083 before the wideband rules, 0.150 with them (cal-2p-00 came back as four speakers),
# 0.070 since stray and alike speakers fold (README, "Stray and alike speakers folded")
LIMITS = {"telephone": 0.28, "meeting": 0.10}
BEFORE = {"telephone": 0.40}  # pyannote's clustering with the second pass scored 0.40 or worse on each telephone file
WORSE = 0.02  # a count may cost at most this much DER on any file


@pytest.fixture(scope="module")
def scored(real_models):
    from conftest import REPO
    from pyannote.audio import Pipeline

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.options import SpeakerCounts
    from speakerscribe.runtime import Placement, configure_pyannote_environment
    from speakerscribe_dev import real_voices
    from speakerscribe_dev.evaluation import der_turns
    from speakerscribe_dev.pyannote_cache import cached

    configure_pyannote_environment()
    folder = real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")
    calibration = [c for c in real_voices.load(folder) if c.split == "calibration"]
    calls = []
    for quality, people, take in CHOSEN:
        calls += [c for c in calibration if c.quality == quality and len(c.people) == people][:take]
    # built as the service builds it; segmentation and embeddings kept per file so that the run with the count
    # does not compute them again (the diarizer keeps them within one call anyway)
    pipeline = cached(Pipeline.from_pretrained(real_models / "diarization"), True)
    diarizer = SpeakerDiarizer.from_pipeline(pipeline, Placement("cpu", "float32", "sdpa"))
    rows = []
    for call in calls:
        waveform = decode_audio(call.wav.read_bytes()).waveform
        ref = [(t.start, t.end, t.speaker) for t in call.turns]
        row = {"uri": call.uri, "quality": call.quality, "people": len(call.people)}
        for name, counts in (("none", SpeakerCounts()), ("true", SpeakerCounts(num=len(call.people)))):
            turns = diarizer(waveform, counts).turns
            hyp = [(t.start, t.end, t.speaker) for t in turns]
            row[name] = der_turns(ref, hyp, call.uem)["diarization error rate"]
            row[f"{name}_found"] = len({t.speaker for t in turns})
        rows.append(row)
        print(row)
    return rows


def test_the_service_builds_the_cannot_link_clustering(real_models):
    from pyannote.audio import Pipeline

    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.diarization.pyannote_pipeline import ConstrainedAgglomerativeClustering
    from speakerscribe.runtime import Placement

    diarizer = SpeakerDiarizer.from_pipeline(
        Pipeline.from_pretrained(real_models / "diarization"), Placement("cpu", "float32", "sdpa")
    )
    assert type(diarizer.pipeline.clustering) is ConstrainedAgglomerativeClustering
    assert diarizer.recluster


def test_calibration_conversations_stay_within_their_limits(scored):
    for quality, limit in LIMITS.items():
        ders = [r["none"] for r in scored if r["quality"] == quality]
        assert np.mean(ders) <= limit, (quality, ders)
    telephone = [r["none"] for r in scored if r["quality"] == "telephone"]
    assert np.mean(telephone) < BEFORE["telephone"] - 0.1
    two = [r for r in scored if r["people"] == 2]
    assert sum(r["none_found"] == 2 for r in two) >= len(two) - 1, two


def test_a_true_count_is_never_worse_than_none(scored):
    for r in scored:
        assert r["true"] <= r["none"] + WORSE, r
        assert r["true_found"] <= r["people"], r


# calibration calls where the telephone rules decide (benchmarks/sweep_constraints.py --group calibration --take 10
# --qualities telephone --per-file --only t=0.95,f=0.8,g=0.15 t=0.95,f=0.8,g=0.15,m=0.5,an=0.15): DER without them,
# with them (the shipped settings). Since the second pass splits telephone speakers at its own threshold (0.7,
# SECOND_PASS_RULES below), cal-3p-04 without these rules scores 0.417, not 0.613: the second pass finds part of what
# they find (both still needed: with them 0.279)
TELEPHONE_RULES = {"cal-2p-04.telephone": (0.184, 0.121), "cal-3p-04.telephone": (0.417, 0.279)}
# calibration meetings where the wideband rules decide (benchmarks/sweep_constraints.py --group calibration
# --qualities meeting --per-file --only t=0.95,f=0.8,g=0.15,m=0.5,an=0.15
# t=0.95,f=0.8,g=0.15,m=0.5,an=0.15,mw=0.9,aw=0.15,lw=3,sw=1.1): two voices merged into one, four people found as two
WIDEBAND_RULES = {"cal-2p-10.meeting": (0.405, 0.047), "cal-4p-02.meeting": (0.414, 0.051)}
# calibration meetings where the diarizer's folding decides (benchmarks/sweep_constraints.py --group calibration
# --per-file --only $B $B,fs=0,ac=0 with B=t=0.95,f=0.8,g=0.15,m=0.5,an=0.15,mw=0.9,aw=0.15,lw=3,sw=1.1): two people
# found as four (two alike pairs), a stray 2.9 s speaker, a stray 5.7 s speaker
FOLD_RULES = {
    "cal-2p-00.meeting": (0.458, 0.139),
    "cal-2p-26.meeting": (0.145, 0.065),
    "cal-3p-00.meeting": (0.158, 0.077),
}

# calibration meetings where, with the share and alike rules off, the window evidence alone decides
# (benchmarks/sweep_constraints.py --group calibration --qualities meeting --no-ami --no-festival --per-file --only
# $B,fs=0,ac=0,ap=0 $B,fs=0,ac=0): a stray 2.9 s speaker and a stray 5.7 s speaker, each never in a segmentation
# window with the person they are, each heard beside everyone else
APART_RULES = {"cal-2p-26.meeting": (0.145, 0.065), "cal-3p-00.meeting": (0.158, 0.077)}

# calibration calls where the second pass's telephone threshold decides (benchmarks/sweep_constraints.py --group
# calibration --qualities telephone --no-ami --no-festival --per-file --only $B,rt=0.8 $B): DER without a count at
# the wideband threshold (0.8: one person's two halves left as the two speakers), at the telephone one (0.7)
SECOND_PASS_RULES = {"cal-2p-13.telephone": (0.453, 0.148), "cal-2p-22.telephone": (0.421, 0.119)}
# calibration calls where k-means decides a given count on a telephone line (benchmarks/sweep_constraints.py
# --group calibration --per-file --only $B,kms=0 $B, B as above): DER with the true count without it, with it
# (two people found of four, of three, before)
COUNT_RULES = {"cal-4p-04.telephone": (0.482, 0.300), "cal-3p-01.telephone": (0.318, 0.216)}


def _with_and_without_rules(
    real_models, chosen: dict, narrowband: bool, switch, folding: bool = True, count: bool = False
) -> dict:
    """(DER, speakers found) of each chosen calibration conversation with the rules (``switch(diarizer, True)``) and
    without them, through the diarizer as the service builds it; the channel must be detected. ``folding=False``
    turns the diarizer's stray, alike and apart folding off in both runs (the clustering rules were calibrated
    before it); ``count=True`` asks for the true number of people."""
    from conftest import REPO
    from pyannote.audio import Pipeline

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.diarization.diarizer import SpeakerDiarizer
    from speakerscribe.options import SpeakerCounts
    from speakerscribe.runtime import Placement, configure_pyannote_environment
    from speakerscribe_dev import real_voices
    from speakerscribe_dev.evaluation import der_turns
    from speakerscribe_dev.pyannote_cache import memoise_features

    configure_pyannote_environment()
    folder = real_voices.prepare(REPO / "data" / "real_voices", ami_folder=REPO / "data" / "ami")
    conversations = {c.uri: c for c in real_voices.load(folder) if c.uri in chosen}
    assert set(conversations) == set(chosen)
    diarizer = SpeakerDiarizer.from_pipeline(
        Pipeline.from_pretrained(real_models / "diarization"), Placement("cpu", "float32", "sdpa")
    )
    memoise_features(diarizer.pipeline)  # the second run below reuses segmentation and embeddings
    if not folding:
        diarizer.fold_share, diarizer.alike_cosine, diarizer.apart_share = 0.0, None, 0.0
    clustering = diarizer.pipeline.clustering
    results = {}
    for uri, conversation in conversations.items():
        waveform = decode_audio(conversation.wav.read_bytes()).waveform
        ref = [(t.start, t.end, t.speaker) for t in conversation.turns]
        scores = {}
        for rules in (True, False):
            switch(diarizer, rules)
            counts = SpeakerCounts(num=len(conversation.people)) if count else SpeakerCounts()
            turns = diarizer(waveform, counts).turns
            assert clustering.narrowband == narrowband, uri  # the diarizer heard the channel
            hyp = [(t.start, t.end, t.speaker) for t in turns]
            scores[rules] = (der_turns(ref, hyp, conversation.uem)["diarization error rate"], len({t[2] for t in hyp}))
        print(uri, scores)
        results[uri] = (scores, len(conversation.people))
    switch(diarizer, None)
    return results


def _assert_the_rules_decide(results: dict, chosen: dict) -> None:
    for uri, (scores, people) in results.items():
        before, measured = chosen[uri]
        assert scores[True][1] == people, (uri, scores)
        assert scores[True][0] <= measured + 0.03, (uri, scores)
        assert scores[True][0] < scores[False][0] - 0.05, (uri, scores)
        assert abs(scores[False][0] - before) <= 0.03, (uri, scores)  # without them: as measured before


def test_telephone_calls_get_the_wider_gate_and_fold_mixed_clusters(real_models):
    """On a telephone line (detected from the audio) the constraints also apply where plain linkage merges voices
    heard at once, and a cluster of under 15% of the embeddings folds into the nearest voice: on these calibration
    calls the count comes out right and DER drops well below what the near-pair gate alone gives."""

    def switch(diarizer, rules):
        clustering = diarizer.pipeline.clustering
        if rules is None:  # back to the class's settings
            del clustering.narrowband_merged_share, clustering.narrowband_small_share
            assert (clustering.narrowband_merged_share, clustering.narrowband_small_share) == (0.5, 0.15)
            return
        clustering.narrowband_merged_share = 0.5 if rules else 0.0
        clustering.narrowband_small_share = 0.15 if rules else 0.0

    results = _with_and_without_rules(real_models, TELEPHONE_RULES, True, switch, folding=False)
    _assert_the_rules_decide(results, TELEPHONE_RULES)


def test_meetings_get_the_wider_gate_with_stricter_evidence(real_models):
    """On wideband audio the same two rules apply with stricter evidence (a pair heard at once links only 1.1 or more
    apart, three pairs keep two clusters apart): on these calibration meetings, where the near-pair gate alone
    leaves two voices in one cluster, the count comes out right and DER drops."""

    def switch(diarizer, rules):
        clustering = diarizer.pipeline.clustering
        if rules is None:  # back to the class's settings
            del clustering.wideband_merged_share
            assert clustering.wideband_merged_share == 0.9
            return
        clustering.wideband_merged_share = 0.9 if rules else 0.0

    results = _with_and_without_rules(real_models, WIDEBAND_RULES, False, switch, folding=False)
    _assert_the_rules_decide(results, WIDEBAND_RULES)


def test_stray_and_alike_speakers_fold_into_the_person_they_are(real_models):
    """Once the turns are known, a speaker holding under 9% of the speech folds into the nearest voice, and on
    wideband audio two speakers whose whole speech is 0.65 alike are one: on these calibration meetings the count
    comes out right and DER drops."""
    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    shipped = SpeakerDiarizer(pipeline=None, placement=None)
    assert (shipped.fold_share, shipped.alike_cosine) == (0.09, 0.65)

    def switch(diarizer, rules):
        on = rules is None or rules  # None: back to the shipped settings
        diarizer.fold_share = shipped.fold_share if on else 0.0
        diarizer.alike_cosine = shipped.alike_cosine if on else None
        diarizer.apart_share = shipped.apart_share if on else 0.0  # (it would fold cal-2p-26's stray on its own)

    _assert_the_rules_decide(_with_and_without_rules(real_models, FOLD_RULES, False, switch), FOLD_RULES)


def test_a_piece_never_heard_beside_its_own_voice_folds_into_it(real_models):
    """A speaker under 15% of the speech whom the segmentation model never heard in one window with the speaker
    nearest their voice, though it heard them beside everyone else, is a piece of that speaker: on these calibration
    meetings, with the share and alike rules off, that evidence alone finds both strays."""
    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    shipped = SpeakerDiarizer(pipeline=None, placement=None)
    assert shipped.apart_share == 0.15

    def switch(diarizer, rules):
        diarizer.apart_share = shipped.apart_share if rules is None or rules else 0.0  # None: shipped

    results = _with_and_without_rules(real_models, APART_RULES, False, switch, folding=False)
    _assert_the_rules_decide(results, APART_RULES)


def test_a_count_on_a_telephone_line_is_met_by_kmeans_where_the_floor_leaves_it_short(real_models):
    """Told the true count, where the agglomeration stops short of it on a telephone line (different people sit
    closer than the split floor, so no merge may be undone), k-means told the count finds every person: on these
    calibration calls the count is met and DER drops."""
    from speakerscribe.diarization.pyannote_pipeline import ConstrainedAgglomerativeClustering as Shipped

    assert Shipped.narrowband_count_kmeans_short

    def switch(diarizer, rules):
        clustering = diarizer.pipeline.clustering
        if rules is None:
            del clustering.narrowband_count_kmeans_short
            return
        clustering.narrowband_count_kmeans_short = rules

    results = _with_and_without_rules(real_models, COUNT_RULES, True, switch, count=True)
    _assert_the_rules_decide(results, COUNT_RULES)


def test_the_second_pass_splits_telephone_speakers_at_its_own_threshold(real_models):
    """On a telephone line the second pass clusters its pieces at 0.7 (pieces of different people sit closer than on
    wideband audio, where it uses 0.8): on these calibration calls, where the first pass left both people mixed in
    its two speakers, the speakers come out right and DER drops; on wideband audio the threshold is unchanged."""
    from dataclasses import replace

    from speakerscribe.diarization.diarizer import SpeakerDiarizer

    shipped = SpeakerDiarizer(pipeline=None, placement=None)
    assert (shipped.narrowband_recluster_options.threshold, shipped.recluster_options.threshold) == (0.7, 0.8)

    def switch(diarizer, rules):
        on = rules is None or rules
        diarizer.narrowband_recluster_options = (
            shipped.narrowband_recluster_options
            if on
            else replace(shipped.narrowband_recluster_options, threshold=shipped.recluster_options.threshold)
        )

    results = _with_and_without_rules(real_models, SECOND_PASS_RULES, True, switch)
    _assert_the_rules_decide(results, SECOND_PASS_RULES)
