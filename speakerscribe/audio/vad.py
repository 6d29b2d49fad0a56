"""Speech activity detection with Silero VAD, batched over time, and the speech regions it implies.

Whisper invents text on silence and noise ("Thank you for watching"), so only regions with speech are sent to it.
Silero's 16 kHz network reads a 32 ms frame with the last 64 samples of the frame before it, runs it through a
front end (a short-time Fourier transform and convolutions) that depends on those samples only, and then through
one LSTM cell that carries state from frame to frame. It is normally run frame by frame, which costs about a
minute per hour of audio. Here the front end runs once over every frame of the file, in large batches, and only
the LSTM cell steps through time: the audio is cut into ``streams`` equal parts that step as one batch, each part
preceded by ``warmup_s`` of the audio before it so that its state is warm where its own frames start (a warm-up
frame's front end is the one computed for its place in the file; only a stream's first frame, which the network
reads after silence, is computed again). The probabilities are those of the network run frame by frame in each
stream, as before (``tests/test_windows_and_vad.py``). Measured on the 2-core Xeon here: a 27 s telephone call
130 -> 38 ms, 6.9 minutes of conversation 314 -> 203 ms.

The TorchScript file is loaded straight from the ``silero-vad`` package's data folder, without importing the
package: its ``__init__`` calls ``torch.set_num_threads(1)``, which would slow every other model in the process.
"""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError
from ..options import VadOptions
from ..records import SAMPLE_RATE, Span
from ..runtime import ignoring_warning

logger = logging.getLogger(__name__)

FRAME = 512  # samples per Silero frame at 16 kHz (32 ms)
FRAME_S = FRAME / SAMPLE_RATE
CONTEXT = 64  # samples of the frame before that the 16 kHz network reads with each frame
_BLOCK = 4096  # frames through the front end at once (9 MB of input)
_PARTS = ("run_extractors", "encoder", "decoder")  # the network's pieces used here (silero-vad >= 5.1)


def silero_jit_path() -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "speech activity detection needs the `silero-vad` package (pip install silero-vad), "
            "or set VAD=none to send all audio to Whisper"
        )
    path = Path(list(spec.submodule_search_locations)[0]) / "data" / "silero_vad.jit"
    if not path.is_file():
        raise ModelLoadError(f"silero-vad is installed but {path} is missing")
    return path


class SileroVAD:
    """Frame-level speech probabilities for a whole 16 kHz waveform: the front end over every frame at once, the
    recurrent cell over parallel streams. Holds no state between calls (concurrent requests need no lock)."""

    def __init__(self, streams: int = 64, warmup_s: float = 1.0):
        import torch

        self._torch = torch
        try:
            # silero-vad ships TorchScript, whose loader recent torch marks deprecated on every load: nothing to act on
            with ignoring_warning(FutureWarning, "`torch.jit.load` is deprecated"):
                self.model = torch.jit.load(str(silero_jit_path()), map_location="cpu").eval()
        except ModelLoadError:
            raise
        except Exception as exc:  # a corrupt or incompatible TorchScript file
            raise ModelLoadError(f"could not load the Silero VAD model: {exc}") from exc
        self.network = getattr(self.model, "_model", None)
        missing = [part for part in _PARTS if not hasattr(self.network, part)]
        if missing:
            raise ModelLoadError(f"this Silero VAD model has no {', '.join(missing)}: silero-vad >= 5.1 is needed")
        self.streams = streams
        self.warmup_frames = int(round(warmup_s / FRAME_S))

    def probabilities(self, samples: np.ndarray) -> np.ndarray:
        """(n,) float32 at 16 kHz -> (ceil(n / 512),) speech probability per 32 ms frame."""
        return self.probabilities_of([samples])[0]

    def probabilities_of(self, clips: list[np.ndarray]) -> list[np.ndarray]:
        """:meth:`probabilities` of several waveforms at once: the streams of all of them step as one batch (each
        row of the batch is independent, so every clip gets exactly what it would get alone). Short clips (known
        speakers' references) are one stream each, so four of them cost one clip's steps instead of four."""
        torch = self._torch
        plans = [_StreamPlan(c, self.streams, self.warmup_frames) for c in clips]
        rows = np.cumsum([0] + [p.n_streams for p in plans])
        steps = max((p.steps for p in plans), default=0)
        out = np.empty((int(rows[-1]), steps), dtype=np.float32)
        if steps:
            with torch.inference_mode():
                features = torch.cat([self._front_end(p) for p in plans if p.n_frames] + [self._front_end(None)])
                offsets = np.cumsum([0] + [p.rows for p in plans])
                silence, state = features.shape[0] - 1, torch.zeros(0)
                for k in range(steps):
                    index = np.concatenate([p.rows_at(k, o, silence) for p, o in zip(plans, offsets)])
                    x, state = self.network.decoder(features[torch.from_numpy(index)], state)
                    out[:, k] = x.reshape(len(index), -1).mean(dim=1).numpy()
        return [p.probabilities(out[a:b]) for p, a, b in zip(plans, rows[:-1], rows[1:])]

    def _front_end(self, plan: _StreamPlan | None):
        """The front end's output for every frame of ``plan``'s waveform, each with the 64 samples before it
        (zeros before the first); for None, one frame of silence (the steps before and after a waveform)."""
        torch = self._torch
        if plan is None:
            return self.network.encoder(self.network.run_extractors(torch.zeros(1, CONTEXT + FRAME)))
        blocks = [plan.inputs(a, min(a + _BLOCK, plan.n_frames)) for a in range(0, plan.n_frames, _BLOCK)]
        blocks.append(plan.first_inputs())
        return torch.cat([self.network.encoder(self.network.run_extractors(torch.from_numpy(x))) for x in blocks])


