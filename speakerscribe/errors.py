"""One exception type per failure kind, so the server and the Endpoints runtime can map them to statuses.

* :class:`InputError` - the request is wrong (bad base64, undecodable audio, invalid parameters). HTTP 400. The
  message says what was wrong and what is accepted.
* :class:`ModelLoadError` - a model named by the settings could not be loaded. Raised at start-up.
* :class:`CapacityError` - the service is out of a resource (GPU memory even at batch size 1, a full queue). HTTP 503.
* :class:`InferenceError` - our own failure while processing a valid request. HTTP 500.

Diarization failures are not raised to the caller: the transcript is returned with the failure in ``warnings``.
"""

from __future__ import annotations


class SpeakerscribeError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(SpeakerscribeError, ValueError):
    """The request cannot be served as sent; the message tells the caller how to fix it."""


class ModelLoadError(SpeakerscribeError, RuntimeError):
    """A configured model could not be loaded."""


class CapacityError(SpeakerscribeError, RuntimeError):
    """A resource ran out (accelerator memory, queue slots); retrying later or with less may succeed."""


class InferenceError(SpeakerscribeError, RuntimeError):
    """Processing a valid request failed for a reason of ours."""


def short_message(exc: BaseException, limit: int = 500) -> str:
    """First line of an exception's message (or its type name), at most ``limit`` characters."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else type(exc).__name__
