"""Live transcription: the session core, both WebSocket protocols against a real server, with real clients (the
openai SDK's realtime client, the websockets library, the streaming CLI), real weights (tiny.en + the offline
CAM++ diarizer) and the festival conversations."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import REPO, make_handler
from test_server import Server

from speakerscribe.live.agreement import Agreement, split_words
from speakerscribe.live.online_speakers import OnlineSpeakers

# ------------------------------------------------------------------------------------------------ pieces


def test_agreement_confirms_what_two_hypotheses_share_and_never_retracts():
    a = Agreement()
    assert a.update(split_words(" Good morning")) == []  # nothing to agree with yet
    assert a.update(split_words(" Good morning every")) == [" Good", " morning"]
    assert a.update(split_words(" Good morning everyone, thanks")) == []  # "every" != "everyone"
    # hypotheses that disagree with the confirmed words confirm nothing, and take nothing back
    assert a.update(split_words(" Could morning everyone, thanks for")) == []
    assert a.update(split_words(" Good morning, everyone thanks for joining")) == []
    assert a.text == " Good morning"
    # agreement ignores case and punctuation; the newest word ("us") waits
    assert a.update(split_words(" Good morning everyone, thanks for joining us")) == [
        " everyone,", " thanks", " for", " joining"
    ]  # fmt: skip
    assert a.finish(split_words(" Good morning everyone, thanks for joining us.")) == [" us."]
    assert a.text == " Good morning everyone, thanks for joining us."


def test_agreement_deltas_always_add_up_to_the_transcript():
    rng = np.random.default_rng(0)
    vocabulary = [" alpha", " beta", " gamma", " delta", " epsilon"]
    for _ in range(200):
        truth = list(rng.choice(vocabulary, size=12))
        a, sent = Agreement(), []
        for n in range(1, 13):
            hypothesis = truth[:n]
            if rng.random() < 0.3:  # a noisy decode
                hypothesis = [vocabulary[rng.integers(5)] if rng.random() < 0.3 else w for w in hypothesis]
            sent += a.update(hypothesis)
            assert "".join(sent) == a.text  # what was sent is exactly what is confirmed: nothing retracted
        sent += a.finish(truth)
        assert "".join(sent) == a.text and len(a.confirmed) == 12


def test_online_speakers_join_split_and_keep_short_turns():
    s = OnlineSpeakers(threshold=0.6, min_new_s=1.0)
    x, y = np.array([1.0, 0.1, 0.0]), np.array([0.0, 1.0, 0.2])
    assert s.assign(x, 3.0) == ("SPEAKER_00", None)
    assert s.assign(y, 2.0) == ("SPEAKER_01", None)
    label, sim = s.assign(x + 0.05, 2.0)
    assert label == "SPEAKER_00" and sim > 0.9
    # too short to found a speaker: it joins the nearest, however far
    assert s.assign(np.array([0.0, 0.0, 1.0]), 0.5)[0] in ("SPEAKER_00", "SPEAKER_01") and len(s.centroids) == 2
    assert s.assign(np.array([0.0, 0.0, 1.0]), 2.0) == ("SPEAKER_02", None)


def test_streaming_vad_equals_the_batch_vad(meeting):
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.audio.vad import SileroVAD, new_stream

    samples = decode_audio(meeting.wav.read_bytes()).waveform.samples[: 16000 * 12]
    vad = SileroVAD(streams=1)
    whole = vad.probabilities(samples)
    stream = new_stream(vad)
    pieces = np.concatenate([stream.feed(samples[i : i + 700]) for i in range(0, len(samples), 700)])
    assert len(pieces) == len(samples) // 512 and np.abs(whole[: len(pieces)] - pieces).max() < 1e-5


def test_both_protocols_configure_a_session_with_the_same_checks():
    """The binary protocol's config message and the realtime session.update go through one set of checks
    (updated_options): what a message names is checked and applied, what it does not name is kept."""
    from speakerscribe.serve.realtime import RealtimeProtocol
    from speakerscribe.serve.streaming import ProtocolError
    from speakerscribe.serve.ws import BinaryProtocol

    binary = BinaryProtocol()
    first = binary.parse({"text": json.dumps({"type": "config", "language": "en", "turn_detection": None})})[0]
    assert first.options.language == "en" and first.options.turn_detection is None
    assert first.reply == {"type": "ready", "config": binary.config()} and binary.config()["turn_detection"] is None
    second = binary.parse({"text": json.dumps({"type": "config", "prompt": "AMI", "speaker_threshold": 0.4})})[0]
    assert (second.options.language, second.options.prompt, second.options.turn_detection) == ("en", "AMI", None)
    assert second.options.speaker_threshold == 0.4
    realtime = RealtimeProtocol()
    update = {"audio": {"input": {"transcription": {"language": "en"}, "turn_detection": None}}}
    done = realtime.parse({"text": json.dumps({"type": "session.update", "session": update})})[0]
    assert done.options == first.options  # the same message in either protocol, the same options
    bad = [
        ({"turn_detection": {"threshold": 7}}, "threshold"),
        ({"turn_detection": {"type": "semantic_vad"}}, "server_vad"),
        ({"language": 5}, "language"),
        ({"final_diarization": "yes"}, "final_diarization"),
        ({"speaker_threshold": 2}, "speaker_threshold"),
    ]
    for fields, named in bad:
        with pytest.raises(ProtocolError) as binary_error:
            binary.parse({"text": json.dumps({"type": "config", **fields})})
        assert binary_error.value.code == "invalid_config" and named in str(binary_error.value)
    assert binary.options == second.options  # a refused message changes nothing
    with pytest.raises(ProtocolError) as realtime_error:
        session = {"audio": {"input": {"transcription": {"language": 5}}}}
        realtime.parse({"text": json.dumps({"type": "session.update", "event_id": "e1", "session": session})})
    assert realtime_error.value.code == "invalid_session" and realtime_error.value.event_id == "e1"


# --------------------------------------------------------------------------------------- session, real weights
@pytest.fixture(scope="module")
def handler(real_models):
    return make_handler(
        ASR_MODEL=str(real_models / "whisper-tiny.en"), DIARIZATION_MODEL=str(real_models / "diarization")
    )


@pytest.fixture(scope="module")
def conversations(speech_dir):
    from speakerscribe_dev.conversation import MEETING, long_conversation, synthesize

    return {
        "meeting": synthesize(MEETING, speech_dir, "meeting"),
        "several_minutes": synthesize(long_conversation(60, seed=2), speech_dir, "conv60"),  # ~4 min
    }


def stream_session(handler, samples, options=None, partials=True, block=1600):
    from speakerscribe.live.session import StreamOptions, StreamSession

    session = StreamSession(handler.transcriber, options or StreamOptions())
    events, buffers = [], []
    for i in range(0, len(samples), block):
        events += session.append(samples[i : i + block])
        if partials:
            events += session.idle()
        buffers.append(len(session.buffer))
    events += session.finish()
    return events, max(buffers)


def word_speakers(words: list[dict], times: np.ndarray) -> list[str | None]:
    """The speaker of the word around each time (None between words)."""
    out = []
    for t in times:
        hit = [w["speaker"] for w in words if w["start"] - 0.05 <= t <= w["end"] + 0.05 and w.get("speaker")]
        out.append(hit[0] if hit else None)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", ["meeting", "several_minutes"])
def test_streamed_transcript_and_speakers_match_batch(handler, conversations, name):
    """Partial decodes run after every 100 ms block on the meeting; the four-minute conversation is sent as a client
    sending faster than real time would (no partials), which keeps the test's time down."""
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.live.session import Completed, Delta, Summary
    from speakerscribe.response import word_json
    from speakerscribe_dev.evaluation import optimal_mapping, wer

    conversation = conversations[name]
    samples = decode_audio(conversation.wav.read_bytes()).waveform.samples
    batch = handler({"inputs": conversation.wav.read_bytes(), "parameters": {"return_timestamps": "word"}})
    events, largest_buffer = stream_session(handler, samples, partials=name != "several_minutes")
    finals = [e for e in events if isinstance(e, Completed)]
    # finals never overlap and times only grow
    assert all(a.end <= b.start + 1e-6 for a, b in zip(finals, finals[1:]))
    for f in finals:
        starts = [w.start for w in f.words]
        assert starts == sorted(starts) and all(f.start - 1e-3 <= w.start <= f.end + 1e-3 for w in f.words)
    # deltas only append (nothing to retract by construction); completed is authoritative and differs from the
    # deltas only where a partial decode confirmed a word that the whole turn is heard otherwise: rarely
    sent: dict[str, str] = {}
    for e in events:
        if isinstance(e, Delta):
            sent[e.item_id] = sent.get(e.item_id, "") + e.text
    assert set(sent) <= {f.item_id for f in finals}
    delta_text = "".join(sent.get(f.item_id, "") for f in finals)
    assert wer("".join(f.text for f in finals), delta_text) <= 0.2
    # WER within 2 points of the batch result
    streamed = "".join(f.text for f in finals)
    gap = wer(conversation.reference_text, streamed) - wer(conversation.reference_text, batch["text"])
    assert gap <= 0.02, (gap, streamed)
    # speakers: the live labels, mapped one-to-one onto the batch labels, agree on nearly every word
    live_words = [word_json(w) for f in finals for w in f.words]
    batch_words = [w for c in batch["speakers"] for w in c["words"]]
    times = np.array([(w["start"] + w["end"]) / 2 for w in live_words])
    theirs = word_speakers(batch_words, times)
    pairs = [(a["speaker"], b) for a, b in zip(live_words, theirs) if b is not None]
    spans = [(t - 0.1, t + 0.1, s) for t, (s, _) in zip(times, pairs)]
    mapping = optimal_mapping([(t - 0.1, t + 0.1, b) for t, (_, b) in zip(times, pairs)], spans)
    agree = np.mean([mapping.get(a) == b for a, b in pairs])
    assert agree >= 0.9, agree
    # memory: the session held at most one turn (plus padding), never the whole conversation
    assert largest_buffer <= 16000 * 26
    summary = [e for e in events if isinstance(e, Summary)][0]
    assert len(summary.result.utterances) == len([f for f in finals if f.text.strip()])


