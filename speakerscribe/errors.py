"""One exception type per failure kind, so the server and the Endpoints runtime can map them to statuses.

* :class:`InputError` - the request is wrong (bad base64, undecodable audio, invalid parameters). HTTP 400. The
  message says what was wrong and what is accepted.
* :class:`AudioTooLongError` - an :class:`InputError` for audio past ``MAX_AUDIO_SECONDS`` (found while decoding,
  which stops there). HTTP 413.
* :class:`RequestCancelled` - the work was stopped at a checkpoint (between windows and pipeline steps): the
  per-request deadline passed (HTTP 504), the client went away (nobody to answer), or the server is shutting down
  (HTTP 503).
* :class:`ModelLoadError` - a model named by the settings could not be loaded. Raised at start-up.
* :class:`CapacityError` - the service is out of a resource (GPU memory even at batch size 1, a full queue). HTTP 503.
* Anything else is a bug of ours: HTTP 500, traceback in the log (no dedicated type: nothing raises one on purpose).

Diarization failures are not raised to the caller: the transcript is returned with the failure in ``warnings``.
"""

from __future__ import annotations


class SpeakerscribeError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(SpeakerscribeError, ValueError):
    """The request cannot be served as sent; the message tells the caller how to fix it."""


class AudioTooLongError(InputError):
    """The audio is longer than this deployment accepts."""


class RequestCancelled(SpeakerscribeError, RuntimeError):
    """Work stopped early; ``reason`` is ``"deadline"``, ``"disconnected"`` or ``"shutdown"``."""

    def __init__(self, reason: str, message: str = ""):
        super().__init__(message or f"the request was cancelled ({reason})")
        self.reason = reason


class ModelLoadError(SpeakerscribeError, RuntimeError):
    """A configured model could not be loaded."""


class CapacityError(SpeakerscribeError, RuntimeError):
    """A resource ran out (accelerator memory, queue slots); retrying later or with less may succeed."""


def short_message(exc: BaseException, limit: int = 500) -> str:
    """First line of an exception's message (or its type name), at most ``limit`` characters."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__


def quote(value: object, limit: int = 100) -> str:
    """``repr`` of a caller's value for an error message, cut to ``limit`` characters (a stranger's 150k-character
    string must not come back whole in the answer or go into the log)."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails is still a value we must describe
        text = f"<{type(value).__name__}>"
    if len(text) <= limit:
        return text
    size = f"{len(value)} characters" if isinstance(value, (str, bytes)) else type(value).__name__
    return f"{text[:limit]}... ({size})"
