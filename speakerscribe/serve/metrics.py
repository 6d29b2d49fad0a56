"""Prometheus metrics of the server, in a registry of its own (nothing global, nothing at import).

Exposed at ``GET /metrics`` in the Prometheus text format, as the Inference Endpoints toolkit does:

* ``speakerscribe_requests_total{route,status}`` - answered requests;
* ``speakerscribe_request_seconds{route}`` - histogram of the time from arrival to answer;
* ``speakerscribe_queue_length`` - requests waiting for a processing slot;
* ``speakerscribe_in_flight`` - requests being processed;
* ``speakerscribe_audio_seconds_total`` - seconds of audio transcribed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600)


@dataclass
class ServerMetrics:
    registry: Any
    requests: Any
    seconds: Any
    audio_seconds: Any

    @classmethod
    def create(cls, queued: Callable[[], float], in_flight: Callable[[], float]) -> ServerMetrics:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        registry = CollectorRegistry(auto_describe=True)
        requests = Counter("speakerscribe_requests", "Answered requests", ["route", "status"], registry=registry)
        seconds = Histogram(
            "speakerscribe_request_seconds", "Time from arrival to answer", ["route"], buckets=BUCKETS,
            registry=registry,
        )  # fmt: skip
        audio = Counter("speakerscribe_audio_seconds", "Seconds of audio transcribed", registry=registry)
        Gauge("speakerscribe_queue_length", "Requests waiting for a slot", registry=registry).set_function(queued)
        Gauge("speakerscribe_in_flight", "Requests being processed", registry=registry).set_function(in_flight)
        return cls(registry, requests, seconds, audio)

    def observe(self, route: str, status: int, seconds: float, audio_s: float | None) -> None:
        self.requests.labels(route=route, status=str(status)).inc()
        self.seconds.labels(route=route).observe(seconds)
        if audio_s:
            self.audio_seconds.inc(audio_s)

    def exposition(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