# ------------------------------------------------------------------------------------------- server, clients
def live_env(real_models, **extra) -> dict[str, str]:
    return {
        "ASR_MODEL": str(real_models / "whisper-tiny.en"),
        "DIARIZATION_MODEL": str(real_models / "diarization"),
        "HF_HUB_OFFLINE": "1",
        "PYANNOTE_METRICS_ENABLED": "false",
        **extra,
    }


@pytest.fixture(scope="module")
def live_server(real_models, tmp_path_factory):
    env = live_env(real_models, MAX_STREAMS="2", STREAM_IDLE_TIMEOUT_S="3", MAX_STREAM_SECONDS="300")
    s = Server(env, tmp_path_factory.mktemp("live") / "server.log")
    s.wait_ready()
    yield s
    s.stop()


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


@pytest.fixture(scope="module")
def meeting_audio(meeting):
    from speakerscribe.audio.decode import decode_audio

    return decode_audio(meeting.wav.read_bytes()).waveform.samples


@pytest.mark.slow
def test_openai_sdk_realtime_client(live_server, meeting_audio, meeting):
    """The openai SDK's own realtime client, pointed at the local server, at 24 kHz as OpenAI clients send."""
    from openai import OpenAI

    from speakerscribe.audio.decode import resample

    client = OpenAI(base_url=live_server.url + "/v1", api_key="unused", max_retries=0)
    audio = pcm16(resample(meeting_audio, 16000, 24000))
    kinds, finals, deltas = [], [], {}
    with client.realtime.connect(extra_query={"intent": "transcription"}, max_retries=0) as conn:
        conn.session.update(
            session={
                "type": "transcription",
                "audio": {
                    "input": {
                        "format": {"type": "audio/pcm", "rate": 24000},
                        "transcription": {"model": "gpt-4o-transcribe", "language": "en"},
                        "turn_detection": {"type": "server_vad", "silence_duration_ms": 500},
                    }
                },
            }
        )
        step = 24000 * 2 // 5  # 200 ms
        for i in range(0, len(audio), step):
            conn.input_audio_buffer.append(audio=base64.b64encode(audio[i : i + step]).decode())
        conn.send({"type": "session.finish"})
        for event in conn:
            kinds.append(event.type)
            if event.type == "conversation.item.input_audio_transcription.delta":
                deltas[event.item_id] = deltas.get(event.item_id, "") + event.delta
            if event.type == "conversation.item.input_audio_transcription.completed":
                finals.append(event)
            if event.type == "transcription.summary" or event.type == "error":
                break
    assert kinds[0] == "session.created" and "session.updated" in kinds and "error" not in kinds
    assert kinds.count("input_audio_buffer.speech_started") == kinds.count("input_audio_buffer.committed") >= 8
    assert kinds[-1] == "transcription.summary"
    text = "".join(f.transcript for f in finals)
    from speakerscribe_dev.evaluation import wer

    assert wer(meeting.reference_text, text) < 0.25
    assert wer(text, "".join(deltas.get(f.item_id, "") for f in finals)) <= 0.2  # deltas: what partials heard
    extra = finals[0].model_extra or {}
    assert extra["speaker"] == "SPEAKER_00" and extra["words"] and extra["end"] > extra["start"]
    assert len({(f.model_extra or {})["speaker"] for f in finals}) == 2


