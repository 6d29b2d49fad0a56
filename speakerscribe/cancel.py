"""Stopping a request's work early: a token the server sets and the pipeline checks at every checkpoint.

The pipeline runs in a worker thread, which cannot be interrupted from outside; instead it calls
:meth:`CancelToken.check` between pipeline steps, between Whisper batches and decoding attempts, and between the
diarizer's batches. The token fires when the per-request deadline passes (``REQUEST_TIMEOUT_S``), when the client
disconnects, or when the server's shutdown grace period ends, and ``check`` then raises
:class:`~speakerscribe.errors.RequestCancelled` with that reason.
"""

from __future__ import annotations

import math
import threading
import time

from .errors import RequestCancelled


class CancelToken:
    """Thread-safe: set from the server's event loop, read from the worker threads."""

    def __init__(self, timeout_s: float = math.inf):
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._reason = ""
        self.timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s

    def cancel(self, reason: str) -> None:
        """Ask the work to stop at its next checkpoint; the first reason given wins."""
        with self._lock:
            if not self._event.is_set():
                self._reason = reason
                self._event.set()

    @property
    def reason(self) -> str | None:
        """Why the work must stop, or None while it may go on."""
        if self._event.is_set():
            return self._reason
        if time.monotonic() > self._deadline:
            self.cancel("deadline")
            return self._reason
        return None

    def check(self) -> None:
        """Raise RequestCancelled if the work must stop; called at every checkpoint."""
        reason = self.reason
        if reason is not None:
            message = {
                "deadline": f"the request took longer than {self.timeout_s:g} s (REQUEST_TIMEOUT_S) and was stopped",
                "disconnected": "the client disconnected; the work was stopped",
                "shutdown": "the server is shutting down; the work was stopped. Retry on another replica or later",
            }.get(reason, f"the request was cancelled ({reason})")
            raise RequestCancelled(reason, message)
