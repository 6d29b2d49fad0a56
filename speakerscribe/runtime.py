"""Device, precision and attention choices, and the process-wide switches, made explicitly in one place.

Process-wide side effects this package makes, all here:

* ``PYANNOTE_METRICS_ENABLED=false`` unless the deployer set it: pyannote.audio 4 otherwise sends telemetry.
* One transformers log message is filtered: "The attention mask is not set ..." - Whisper's padding token is its
  end-of-text token and every decoded window starts from the same prompt, so there is no padding to mask.
* TF32 matmul: pyannote turns it OFF process-wide on every CUDA pipeline call. :func:`tf32_guard` restores the
  setting the deployer chose (``ALLOW_TF32``) once diarization returns, so Whisper's speed does not depend on
  whether the previous request was diarized. The guard counts the calls inside it and restores the setting only
  when the last one leaves, so with ``MAX_CONCURRENCY`` > 1 no pyannote call ever runs with TF32 switched back
  on under it. (Whisper decoding that runs meanwhile in float32 sees TF32 off until then; in the GPU default
  dtypes, bfloat16 and float16, TF32 does not apply.)
* Threads that run model work beside the request's own thread are started per request and end with it
  (:func:`start_worker`): PyTorch's CPU kernels run on OpenMP, every thread that has run one keeps a team of OpenMP
  workers while it lives, and once the process holds more OpenMP threads than cores, libgomp stops spinning and puts
  idle workers to sleep after every parallel region. The small per-step kernels of greedy decoding and of the
  speech detector then pay a wake-up each: measured on 2 cores, a short tiny.en request took 0.98 s with no other
  thread and 1.98 s while one idle thread that had run a single matmul was alive (decoding 0.64 -> 1.33 s, speech
  detection 0.12 -> 0.43 s), and 1.01 s again once it ended. One exception, on CUDA only: with ``STATIC_CACHE`` the
  compiled decoder runs in one long-lived thread of its own (:class:`OwnThread`), since its CUDA graphs belong to
  the thread that made them.
* One attention function is registered with transformers' ``AttentionInterface`` when a Whisper model loads on a
  CPU (:mod:`speakerscribe.asr.attention`): under a name of its own, so no other model's attention changes; only the
  models we point at it use it.
* Library output is switched off only around our own calls, with each library's own switch, and put back after:
  transformers' and huggingface_hub's progress bars while models load (:func:`no_progress_bars`), transformers'
  log verbosity around the draft model's load and the assisted ``generate`` (:func:`quiet_transformers`: the
  unexpected-encoder-keys report, the generation-config deprecation and the duplicated ``SuppressTokens``
  processor notices are about how transformers drives a draft model, not about anything a deployer can change),
  and one named warning around one call (:func:`ignoring_warning`). Our entry points log our own loggers at INFO
  and other libraries' at WARNING (:func:`configure_logging`): matplotlib, imported by pyannote.audio through
  lightning and torchmetrics, logs "generated new fontManager" at INFO on a machine's first run.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Placement:
    device: str  # "cpu", "cuda", "cuda:1", "mps"
    dtype_name: str  # "float32", "float16", "bfloat16"
    attn_implementation: str  # "sdpa", "eager", "flash_attention_2"

    @property
    def dtype(self):
        import torch

        return getattr(torch, self.dtype_name)

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")


def torch_version_at_least(major: int, minor: int) -> bool:
    import torch

    parts = torch.__version__.split("+")[0].split(".")
    return (int(parts[0]), int(parts[1])) >= (major, minor)


def resolve_placement(device: str = "auto", dtype: str = "auto", attention: str = "auto") -> Placement:
    """Turn the ``DEVICE``/``TORCH_DTYPE``/``ATTN_IMPLEMENTATION`` settings into concrete choices.

    auto device: CUDA when available, else CPU. auto dtype: bfloat16 on GPUs that support it, float16 on other
    GPUs; on a CPU, bfloat16 where the CPU multiplies it natively (:func:`cpu_has_native_bf16`: AVX-512 BF16 or
    AMX) and PyTorch is at least :data:`CPU_BF16_SINCE_TORCH`, float32 elsewhere (emulated bfloat16 is slower than
    float32). auto attention: SDPA on PyTorch >= 2.2 (it
    dispatches to flash attention kernels on recent GPUs), eager before.
    """
    import torch

    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise RuntimeError(f"DEVICE={device} but CUDA is not available on this machine")
    if dtype == "auto":
        if device.startswith("cuda"):
            dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        else:
            native = device == "cpu" and cpu_has_native_bf16()
            dtype = "bfloat16" if native and torch_version_at_least(*CPU_BF16_SINCE_TORCH) else "float32"
    if attention == "auto":
        attention = "sdpa" if torch_version_at_least(2, 2) else "eager"
    return Placement(device=device, dtype_name=dtype, attn_implementation=attention)


CPU_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})
# the oldest PyTorch on which bfloat16 Whisper was measured as good as float32 on a CPU (2.14.1: AMI train + dev
# coverage 0.877 both ways); on 2.8.0, our minimum, it cost coverage (0.877 -> 0.854); versions between: not measured
CPU_BF16_SINCE_TORCH = (2, 14)


def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU has bfloat16 arithmetic instructions (AVX-512 BF16 or AMX), read from the kernel's flags.

    Whisper ran 1.0-1.4x as fast in bfloat16 on a 2-core AMD EPYC with AVX-512 BF16 and 2x on the CPU measured on
    2026-12-02, WER within 0.005 (README, "bfloat16 by default where the CPU has it"); without those instructions
    PyTorch emulates bfloat16 and float32 is faster. False where the flags cannot be
    read (not Linux) or oneDNN, which runs the bfloat16 kernels, is not built in.
    """
    import torch

    if not torch.backends.mkldnn.is_available():
        return False
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return not CPU_BF16_FLAGS.isdisjoint(line.partition(":")[2].split())
    except OSError:
        return False
    return False