def ws_connect(server, path, **kwargs):
    from websockets.sync.client import connect

    return connect(server.url.replace("http://", "ws://") + path, open_timeout=30, **kwargs)


def receive_until(ws, kind: str, limit_s: float = 300.0) -> list[dict]:
    out = []
    deadline = time.time() + limit_s
    while time.time() < deadline:
        message = json.loads(ws.recv(timeout=limit_s))
        out.append(message)
        if message.get("type") == kind:
            return out
    raise TimeoutError(out)


@pytest.mark.slow
def test_binary_protocol_survives_bad_frames(live_server, meeting_audio):
    with ws_connect(live_server, "/ws") as ws:
        assert json.loads(ws.recv())["type"] == "ready"
        ws.send(b"\x01\x02\x03")  # odd length: not whole samples
        ws.send("not json at all")
        ws.send(json.dumps({"type": "dance"}))
        ws.send(json.dumps({"type": "config", "turn_detection": {"threshold": 7}}))
        data = pcm16(meeting_audio[: 16000 * 12])
        for i in range(0, len(data), 1024):
            ws.send(data[i : i + 1024])
        ws.send("END_OF_AUDIO")
        messages = receive_until(ws, "summary")
    errors = [m for m in messages if m["type"] == "error"]
    assert [e["code"] for e in errors] == ["invalid_audio", "invalid_request", "unsupported_event", "invalid_config"]
    assert "pcm16" in errors[0]["message"] and "threshold" in errors[3]["message"]
    finals = [m for m in messages if m["type"] == "final"]
    assert len(finals) >= 2 and "morning" in finals[0]["text"].lower()
    assert messages[-1]["type"] == "summary" and len(messages[-1]["segments"]) == len(finals)
    assert requests_health(live_server) == 200


