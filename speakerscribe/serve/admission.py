"""Who may run now: a fixed number of processing slots, a bounded queue in front of them, and draining at shutdown.

A request takes a place (:meth:`Admission.admit`) before its body is read, and holds a processing slot
(:meth:`Admission.slot`) only while its work runs (the body has been read and checked before it queues). A request
beyond ``concurrency + queue`` places is turned away at once; one that waits longer than ``timeout_s`` is turned away
then. :meth:`Admission.drain` (on SIGTERM) turns away everything queued and everything that arrives;
:meth:`Admission.stop_running` asks running work to stop at its next checkpoint.
"""

from __future__ import annotations

from contextlib import asynccontextmanager, contextmanager

from ..cancel import CancelToken


class Refused(Exception):
    """No slot: ``reason`` is ``"busy"`` (queue full), ``"timeout"`` (waited too long) or ``"shutdown"``."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Admission:
    def __init__(self, concurrency: int, queue: int, timeout_s: float):
        import anyio

        self._slots = anyio.Semaphore(concurrency)
        self._limit = concurrency + queue
        self._inside = 0
        self._timeout = timeout_s
        self._waiting: set = set()  # the cancel scopes of queued requests
        self._running: set[CancelToken] = set()
        self.draining = False

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def in_flight(self) -> int:
        return len(self._running)

    @contextmanager
    def admit(self):
        """A place among the ``concurrency + queue`` requests the server holds, taken *before* the body is read (so
        bodies in memory are bounded too); raises :class:`Refused` when there is none."""
        if self.draining:
            raise Refused("shutdown")
        if self._inside >= self._limit:
            raise Refused("busy")
        self._inside += 1
        try:
            yield
        finally:
            self._inside -= 1

    @asynccontextmanager
    async def slot(self, token: CancelToken):
        """Within :meth:`admit`: wait for a processing slot and hold it for the block (:class:`Refused` on timeout
        or shutdown)."""
        import anyio

        if self.draining:
            raise Refused("shutdown")
        waiter = anyio.CancelScope(deadline=anyio.current_time() + self._timeout)
        self._waiting.add(waiter)
        try:
            with waiter:
                await self._slots.acquire()
        finally:
            self._waiting.discard(waiter)
        if waiter.cancelled_caught:
            raise Refused("shutdown" if self.draining else "timeout")
        self._running.add(token)
        try:
            yield
        finally:
            self._running.discard(token)
            self._slots.release()

    def drain(self) -> None:
        """Refuse new and queued requests from now on (call from the event loop)."""
        self.draining = True
        for waiter in list(self._waiting):
            waiter.cancel()

    def stop_running(self, reason: str = "shutdown") -> None:
        """Ask every running request to stop at its next checkpoint."""
        for token in list(self._running):
            token.cancel(reason)