def configure_pyannote_environment() -> None:
    """Opt out of pyannote.audio's telemetry unless the deployer decided otherwise. Call before importing it."""
    os.environ.setdefault("PYANNOTE_METRICS_ENABLED", "false")


def apply_tf32(allow: bool) -> None:
    import torch

    if torch.cuda.is_available():
        torch.backends.cuda.matmul.allow_tf32 = allow
        torch.backends.cudnn.allow_tf32 = allow


_TF32_LOCK = threading.Lock()
_TF32_INSIDE = 0


@contextmanager
def tf32_guard(allow: bool):
    """Run a block (a pyannote call) and put the TF32 setting back to ``allow`` when the last such block ends."""
    global _TF32_INSIDE
    with _TF32_LOCK:
        _TF32_INSIDE += 1
    try:
        yield
    finally:
        with _TF32_LOCK:
            _TF32_INSIDE -= 1
            if _TF32_INSIDE == 0:
                apply_tf32(allow)


class _DropMessage(logging.Filter):
    def __init__(self, fragment: str):
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


_QUIETED = False


def quiet_generation_warnings() -> None:
    """Filter the one spurious transformers warning our decoding triggers (see the module docstring)."""
    global _QUIETED
    if _QUIETED:
        return
    logging.getLogger("transformers.generation.utils").addFilter(_DropMessage("The attention mask is not set"))
    _QUIETED = True


class _Override:
    """A process-wide library setting changed while any block that asks for it runs. Blocks may overlap (request
    threads): the first one in saves the setting and applies ours, the last one out puts the saved one back."""

    def __init__(self, save, apply, restore):
        self._save, self._apply, self._restore = save, apply, restore
        self._lock = threading.Lock()
        self._inside = 0
        self._saved = None

    @contextmanager
    def __call__(self):
        with self._lock:
            if self._inside == 0:
                self._saved = self._save()
                self._apply()
            self._inside += 1
        try:
            yield
        finally:
            with self._lock:
                self._inside -= 1
                if self._inside == 0:
                    self._restore(self._saved)


def _bars_state() -> tuple[bool, bool]:
    from huggingface_hub.utils import are_progress_bars_disabled
    from transformers.utils import logging as hf_logging

    return hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()


def _bars_off() -> None:
    from huggingface_hub import constants
    from transformers.utils import logging as hf_logging

    if constants.HF_HUB_DISABLE_PROGRESS_BARS is False:  # HF_HUB_DISABLE_PROGRESS_BARS=0: the deployer wants them
        return
    hf_logging.disable_progress_bar()  # transformers' own bars and huggingface_hub's download bars