def requests_health(server) -> int:
    import requests

    return requests.get(server.url + "/health", timeout=10).status_code


@pytest.mark.slow
def test_manual_commits_and_buffer_errors(live_server, meeting_audio):
    with ws_connect(live_server, "/v1/realtime?intent=transcription") as ws:
        assert json.loads(ws.recv())["type"] == "session.created"
        update = {
            "type": "transcription",
            "audio": {"input": {"format": {"type": "audio/pcm", "rate": 16000}, "turn_detection": None}},
        }
        ws.send(json.dumps({"type": "session.update", "session": update}))
        assert json.loads(ws.recv())["session"]["audio"]["input"]["turn_detection"] is None
        ws.send(json.dumps({"type": "input_audio_buffer.commit", "event_id": "c1"}))  # nothing to commit
        error = json.loads(ws.recv())
        assert error["type"] == "error" and error["error"]["event_id"] == "c1" and "empty" in error["error"]["message"]
        chunk = base64.b64encode(pcm16(meeting_audio[: 16000 * 4])).decode()
        ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
        ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        got = receive_until(ws, "conversation.item.input_audio_transcription.completed")
        assert got[-1]["transcript"].strip().lower().startswith("good morning")
        assert any(m["type"] == "input_audio_buffer.committed" for m in got)
        ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": "@@not base64@@"}))
        assert json.loads(ws.recv())["error"]["code"] == "invalid_audio"
        ws.send(json.dumps({"type": "session.update", "session": update}))  # after audio: refused
        assert json.loads(ws.recv())["error"]["code"] == "too_late"
        ws.send(json.dumps({"type": "session.finish"}))
        assert receive_until(ws, "transcription.summary")[-1]["rediarized"] is False


