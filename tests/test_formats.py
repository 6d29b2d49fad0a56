"""Output formats from hand-built results: clock arithmetic past one hour, SRT/VTT/RTTM, OpenAI shapes."""

from __future__ import annotations

import pytest

from speakerscribe.formats import (
    clock,
    render,
    to_openai_diarized,
    to_openai_verbose,
    to_rttm,
    to_srt,
    to_text,
    to_vtt,
)
from speakerscribe.records import Chunk, Diarization, Result, SpeakerTurn, Transcript, Utterance, Word


@pytest.mark.parametrize(
    "seconds, sep, expected",
    [
        (0, ".", "00:00:00.000"),
        (3725.5, ".", "01:02:05.500"),
        (3725.5, ",", "01:02:05,500"),
        (59.9996, ".", "00:01:00.000"),  # rounding carries into the minutes
        (3599.9999, ",", "01:00:00,000"),
        (360000.25, ".", "100:00:00.250"),
        (-0.2, ".", "00:00:00.000"),
    ],
)
def test_clock(seconds, sep, expected):
    assert clock(seconds, sep) == expected


def result(diarized: bool = True) -> Result:
    words = (Word(" Hi", 3600.0, 3600.4), Word(" <there>", 3600.5, 3601.0))
    chunks = (Chunk(3600.0, 3601.0, " Hi <there>", words, -0.2, 0.01), Chunk(3602.0, 3603.5, " Bye & go"))
    utterances = (
        Utterance(
            "SPEAKER_00",
            3600.0,
            3601.0,
            " Hi <there>",
            tuple(Word(w.text, w.start, w.end, None, "SPEAKER_00") for w in words),
        ),
        Utterance("SPEAKER_01", 3602.0, 3603.5, " Bye & go"),
    )
    turns = (SpeakerTurn(3599.9, 3601.2, "SPEAKER_00"), SpeakerTurn(3601.9, 3603.6, "SPEAKER_01"))
    return Result(
        transcript=Transcript(chunks, "en", 0.98),
        duration=3605.0,
        utterances=utterances if diarized else (),
        diarization=Diarization(turns, turns) if diarized else None,
    )


def test_srt_numbering_times_and_speakers():
    blocks = to_srt(result()).strip().split("\n\n")
    assert blocks[0] == "1\n01:00:00,000 --> 01:00:01,000\nSPEAKER_00: Hi <there>"
    assert blocks[1] == "2\n01:00:02,000 --> 01:00:03,500\nSPEAKER_01: Bye & go"


def test_vtt_voice_tags_and_escaping():
    lines = to_vtt(result()).split("\n")
    assert lines[:4] == ["WEBVTT", "", "01:00:00.000 --> 01:00:01.000", "<v SPEAKER_00>Hi &lt;there&gt;"]
    assert "<v SPEAKER_01>Bye &amp; go" in lines


def test_without_diarization_entries_are_chunks_without_speakers():
    r = result(diarized=False)
    assert to_srt(r).split("\n")[2] == "Hi <there>"
    assert "<v " not in to_vtt(r)
    assert to_rttm(r) == ""
    assert to_text(r).startswith("[01:00:00.000 --> 01:00:01.000] Hi <there>")


def test_rttm_lines():
    lines = to_rttm(result(), uri="my file").splitlines()
    assert lines[0] == "SPEAKER my_file 1 3599.900 1.300 <NA> <NA> SPEAKER_00 <NA> <NA>"
    assert len(lines) == 2


def test_openai_verbose_and_diarized():
    verbose = to_openai_verbose(result(), words=True)
    assert verbose["language"] == "en" and verbose["duration"] == 3605.0
    assert verbose["segments"][0]["avg_logprob"] == -0.2 and verbose["segments"][0]["no_speech_prob"] == 0.01
    assert verbose["words"][0] == {"word": "Hi", "start": 3600.0, "end": 3600.4, "speaker": "SPEAKER_00"}
    diarized = to_openai_diarized(result())
    assert [s["speaker"] for s in diarized["segments"]] == ["SPEAKER_00", "SPEAKER_01"]
    assert diarized["segments"][1] == {
        "type": "transcript.text.segment",
        "id": "seg_1",
        "start": 3602.0,
        "end": 3603.5,
        "speaker": "SPEAKER_01",
        "text": "Bye & go",
    }


def test_render_json_is_the_endpoint_response_and_unknown_format_fails():
    import json

    data = json.loads(render(result(), "json", words=True))
    assert data["speakers"][0]["words"][0]["speaker"] == "SPEAKER_00"
    with pytest.raises(ValueError, match="docx"):
        render(result(), "docx")


@pytest.mark.parametrize("diarized", [True, False])
def test_an_endpoints_json_answer_renders_as_the_result_it_came_from(diarized):
    from speakerscribe.formats import render
    from speakerscribe.response import endpoint_response, result_from_response

    original = result(diarized)
    back = result_from_response(endpoint_response(original, words=True))
    for fmt in ("txt", "srt", "vtt"):
        assert render(back, fmt) == render(original, fmt), fmt
    assert endpoint_response(back, words=True)["speakers"] == endpoint_response(original, words=True)["speakers"]