def _bars_restore(saved: tuple[bool, bool]) -> None:
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars
    from transformers.utils import logging as hf_logging

    transformers_on, hub_off = saved
    if transformers_on and not hf_logging.is_progress_bar_enabled():
        hf_logging.enable_progress_bar()  # (turns huggingface_hub's on too: set right below)
    if hub_off != are_progress_bars_disabled():
        (disable_progress_bars if hub_off else enable_progress_bars)()


def _verbosity() -> int:
    from transformers.utils import logging as hf_logging

    return hf_logging.get_verbosity()


def _verbosity_error() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def _set_verbosity(level: int) -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity(level)


no_progress_bars = _Override(_bars_state, _bars_off, _bars_restore)
no_progress_bars.__doc__ = """``with no_progress_bars():`` transformers' ("Loading weights", "Writing model shards") and
huggingface_hub's (downloads) progress bars off for the block: a server's log and a command's output are no place
for them. ``HF_HUB_DISABLE_PROGRESS_BARS=0`` keeps them."""

quiet_transformers = _Override(_verbosity, _verbosity_error, _set_verbosity)
quiet_transformers.__doc__ = """``with quiet_transformers():`` transformers logs errors only for the block."""


@contextmanager
def ignoring_warning(category: type[Warning], message: str):
    """The warnings of ``category`` whose text starts with ``message`` are not shown inside the block (the others
    are). ``warnings.catch_warnings`` swaps the process's filter list for the block, so two such blocks that overlap
    in threads can put back each other's filters: use it at load time, or where our own lock serialises the calls
    (the diarizer's)."""
    import re
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=re.escape(message), category=category)
        yield


def configure_logging(level: int, fmt: str) -> None:
    """An entry point's logging: our loggers (``speakerscribe.*``) at ``level``, every other library's at WARNING
    (at DEBUG: everything at DEBUG). Nothing changes when the process configured logging already (an application
    that imports us, a test runner)."""
    if logging.getLogger().handlers:
        return
    logging.basicConfig(level=level if level <= logging.DEBUG else max(level, logging.WARNING), format=fmt)
    for ours in ("speakerscribe", "__main__"):  # (an entry point run with ``python -m`` logs as __main__)
        logging.getLogger(ours).setLevel(level)


def start_worker(fn, *args, name: str = "worker") -> Future:
    """``fn(*args)`` in a new daemon thread that ends when it returns; its result or exception in the Future.

    Not a thread pool on purpose: a pooled thread outlives the work and keeps its OpenMP team, which makes every
    small CPU kernel in the process slower (see the module docstring)."""
    future: Future = Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # handed to whoever waits on the future
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


class OwnThread:
    """One long-lived thread that runs, one at a time, every call handed to it (:meth:`run` waits for the result).

    For work whose library state belongs to the thread that made it: a decoder compiled with CUDA graphs (the
    static KV cache) keeps its graph trees in thread-local storage of the thread that compiled it, and PyTorch
    releases before the fix of pytorch/pytorch#123177 assert when another thread replays them (seen on an H200 with
    torch 2.11: every request of ``STATIC_CACHE=true`` failed with an ``AssertionError`` from
    ``cudagraph_trees.get_obj``, because the warm-up compiled in the loading thread and each request decodes in a
    thread of its own). The thread is started on first use and lives as long as the process; used only where
    that matters (CUDA), since on the CPU a long-lived thread that ran PyTorch slows every request (see above)."""

    def __init__(self, name: str, setup=None):
        import queue

        self.name = name
        self._setup = setup  # run first in the thread, before any call
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.ident: int | None = None

    def run(self, fn, *args):
        if threading.get_ident() == self.ident:  # a call from inside the thread runs at once (no deadlock)
            return fn(*args)
        future: Future = Future()
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
        self._queue.put((fn, args, future))
        return future.result()

    def _serve(self) -> None:
        self.ident = threading.get_ident()
        if self._setup is not None:
            try:
                self._setup()
            except Exception:  # the calls still run; what the setup was for may then fail, loudly, in them
                logger.exception("setting up thread %s failed", self.name)
        while True:
            fn, args, future = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # handed to the caller waiting in run()
                future.set_exception(exc)