@pytest.mark.slow
def test_limits_idle_and_sessions(live_server):
    from websockets.exceptions import ConnectionClosed

    first, second = ws_connect(live_server, "/ws"), ws_connect(live_server, "/ws")
    try:
        assert json.loads(first.recv())["type"] == "ready" and json.loads(second.recv())["type"] == "ready"
        with ws_connect(live_server, "/ws") as third:  # MAX_STREAMS=2
            refused = json.loads(third.recv())
            assert refused["code"] == "unavailable" and "MAX_STREAMS" in refused["message"]
            with pytest.raises(ConnectionClosed) as closed:
                third.recv(timeout=10)
            assert closed.value.rcvd.code == 1013
        # STREAM_IDLE_TIMEOUT_S=3: a silent client is finished and closed
        messages = receive_until(first, "summary", limit_s=20)
        assert messages[0]["code"] == "idle_timeout"
    finally:
        first.close()
        second.close()


@pytest.mark.slow
def test_token_and_message_size(real_models, tmp_path):
    from websockets.exceptions import ConnectionClosed

    env = live_env(real_models, API_TOKEN="s3cret", MAX_MESSAGE_MB="0.05", MAX_STREAM_SECONDS="2")
    server = Server(env, tmp_path / "guarded.log")
    server.wait_ready()
    try:
        with ws_connect(server, "/ws") as ws:
            refused = json.loads(ws.recv())
            assert refused["code"] == "unauthorized" and "bearer" in refused["message"].lower()
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1008
        headers = {"Authorization": "Bearer s3cret"}
        with ws_connect(server, "/ws", additional_headers=headers) as ws:
            assert json.loads(ws.recv())["type"] == "ready"
            ws.send(b"\x00\x00" * 40000)  # 80 kB: over MAX_MESSAGE_MB
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=10)
            assert closed.value.rcvd.code == 1009
        with ws_connect(server, "/ws", additional_headers=headers) as ws:  # MAX_STREAM_SECONDS=2
            assert json.loads(ws.recv())["type"] == "ready"
            for _ in range(5):
                ws.send(b"\x00\x00" * 16000)
            messages = receive_until(ws, "summary", limit_s=30)
            assert [m["code"] for m in messages if m["type"] == "error"] == ["session_limit"]
        assert requests_health(server) == 200
    finally:
        server.stop()


@pytest.mark.slow
def test_stream_cli(live_server, meeting):
    done = subprocess.run(
        [sys.executable, "-m", "speakerscribe.stream", str(meeting.wav), "--url", live_server.url, "--fast"],
        cwd=REPO, capture_output=True, text=True, timeout=600, env={**os.environ, "SPEAKERSCRIBE_TOKEN": ""},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0].startswith("[0.") and "SPEAKER_00" in lines[0] and "morning" in lines[0].lower()
    assert lines[-1].startswith("== summary") and len(lines) >= 9
    missing = subprocess.run(
        [sys.executable, "-m", "speakerscribe.stream", "nope.wav"], cwd=REPO, capture_output=True, text=True
    )
    assert missing.returncode == 2 and "no such file" in missing.stderr


