"""OpenAI's transcription API: ``POST /v1/audio/transcriptions`` (and ``/api/v1/...``), multipart form.

Fields: ``file``, ``model`` (accepted, ignored: the deployment has one model), ``language``, ``prompt``,
``temperature``, ``response_format`` (json, text, srt, verbose_json, vtt, diarized_json),
``timestamp_granularities[]`` (word, segment), ``stream`` (false only), ``chunking_strategy`` (auto only),
``known_speaker_names[]`` + ``known_speaker_references[]`` (names and data-URL clips of people in the recording),
plus the Endpoints parameters as extra fields (``num_speakers``, ``vad_filter``, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

from ..errors import InputError, short_message
from ..formats import to_openai_diarized, to_openai_json, to_openai_verbose, to_srt, to_vtt
from ..models.settings import InferenceConfig
from .errors import HttpError, openai_error
from .service import Job, serve, server_state

OPENAI_FORMATS = ("json", "text", "srt", "verbose_json", "vtt", "diarized_json")
OPENAI_FIELDS = frozenset(
    {
        "file",
        "model",
        "language",
        "prompt",
        "temperature",
        "response_format",
        "timestamp_granularities[]",
        "timestamp_granularities",
        "stream",
        "chunking_strategy",
        "known_speaker_names[]",
        "known_speaker_names",
        "known_speaker_references[]",
        "known_speaker_references",
    }
)
# our parameters that OpenAI's API has no field for (sampling_rate describes sample lists, which a form has not;
# known_speakers is an object, which a form has not either: the two lists carry the same)
EXTRA_FIELDS = frozenset(InferenceConfig.model_fields) - {
    "language",
    "prompt",
    "temperature",
    "sampling_rate",
    "known_speakers",
    "known_speaker_names",
    "known_speaker_references",
}


async def parse_form(scope: dict, body: bytes, max_part_size: int):
    """The multipart form from a body already read (so its size and time limits held for every part)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if sent:
            return {"type": "http.disconnect"}
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        return await Request(scope, replay).form(max_files=1, max_fields=64, max_part_size=max_part_size)
    except Exception as exc:  # any parse failure of a stranger's form is their error
        raise InputError(f"could not read the multipart form: {short_message(exc, 200)}") from None


async def form_job(form: Mapping, handler) -> Job:
    """The form's fields -> the handler's input, checked, and the renderer of the chosen ``response_format``.
    ``form`` is a starlette FormData (``getlist`` and uploads with ``read()``)."""
    unknown = sorted(set(form.keys()) - OPENAI_FIELDS - EXTRA_FIELDS)
    if unknown:
        raise InputError(
            f"unknown field(s) {', '.join(repr(u[:60]) for u in unknown[:5])}; accepted: "
            f"{', '.join(sorted(OPENAI_FIELDS | EXTRA_FIELDS))}"
        )
    upload = form.get("file")
    if upload is None or isinstance(upload, str):
        raise InputError("the `file` field (the audio file) is missing")
    audio = await upload.read()
    fmt = str(form.get("response_format") or "json").strip()
    if fmt not in OPENAI_FORMATS:
        raise InputError(f"response_format {fmt[:60]!r} is not supported; use one of {', '.join(OPENAI_FORMATS)}")
    if str(form.get("stream", "false")).lower() not in ("false", "0", ""):
        raise InputError("stream=true is not supported; send stream=false or omit it")
    strategy = str(form.get("chunking_strategy", "auto") or "auto")
    if strategy != "auto":
        raise InputError("chunking_strategy must be 'auto' (audio is always cut at speech pauses)")
    granularities = set(form.getlist("timestamp_granularities[]")) | set(form.getlist("timestamp_granularities"))
    bad = granularities - {"word", "segment"}
    if bad:
        raise InputError(
            f"timestamp_granularities {sorted(str(b)[:40] for b in bad)[:5]} not supported; use word and/or segment"
        )
    params: dict[str, Any] = {k: form[k] for k in EXTRA_FIELDS if k in form}
    for key in ("language", "prompt", "temperature"):
        if form.get(key) not in (None, ""):
            params[key] = form[key]
    if "word" in granularities:
        params["return_timestamps"] = "word"
    for key in ("known_speaker_names", "known_speaker_references"):
        values = form.getlist(f"{key}[]") + form.getlist(key)
        if any(not isinstance(v, str) for v in values):
            raise InputError(f"`{key}[]` must be text fields (reference clips as data: URLs), not file uploads")
        if values:
            params[key] = values
    if fmt == "diarized_json" and not handler.has_diarizer:
        raise InputError("response_format diarized_json needs a diarization model (DIARIZATION_MODEL)")
    handler.check_parameters(params)
    segments = "segment" in granularities or not granularities
    return Job({"inputs": audio, "parameters": params}, lambda result, options: render(fmt, segments, result, options))


def render(fmt: str, segments: bool, result, options) -> Response:
    if fmt == "json":
        return JSONResponse(to_openai_json(result))
    if fmt == "text":
        return PlainTextResponse(result.transcript.text.strip() + "\n" if result.transcript.text else "")
    if fmt == "srt":
        return PlainTextResponse(to_srt(result))
    if fmt == "vtt":
        return PlainTextResponse(to_vtt(result), media_type="text/vtt")
    if fmt == "verbose_json":
        return JSONResponse(
            to_openai_verbose(
                result, words=options.attribution.show_words, segments=segments, temperature=options.asr.temperature
            )
        )
    return JSONResponse(to_openai_diarized(result))


async def _parse(request: Request, body: bytes, handler) -> Job:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise HttpError(415, "send multipart/form-data with a `file` field, as the OpenAI API does")
    form = await parse_form(request.scope, body, server_state(request).max_body_bytes)
    try:
        return await form_job(form, handler)
    finally:
        await form.close()


async def transcriptions(request: Request) -> Response:
    return await serve(request, "openai", _parse, openai_error)
