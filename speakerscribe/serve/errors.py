"""Failure -> HTTP status, in one table, and the error body each API answers with."""

from __future__ import annotations

from starlette.responses import JSONResponse, Response

from ..errors import AudioTooLongError, CapacityError, InputError, ModelLoadError, RequestCancelled

CLIENT_GONE = 499  # logged (nginx's convention) when the client disconnected before its answer


class HttpError(Exception):
    """An answer other than 200: status, message for the caller, extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class ClientGone(Exception):
    """The client disconnected; there is nobody to answer."""


_REFUSALS = {
    "busy": ("the server is busy: the queue is full; retry later", "5"),
    "timeout": ("timed out waiting for a processing slot; retry later", "10"),
    "shutdown": ("the server is shutting down; retry on another replica", "5"),
}


def refusal(reason: str) -> HttpError:
    """A new 503 for a refused request (a new instance each time: a re-raised one would grow its traceback)."""
    message, retry = _REFUSALS[reason]
    return HttpError(503, message, {"Retry-After": retry})


def http_error(exc: Exception) -> HttpError | None:
    """The answer for one of our failure kinds; None for a client that is gone (nobody to answer) and for anything
    unexpected (the caller logs it and answers 500)."""
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, RequestCancelled):
        if exc.reason == "disconnected":
            return None
        if exc.reason == "deadline":
            return HttpError(504, str(exc))
        return HttpError(503, str(exc), {"Retry-After": "5"})  # shutdown, or stopped alongside a failure
    if isinstance(exc, AudioTooLongError):
        return HttpError(413, str(exc))
    if isinstance(exc, InputError):
        return HttpError(400, str(exc))
    if isinstance(exc, (CapacityError, ModelLoadError)):
        return HttpError(503, str(exc), {"Retry-After": "10"})
    return None


def endpoint_error(status: int, message: str) -> Response:
    """The Endpoints contract's error body: ``{"error": message}``."""
    return JSONResponse({"error": message}, status_code=status)


_OPENAI_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    408: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
}


def openai_error(status: int, message: str) -> Response:
    """OpenAI's error body: ``{"error": {"message", "type", "param", "code"}}``."""
    kind = _OPENAI_KINDS.get(status, "server_error")
    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": None}}, status_code=status)