@pytest.mark.slow
def test_decodes_ahead_stop_when_the_waiting_audio_overtakes_them(handler, conversations):
    """With the server's waiting audio in view (``session.pending``), a partial decode stops as soon as that audio
    shows the speaker pausing, and a turn decoded ahead during a pause stops when it shows speech resuming; with
    the opposite audio waiting, both run to the end."""
    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.live.session import Overtaken, StreamOptions, StreamSession

    conversation = conversations["meeting"]
    samples = decode_audio(conversation.wav.read_bytes()).waveform.samples
    first, third = conversation.turns[0], conversation.turns[2]
    silence = np.zeros(4800, dtype=np.float32)
    # 0.5 s of the third utterance ending at its loudest 64 ms: speech up to the last frame
    ends = np.arange(int((third.start + 0.6) * 16000), int((third.end - 0.1) * 16000), 512)
    loudest = max(ends, key=lambda e: float(np.sqrt(np.mean(samples[e - 1024 : e] ** 2))))
    speech = samples[loudest - 8000 : loudest]

    def session_at(seconds: float) -> StreamSession:
        session = StreamSession(handler.transcriber, StreamOptions())
        end = int(seconds * 16000)
        for i in range(0, end, 1600):
            session.append(samples[i : min(i + 1600, end)])
        return session

    # mid-utterance: a partial decode
    session = session_at((first.start + first.end) / 2)
    assert session.in_turn and session.silence_frames == 0
    audio = session._audio(session.turn_start, session.received)
    session.pending = lambda: [silence]
    with pytest.raises(Overtaken):
        session._decode(audio, session.partial_options, False, session._lookahead())
    cost, words = session.partial_cost, session.agreement.text
    assert session.partial() == [] and session.partial_cost == cost and session.agreement.text == words
    session.pending = lambda: [speech] * 5  # 2.5 s waiting: the client is ahead, a partial would be stale
    with pytest.raises(Overtaken, match="waiting"):
        session._decode(audio, session.partial_options, False, session._lookahead())
    session.pending = lambda: [speech]
    session.partial_at = session.turn_start
    session.partial()
    assert session.partial_cost > cost  # decoded to the end this time

    # just after the utterance: the turn is decoded ahead during the pause
    session = session_at(first.end + 0.2)
    assert session.in_turn and 1 <= session.silence_frames < session._silence_needed
    session.pending = lambda: [speech]
    assert session.idle() == [] and session.early is None
    session.pending = lambda: [silence]
    session.idle()
    assert session.early is not None and session.early[1] is not None and session.early[1].text.strip()


@pytest.mark.slow
def test_partial_decodes_keep_to_their_share_of_the_time(handler, conversations):
    """A partial waits for PARTIAL_DUTY times as much new audio as the last one took to decode (at least
    partial_every_s), so partials never hold the CPU when the turn ends and its final decode is due."""
    import time

    from speakerscribe.audio.decode import decode_audio
    from speakerscribe.live.session import PARTIAL_DUTY, StreamOptions, StreamSession

    samples = decode_audio(conversations["meeting"].wav.read_bytes()).waveform.samples
    session = StreamSession(handler.transcriber, StreamOptions())
    decode, partials = session._decode, []

    def timed(audio, options, words, lookahead=None):
        started = time.perf_counter()
        out = decode(audio, options, words, lookahead)
        if not words:  # partials decode without word times
            partials.append((session.item_id, session.received, time.perf_counter() - started))
        return out

    session._decode = timed
    for i in range(0, len(samples), 1600):
        session.append(samples[i : i + 1600])
        session.idle()
    session.finish()
    assert len(partials) >= 5
    gaps = [
        (b[1] - a[1]) / 16000 - max(StreamOptions().partial_every_s, PARTIAL_DUTY * a[2])
        for a, b in zip(partials, partials[1:])
        if a[0] == b[0]
    ]
    assert gaps and min(gaps) >= -0.1 - 1e-9, gaps  # one 100 ms block of slack
