"""Many files through one or more deployed (or local) endpoints: the client side of scaling out.

    python -m speakerscribe.cli --endpoint https://a.endpoints.huggingface.cloud --endpoint
    http://127.0.0.1:5000 \\
        --token $HF_TOKEN --format srt --output-dir out/ recordings/

Each file is POSTed as its raw bytes to ``<endpoint>/predict`` (the Endpoints contract, which both the default
container and our server take) with the request parameters in the query string; the JSON answer is written to one
output per file, in any of the CLI's formats. Workers (``--concurrency``, default two per endpoint) take the next
file from a shared queue and send it to the endpoint with the fewest requests in flight among those not resting:

* 503 (busy, loading, shutting down): the endpoint rests for its ``Retry-After`` (at least 1 s), the file is retried;
* no connection, a dropped connection, 500/502/504, a timeout: the endpoint rests with a growing back-off
  (1, 2, 4, ... up to 60 s) and the file is retried, on another endpoint when there is one;
* 400/413/415/422 (the file itself is refused): the file is reported failed, the others go on;
* 401/403 (the token): everything stops.

A file fails after ``--retries`` attempts. Outputs are written to a temporary name and renamed, so an output exists
only complete; a run started again skips files whose output exists (``--overwrite`` does them again). The progress
line shows files done, audio hours done and the throughput in audio seconds per wall second.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

AUDIO_SUFFIXES = {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".mp4", ".webm", ".aac", ".amr", ".aiff", ".caf"}
CONTENT_TYPES = {  # spellings the Endpoints default container accepts
    ".wav": "audio/wav",
    ".flac": "audio/flac",
    ".mp3": "audio/mpeg",
    ".ogg": "audio/ogg",
    ".opus": "audio/ogg",
    ".m4a": "audio/m4a",
    ".mp4": "audio/m4a",
    ".webm": "audio/webm",
    ".amr": "audio/amr",
}
FILE_REFUSED = {400, 404, 405, 413, 415, 422}
TOKEN_REFUSED = {401, 403}
MAX_BACKOFF_S = 60.0


class BatchError(Exception):
    """The run cannot go on: the token was refused."""


class InputsError(BatchError):
    """The files and folders given cannot be run as asked (missing, or two writing one output)."""


@dataclass(frozen=True)
class Item:
    source: Path
    output: Path


def expand(paths: list[Path], output_dir: Path, fmt: str) -> list[Item]:
    """Files as given, and the audio files under folders (recursively, sorted); outputs keep the path below the
    folder given, so equal names in different folders do not collide."""
    items: list[Item] = []
    for path in paths:
        if path.is_dir():
            for f in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES):
                relative = f.relative_to(path)
                items.append(Item(f, output_dir / relative.parent / f"{relative.stem}.{fmt}"))
        elif path.is_file():
            items.append(Item(path, output_dir / f"{path.stem}.{fmt}"))
        else:
            raise InputsError(f"no such file or folder: {path}")
    seen: dict[Path, Path] = {}
    for item in items:
        if item.output in seen:
            raise InputsError(f"{seen[item.output]} and {item.source} would both write {item.output}")
        seen[item.output] = item.source
    return items


@dataclass
class Endpoint:
    url: str
    in_flight: int = 0
    rest_until: float = 0.0
    failures: int = 0  # consecutive
    done: int = 0


@dataclass
class Outcome:
    item: Item
    ok: bool
    audio_s: float = 0.0
    error: str = ""
    attempts: int = 0


@dataclass
class Progress:
    total: int
    skipped: int = 0
    done: int = 0
    failed: int = 0
    audio_s: float = 0.0
    t0: float = field(default_factory=time.monotonic)

    def line(self) -> str:
        wall = max(1e-6, time.monotonic() - self.t0)
        return (
            f"{self.done + self.failed + self.skipped}/{self.total} files ({self.skipped} skipped, {self.failed} "
            f"failed), {self.audio_s / 3600:.2f} h audio, {self.audio_s / wall:.1f}x real time, {wall:.0f} s"
        )


class BatchClient:
    def __init__(
        self,
        urls: list[str],
        token: str | None = None,
        parameters: dict[str, str] | None = None,
        concurrency: int | None = None,
        retries: int = 5,
        timeout_s: float = 3600.0,
        render: Callable[[dict[str, Any], Item], str] | None = None,
        known_speakers: dict[str, str] | None = None,
    ):
        if not urls:
            raise InputsError("no endpoint given")
        self.endpoints = [Endpoint(u.rstrip("/")) for u in urls]
        self.token = token
        self.parameters = parameters or {}
        # {name: base64 clip}: requests then go as JSON ({"inputs": <base64>, "parameters": {...}}), which can
        # carry the clips that a query string cannot
        self.known_speakers = known_speakers or {}
        self.concurrency = concurrency or 2 * len(self.endpoints)
        self.retries = retries
        self.timeout_s = timeout_s
        self.render = render or (lambda data, item: json.dumps(data, ensure_ascii=False, indent=1) + "\n")
        self._lock = threading.Condition()
        self._stop: str | None = None  # why everything stopped (a refused token)

    # ----------------------------------------------------------------------------------------- endpoints
    def _take_endpoint(self) -> Endpoint:
        """The endpoint with the fewest requests in flight among those not resting (waits while all rest)."""
        with self._lock:
            while True:
                if self._stop:
                    raise BatchError(self._stop)
                now = time.monotonic()
                ready = [e for e in self.endpoints if e.rest_until <= now]
                if ready:
                    chosen = min(ready, key=lambda e: (e.in_flight, e.failures))
                    chosen.in_flight += 1
                    return chosen
                self._lock.wait(timeout=min(e.rest_until for e in self.endpoints) - now)

    def _release(self, endpoint: Endpoint, rest_s: float = 0.0, failed: bool = False) -> None:
        with self._lock:
            endpoint.in_flight -= 1
            if failed:
                endpoint.failures += 1
            elif rest_s == 0.0:
                endpoint.failures = 0
            if rest_s > 0:
                endpoint.rest_until = max(endpoint.rest_until, time.monotonic() + rest_s)
            self._lock.notify_all()

    # ------------------------------------------------------------------------------------------- one file
    def _send(self, item: Item) -> Outcome:
        import requests

        body = item.source.read_bytes()
        headers = {"Content-Type": CONTENT_TYPES.get(item.source.suffix.lower(), "audio/x-audio")}
        params: dict[str, str] | None = self.parameters
        if self.known_speakers:
            request = {
                "inputs": base64.b64encode(body).decode("ascii"),
                "parameters": {**self.parameters, "known_speakers": self.known_speakers},
            }
            body, params = json.dumps(request).encode(), None
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        last = ""
        for attempt in range(1, self.retries + 1):
            endpoint = self._take_endpoint()
            try:
                response = requests.post(
                    f"{endpoint.url}/predict",
                    params=params,
                    data=body,
                    headers=headers,
                    timeout=(10, self.timeout_s),
                )
            except requests.RequestException as exc:  # refused, reset, timed out: the endpoint rests, we retry
                backoff = min(MAX_BACKOFF_S, 2.0 ** min(endpoint.failures, 6))
                self._release(endpoint, rest_s=backoff, failed=True)
                last = f"{endpoint.url}: {type(exc).__name__}"
                continue
            status = response.status_code
            if status == 200:
                self._release(endpoint)
                data = response.json()
                write_atomically(item.output, self.render(data, item))
                with self._lock:
                    endpoint.done += 1
                return Outcome(item, True, float(data.get("duration") or 0.0), attempts=attempt)
            message = _error_message(response)
            last = f"{endpoint.url}: HTTP {status}: {message}"
            if status in TOKEN_REFUSED:
                self._release(endpoint)
                with self._lock:
                    self._stop = f"the token was refused by {endpoint.url} (HTTP {status}): {message}"
                    self._lock.notify_all()
                raise BatchError(self._stop)
            if status in FILE_REFUSED:
                self._release(endpoint)
                return Outcome(item, False, error=last, attempts=attempt)
            if status == 503:
                self._release(endpoint, rest_s=max(1.0, _retry_after(response)))
            else:  # 500, 502, 504, anything else: the endpoint's trouble
                backoff = min(MAX_BACKOFF_S, 2.0 ** min(endpoint.failures, 6))
                self._release(endpoint, rest_s=backoff, failed=True)
        return Outcome(item, False, error=f"gave up after {self.retries} attempts; last: {last}", attempts=self.retries)

    # ---------------------------------------------------------------------------------------------- run
    def run(self, items: list[Item], overwrite: bool = False, report=None) -> tuple[list[Outcome], Progress]:
        """Every item done, skipped (output exists) or failed; ``report(progress, outcome | None)`` after each.
        Returns the outcomes of the items sent and the final progress."""
        progress = Progress(total=len(items))
        todo = []
        for item in items:
            if item.output.is_file() and not overwrite:
                progress.skipped += 1
            else:
                todo.append(item)
        if report:
            report(progress, None)
        outcomes: list[Outcome] = []
        queue = list(reversed(todo))

        def worker() -> None:
            while True:
                with self._lock:
                    if not queue or self._stop:
                        return
                    item = queue.pop()
                try:
                    outcome = self._send(item)
                except BatchError:
                    return
                except Exception as exc:  # a file we cannot read, an output we cannot write: that file fails
                    outcome = Outcome(item, False, error=f"{type(exc).__name__}: {exc}")
                with self._lock:
                    outcomes.append(outcome)
                    if outcome.ok:
                        progress.done += 1
                        progress.audio_s += outcome.audio_s
                    else:
                        progress.failed += 1
                if report:
                    report(progress, outcome)

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(self.concurrency, len(todo)))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if self._stop:
            raise BatchError(self._stop)
        return outcomes, progress


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _retry_after(response) -> float:
    value = response.headers.get("Retry-After", "")
    try:
        return min(MAX_BACKOFF_S, float(value))
    except ValueError:
        return 5.0


def _error_message(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        error = error.get("message")
    return str(error or body)[:300]


class ProgressLine:
    """The progress line on stderr (a terminal, or SPEAKERSCRIBE_PROGRESS=1), and one line per failed file."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and (sys.stderr.isatty() or os.environ.get("SPEAKERSCRIBE_PROGRESS") == "1")

    def __call__(self, progress: Progress, outcome: Outcome | None) -> None:
        if outcome is not None and not outcome.ok:
            sys.stderr.write(f"\nerror: {outcome.item.source}: {outcome.error}\n")
        if self.enabled:
            sys.stderr.write("\r" + progress.line())
            sys.stderr.flush()

    def close(self, progress_text: str) -> None:
        sys.stderr.write(("\n" if self.enabled else "") + progress_text + "\n")
        sys.stderr.flush()
