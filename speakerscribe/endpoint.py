"""The Inference Endpoints handler class: parse the body, decode once, run the pipeline, answer the original shape.

``handler.py`` at the repository root re-exports :class:`EndpointHandler`, which is what the runtime loads.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .audio import load_inputs
from .cancel import CancelToken
from .errors import InputError, quote
from .pipeline import Transcriber
from .records import Result
from .response import endpoint_response
from .settings import InferenceConfig, ModelSettings, parse_parameters


class EndpointHandler:
    def __init__(self, path: str = ""):
        self.settings = ModelSettings()
        self.transcriber = Transcriber.from_settings(self.settings, model_dir=path or None)

    def check_parameters(self, parameters: Any) -> InferenceConfig:
        """A request's ``parameters`` validated, and checked against the loaded models (language, task, draft
        model); InputError otherwise. Cheap: the server calls it before a request queues."""
        cfg = parse_parameters(parameters)
        self.transcriber.check(cfg)
        return cfg

    def process(
        self, data: Any, cancel: CancelToken | None = None, consume: bool = False
    ) -> tuple[Result, InferenceConfig]:
        """Request body -> (Result, parsed parameters). Raises InputError for anything the caller must fix.

        Every parameter is checked (against the loaded models too) before the audio is decoded; ``cancel`` stops
        the work at the pipeline's next checkpoint (see :mod:`speakerscribe.cancel`). With ``consume``, ``inputs``
        is taken out of ``data`` so that the encoded audio is freed once decoded (the server's requests)."""
        if not isinstance(data, dict):
            raise InputError('the request body must be a JSON object: {"inputs": <base64 audio>, "parameters": {...}}')
        if "inputs" not in data:
            raise InputError('the request has no `inputs`: send {"inputs": <base64 audio>, "parameters": {...}}')
        extra = sorted(set(data) - {"inputs", "parameters"})
        if extra:
            raise InputError(
                f"unknown top-level field(s) {', '.join(quote(e, 60) for e in extra[:5])}; the body holds `inputs` "
                "and optionally `parameters`"
            )
        cfg = self.check_parameters(data.get("parameters"))
        inputs = data.pop("inputs") if consume else data["inputs"]
        samples_sent = isinstance(inputs, list)
        checkpoint = cancel.check if cancel is not None else None
        if checkpoint is not None:
            checkpoint()  # the deadline may have passed while the request was queued
        audio = load_inputs(inputs, cfg.sampling_rate, self.transcriber.max_audio_seconds, checkpoint)
        del inputs
        result = self.transcriber.run(audio.waveform, cfg, cancel=cancel)
        native_rate = audio.native_rate
        if audio.warnings:
            result = dataclasses.replace(result, warnings=(*audio.warnings, *result.warnings))
        if "sampling_rate" in cfg.model_fields_set and not samples_sent and cfg.sampling_rate != native_rate:
            note = (
                f"sampling_rate={cfg.sampling_rate} was not used: the audio file declares {native_rate} Hz "
                "(sampling_rate describes `inputs` sent as a list of samples)"
            )
            result = dataclasses.replace(result, warnings=(*result.warnings, note))
        return result, cfg

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        result, cfg = self.process(data)
        return endpoint_response(result, words=cfg.word_timestamps)
