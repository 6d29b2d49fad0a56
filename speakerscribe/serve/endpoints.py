"""The Inference Endpoints contract: ``POST /`` and ``POST /predict``.

A JSON body ``{"inputs": <base64 audio or samples>, "parameters": {...}}``, or the audio file itself as
``audio/*`` (also ``application/octet-stream``, ``video/webm``, ``video/mp4``) with the parameters in the query
string, which the Endpoints runtime converts: digits become numbers, ``true``/``false`` booleans. The answer is the
handler's JSON (:func:`speakerscribe.response.endpoint_response`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..errors import InputError, short_message
from ..response import endpoint_response
from .errors import HttpError, endpoint_error
from .service import Job, serve

AUDIO_TYPES = ("application/octet-stream", "video/webm", "video/mp4")  # besides audio/*


def query_parameters(items) -> dict[str, Any]:
    """Query-string values as the Endpoints runtime converts them: digits -> int, true/false -> bool.
    Digit strings longer than 18 characters stay strings (and fail validation with a 400)."""
    out: dict[str, Any] = {}
    for key, value in items:
        if re.fullmatch(r"-?\d{1,18}", value):
            out[key] = int(value)
        elif value.lower() in ("true", "false"):
            out[key] = value.lower() == "true"
        else:
            out[key] = value
    return out


def parse_json(body: bytes) -> Any:
    """A JSON body (a leading byte-order mark allowed); InputError when it is not JSON."""
    try:
        return json.loads(body.removeprefix(b"\xef\xbb\xbf"))
    except (ValueError, RecursionError) as exc:
        raise InputError(f"the body is not valid JSON: {short_message(exc, 200)}") from None


def looks_like_json(body: bytes) -> bool:
    return body.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")


async def predict_job(content_type: str, query_items, body: bytes, handler) -> Job:
    """The request's body and headers -> the handler's input, checked, and how to render its result.

    JSON is parsed in a worker thread (100 MB of it must not stall the event loop). Raises InputError (400) or
    HttpError (415) naming what is accepted."""
    ctype = content_type.split(";")[0].strip().lower()
    if ctype in ("application/json", "") and looks_like_json(body):
        import anyio

        data = await anyio.to_thread.run_sync(parse_json, body)
    elif ctype.startswith("audio/") or ctype in AUDIO_TYPES:
        data = {"inputs": body, "parameters": query_parameters(query_items)}
    elif ctype == "application/json":
        raise InputError('the body is not a JSON object: send {"inputs": <base64 audio>, "parameters": {...}}')
    else:
        raise HttpError(
            415,
            f"unsupported Content-Type {ctype[:100]!r}: send application/json "
            '({"inputs": <base64>, "parameters": {...}}) or the audio file as audio/*',
        )
    if isinstance(data, dict):  # anything else is refused by the handler with its own message
        handler.check_parameters(data.get("parameters"))
    return Job(data, render)


def render(result, options) -> Response:
    return JSONResponse(endpoint_response(result, words=options.attribution.show_words))


async def _parse(request: Request, body: bytes, handler) -> Job:
    return await predict_job(request.headers.get("content-type", ""), request.query_params.multi_items(), body, handler)


async def predict(request: Request) -> Response:
    return await serve(request, "predict", _parse, endpoint_error)
