"""The HTTP layer without a socket: routes called with a starlette Request built from an ASGI scope, the parsers
and the error table called directly. (The same routes over a real server: test_server, test_faults, test_hostile.)"""

from __future__ import annotations

import json

import anyio
import pytest
from starlette.requests import Request

from speakerscribe.errors import AudioTooLongError, CapacityError, InputError, ModelLoadError, RequestCancelled
from speakerscribe.models.settings import parse_parameters
from speakerscribe.records import Chunk, Result, Transcript
from speakerscribe.serve import endpoints, openai
from speakerscribe.serve.app import create_app, health
from speakerscribe.serve.errors import HttpError, http_error
from speakerscribe.serve.service import ServerSettings


class RecordingHandler:
    """Parameters checked by the real code; ``process`` records what reached it and answers one chunk."""

    def __init__(self, diarizer: bool = False):
        self.has_diarizer = diarizer
        self.seen: list[dict] = []

    def check_parameters(self, parameters):
        return parse_parameters(parameters).to_options()

    def process(self, data, cancel=None, consume=False):
        options = self.check_parameters(data.get("parameters"))
        self.seen.append(data)
        transcript = Transcript(chunks=(Chunk(0.0, 1.5, " hello there"),), language="en")
        return Result(transcript=transcript, duration=1.5), options


def make_app(handler, **settings):
    app = create_app(lambda: handler, ServerSettings(**settings))
    app.state.server.handler = handler  # as if loading had finished
    return app


def call(app, route, method: str, path: str, body: bytes = b"", headers: dict | None = None, query: bytes = b""):
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": query,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
        "app": app,
        "http_version": "1.1",
        "scheme": "http",
        "server": ("testserver", 80),
        "client": ("testclient", 1),
    }
    messages = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive():
        if messages:
            return messages.pop(0)
        await anyio.sleep_forever()  # the client stays connected

    async def go():
        return await route(Request(scope, receive))

    return anyio.run(go)


def test_predict_json_answers_the_handlers_result_with_a_request_id():
    handler = RecordingHandler()
    body = json.dumps({"inputs": "AAAA", "parameters": {"num_speakers": 2}}).encode()
    response = call(
        make_app(handler), endpoints.predict, "POST", "/predict", body, {"content-type": "application/json"}
    )
    assert response.status_code == 200
    out = json.loads(response.body)
    assert out["text"] == " hello there" and out["chunks"][0]["timestamp"] == [0.0, 1.5]
    assert response.headers["x-request-id"]
    assert handler.seen[0]["parameters"] == {"num_speakers": 2}


def test_predict_audio_body_takes_parameters_from_the_query_string():
    handler = RecordingHandler()
    response = call(
        make_app(handler),
        endpoints.predict,
        "POST",
        "/predict",
        b"RIFF....WAVE",
        {"content-type": "audio/wav"},
        b"num_speakers=2&vad_filter=false&language=en",
    )
    assert response.status_code == 200
    assert handler.seen[0] == {
        "inputs": b"RIFF....WAVE",
        "parameters": {"num_speakers": 2, "vad_filter": False, "language": "en"},
    }


def test_predict_refuses_other_content_types_with_415_and_bad_parameters_with_400_before_processing():
    handler = RecordingHandler()
    app = make_app(handler)
    text = call(app, endpoints.predict, "POST", "/", b"hello", {"content-type": "text/plain"})
    assert text.status_code == 415 and "audio/*" in json.loads(text.body)["error"]
    body = json.dumps({"inputs": "AAAA", "parameters": {"num_speakers": 0}}).encode()
    bad = call(app, endpoints.predict, "POST", "/", body, {"content-type": "application/json"})
    assert bad.status_code == 400 and "num_speakers" in json.loads(bad.body)["error"]
    assert handler.seen == []


def test_bearer_token_is_required_when_configured():
    handler = RecordingHandler()
    app = make_app(handler, api_token="s3cret")
    body = json.dumps({"inputs": "AAAA"}).encode()
    missing = call(app, endpoints.predict, "POST", "/", body, {"content-type": "application/json"})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    good = call(
        app,
        endpoints.predict,
        "POST",
        "/",
        body,
        {"content-type": "application/json", "authorization": "Bearer s3cret"},
    )
    assert good.status_code == 200 and len(handler.seen) == 1


def test_health_reports_loading_then_ok():
    handler = RecordingHandler()
    app = create_app(lambda: handler, ServerSettings())
    assert call(app, health, "GET", "/health").status_code == 503
    app.state.server.handler = handler
    assert call(app, health, "GET", "/health").body == b"Ok"


OPENAI_PATH = "/v1/audio/transcriptions"


def _multipart(fields: dict[str, str], audio: bytes) -> tuple[bytes, str]:
    boundary = "speakerscribe-test-boundary"
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\n'
        "Content-Type: audio/wav\r\n\r\n".encode()
        + audio
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def test_openai_route_renders_the_requested_format_and_passes_extra_fields():
    handler = RecordingHandler()
    body, ctype = _multipart({"model": "whisper-1", "response_format": "text", "vad_filter": "false"}, b"RIFF")
    response = call(
        make_app(handler), openai.transcriptions, "POST", "/v1/audio/transcriptions", body, {"content-type": ctype}
    )
    assert response.status_code == 200 and response.body == b"hello there\n"
    assert handler.seen[0] == {"inputs": b"RIFF", "parameters": {"vad_filter": "false"}}


def test_openai_route_errors_have_openais_shape():
    handler = RecordingHandler(diarizer=False)
    body, ctype = _multipart({"response_format": "diarized_json"}, b"RIFF")
    response = call(
        make_app(handler), openai.transcriptions, "POST", "/v1/audio/transcriptions", body, {"content-type": ctype}
    )
    assert response.status_code == 400
    error = json.loads(response.body)["error"]
    assert error["type"] == "invalid_request_error" and "DIARIZATION_MODEL" in error["message"]
    plain = call(
        make_app(handler),
        openai.transcriptions,
        "POST",
        "/v1/audio/transcriptions",
        b"{}",
        {"content-type": "application/json"},
    )
    assert plain.status_code == 415 and "multipart/form-data" in json.loads(plain.body)["error"]["message"]


def test_query_parameters_convert_as_the_endpoints_runtime_does():
    items = [("batch_size", "4"), ("assisted", "True"), ("language", "en"), ("big", "1" * 19), ("neg", "-3")]
    assert endpoints.query_parameters(items) == {
        "batch_size": 4,
        "assisted": True,
        "language": "en",
        "big": "1" * 19,
        "neg": -3,
    }
    assert endpoints.parse_json(b'\xef\xbb\xbf {"inputs": "x"}') == {"inputs": "x"}
    with pytest.raises(InputError, match="not valid JSON"):
        endpoints.parse_json(b"{nope")


@pytest.mark.parametrize(
    "exc, status",
    [
        (AudioTooLongError("long"), 413),
        (InputError("bad"), 400),
        (RequestCancelled("deadline"), 504),
        (RequestCancelled("shutdown"), 503),
        (CapacityError("oom"), 503),
        (ModelLoadError("gone"), 503),
        (HttpError(408, "slow"), 408),
    ],
)
def test_each_failure_kind_has_its_status(exc, status):
    assert http_error(exc).status == status


def test_a_gone_client_and_our_own_bugs_have_no_mapped_answer():
    assert http_error(RequestCancelled("disconnected")) is None
    assert http_error(ValueError("a bug of ours")) is None  # the service answers 500 and logs the traceback
