"""Inference Endpoints custom handler: Whisper (+ draft model) + pyannote, merged into "who said what, when".

The runtime imports this file with the repository first on ``sys.path``, builds ``EndpointHandler(model_dir)`` once
and calls it with the request body: ``{"inputs": <base64 str | bytes>, "parameters": {...}}``.
"""

from __future__ import annotations

from typing import Any

from speakerscribe.audio import load_inputs
from speakerscribe.errors import InputError
from speakerscribe.pipeline import Transcriber
from speakerscribe.response import endpoint_response
from speakerscribe.settings import ModelSettings, parse_parameters


class EndpointHandler:
    def __init__(self, path: str = ""):
        self.settings = ModelSettings()
        self.transcriber = Transcriber.from_settings(self.settings, model_dir=path or None)

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise InputError('the request body must be a JSON object: {"inputs": <base64 audio>, "parameters": {...}}')
        if "inputs" not in data:
            raise InputError('the request has no `inputs`: send {"inputs": <base64 audio>, "parameters": {...}}')
        extra = sorted(set(data) - {"inputs", "parameters"})
        if extra:
            raise InputError(
                f"unknown top-level field(s) {', '.join(map(repr, extra))}; the body holds `inputs` "
                "and optionally `parameters`"
            )
        cfg = parse_parameters(data.get("parameters"))
        waveform, native_rate = load_inputs(data["inputs"], cfg.sampling_rate)
        result = self.transcriber.run(waveform, cfg)
        response = endpoint_response(result, words=cfg.word_timestamps)
        if (
            "sampling_rate" in cfg.model_fields_set
            and not isinstance(data["inputs"], list)
            and cfg.sampling_rate != native_rate
        ):
            response["warnings"].append(
                f"sampling_rate={cfg.sampling_rate} was not used: the audio file declares {native_rate} Hz "
                "(sampling_rate describes `inputs` sent as a list of samples)"
            )
        return response
