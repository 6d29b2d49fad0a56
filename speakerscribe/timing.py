"""The one stage timer: seconds per named stage, accumulated into a dict, and every stage start a cancellation
checkpoint.

The pipeline times its steps (``vad``, ``asr``, ``diarization``, ``diarization_wait``, ``merge``; ``speaker_naming``
inside ``diarization`` when the request names known speakers) and Whisper its
sub-stages (``asr_features``, ``asr_encode``, ``asr_generate``, ``asr_score``, ``asr_language``) with the same
timer; the response's ``timings`` is that dict. With ``cuda`` (Whisper's sub-stages on a GPU) the timer
synchronises at the end of a stage, so kernel work is counted where it ran; the pipeline's own steps do not
synchronise (that would make CPU steps wait for other threads' kernels).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager

StageHook = Callable[[str, float], None]  # (stage name, seconds) when a stage ends


class StageTimer:
    def __init__(self, timings: dict[str, float] | None = None, cancel=None, cuda: bool = False, hook=None):
        self.timings: dict[str, float] = {} if timings is None else timings
        self.cancel = cancel  # a CancelToken (or None): checked as each stage starts
        self.cuda = cuda
        self.hook: StageHook | None = hook

    @contextmanager
    def __call__(self, name: str):
        if self.cancel is not None:
            self.cancel.check()
        t0 = time.perf_counter()
        yield  # a stage that raises is not recorded
        if self.cuda:
            import torch

            torch.cuda.synchronize()
        seconds = time.perf_counter() - t0
        self.timings[name] = self.timings.get(name, 0.0) + seconds
        if self.hook is not None:
            self.hook(name, seconds)

    def nested(self, cuda: bool) -> StageTimer:
        """A timer into the same dict and checkpoint, without the hook (the sub-stages of a hooked stage); ``cuda``
        synchronises the device as each sub-stage ends."""
        return StageTimer(self.timings, self.cancel, cuda)