class _StreamPlan:
    """How one waveform is cut into parallel streams: ``n_streams`` equal parts, each preceded by ``warm`` frames
    of the audio before it; step k of stream s is frame ``s * per_stream - warm + k`` (frames before 0 or past the
    end are silence)."""

    def __init__(self, samples: np.ndarray, streams: int, warmup_frames: int):
        self.samples = np.ascontiguousarray(samples, dtype=np.float32)
        self.n_frames = -(-len(self.samples) // FRAME)
        self.n_streams = max(1, min(streams, self.n_frames // max(1, 4 * warmup_frames))) if self.n_frames else 0
        self.per_stream = -(-self.n_frames // self.n_streams) if self.n_streams else 0
        self.warm = warmup_frames if self.n_streams > 1 else 0
        self.steps = self.per_stream + self.warm if self.n_streams else 0
        self.first = np.arange(self.n_streams) * self.per_stream - self.warm
        # a stream's first frame follows silence (the network's context starts as zeros): it has a row of its own
        self.fresh = np.flatnonzero((self.first >= 0) & (self.first < self.n_frames))
        self.rows = self.n_frames + len(self.fresh)  # rows of the front end's output: every frame, then those

    def inputs(self, a: int, b: int) -> np.ndarray:
        """(b - a, 64 + 512): frames a..b-1, each after the last 64 samples of the frame before it; the audio
        before the start and after the end is zeros (the last frame is padded)."""
        lo = a * FRAME - CONTEXT
        flat = np.zeros((b - a) * FRAME + CONTEXT, dtype=np.float32)
        chunk = self.samples[max(lo, 0) : b * FRAME]
        flat[max(lo, 0) - lo : max(lo, 0) - lo + len(chunk)] = chunk
        windows = np.lib.stride_tricks.sliding_window_view(flat, CONTEXT + FRAME)[::FRAME]
        return np.ascontiguousarray(windows[: b - a])

    def first_inputs(self) -> np.ndarray:
        """The first frames of the streams that start inside the audio, each after 64 samples of silence."""
        x = np.concatenate([self.inputs(int(i), int(i) + 1) for i in self.first[self.fresh]] or [self.inputs(0, 0)])
        x[:, :CONTEXT] = 0.0
        return x

    def rows_at(self, k: int, offset: int, silence: int) -> np.ndarray:
        """The row of the front end's output each stream reads at step ``k`` (``silence`` outside the audio)."""
        index = self.first + k
        rows = np.where((index >= 0) & (index < self.n_frames), index + offset, silence)
        if k == 0:
            rows[self.fresh] = offset + self.n_frames + np.arange(len(self.fresh))
        return rows

    def probabilities(self, out: np.ndarray) -> np.ndarray:
        """This waveform's per-frame probabilities from its rows of the batch's output."""
        if not self.n_frames:
            return np.zeros(0, dtype=np.float32)
        return out[:, self.warm : self.warm + self.per_stream].reshape(-1)[: self.n_frames]


class VadStream:
    """Silero over a live stream: samples in as they come, one probability per complete 32 ms frame out.

    Uses the TorchScript file's inner network, a pure function of (64 samples of context + a frame, recurrent
    state), so every stream keeps its own state and streams never share or reset the model's."""

    def __init__(self, network):
        import torch

        self._torch = torch
        self._network = network
        self._state = torch.zeros(0)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._pending = np.zeros(0, dtype=np.float32)

    @property
    def pending(self) -> int:
        """Samples received that do not complete a frame yet."""
        return len(self._pending)

    def fork(self) -> VadStream:
        """An independent copy that continues from here (to look ahead without moving this stream): ``feed``
        replaces the state, context and pending arrays, never changes them in place, so sharing them is safe."""
        twin = VadStream.__new__(VadStream)
        twin.__dict__.update(self.__dict__)
        return twin

    def feed(self, samples: np.ndarray) -> np.ndarray:
        """16 kHz float32 samples -> probabilities of the frames they complete."""
        torch = self._torch
        data = np.concatenate([self._pending, np.asarray(samples, dtype=np.float32)])
        n = len(data) // FRAME
        self._pending = data[n * FRAME :].copy()
        out = np.empty(n, dtype=np.float32)
        with torch.inference_mode():
            for i in range(n):
                frame = data[i * FRAME : (i + 1) * FRAME]
                x = torch.from_numpy(np.concatenate([self._context, frame]))[None]
                prob, self._state = self._network(x, self._state)
                out[i] = float(prob.reshape(-1)[0])
                self._context = frame[-CONTEXT:].copy()
        return out


def new_stream(vad: SileroVAD) -> VadStream:
    """A live stream over ``vad``'s 16 kHz network."""
    return VadStream(vad.network)


def speech_regions(probs: np.ndarray, duration: float, opts: VadOptions = VadOptions()) -> list[Span]:
    """Hysteresis on frame probabilities -> padded, merged speech regions in seconds, clipped to the audio.

    A region is a run of frames with p >= ``neg_threshold`` that holds at least one frame with p >= ``threshold``.
    Regions shorter than ``min_speech_s`` are dropped, gaps shorter than ``min_silence_s`` are closed, and each
    region is padded by ``pad_s`` on both sides.
    """
    if probs.size == 0:
        return []
    low = probs >= opts.neg_threshold
    edges = np.diff(np.concatenate([[0], low.astype(np.int8), [0]]))
    starts = np.flatnonzero(edges == 1)
    ends = np.flatnonzero(edges == -1)
    if starts.size == 0:
        return []
    peak = np.maximum.reduceat(probs, starts)
    keep = peak >= opts.threshold
    starts, ends = starts[keep] * FRAME_S, ends[keep] * FRAME_S
    long_enough = (ends - starts) >= opts.min_speech_s
    starts, ends = starts[long_enough], ends[long_enough]
    if starts.size == 0:
        return []
    starts = np.maximum(starts - opts.pad_s, 0.0)
    ends = np.minimum(ends + opts.pad_s, duration)
    # Close short gaps (and overlaps made by padding): a new region starts only after a long enough silence.
    new_region = np.concatenate([[True], starts[1:] - ends[:-1] >= opts.min_silence_s])
    merged_starts = starts[new_region]
    merged_ends = np.maximum.reduceat(ends, np.flatnonzero(new_region))
    return [Span(float(s), float(e)) for s, e in zip(merged_starts, merged_ends) if e > s]


def heard_only_briefly(probs: np.ndarray, regions: list[Span], opts: VadOptions = VadOptions()) -> bool:
    """True when frames reached ``threshold`` but no region survived (each run was shorter than ``min_speech_s``).

    Quiet or distant speech scores so: an AMI meeting excerpt with 6 s of far-field speech from four people peaks at
    0.64 in four scattered frames. Silence and steady noise stay under the threshold (white noise about 0.1, brown
    noise 0.3, a 50 Hz hum 0.1), so they never count."""
    return not regions and probs.size > 0 and float(probs.max()) >= opts.threshold
