"""Inference Endpoints custom handler: Whisper (+ draft model) + pyannote, merged into "who said what, when".

The runtime imports this file with the repository first on ``sys.path``, builds ``EndpointHandler(model_dir)`` once
and calls it with the request body: ``{"inputs": <base64 str | bytes>, "parameters": {...}}``. The implementation
lives in :mod:`speakerscribe.endpoint`.
"""

from speakerscribe.endpoint import EndpointHandler

__all__ = ["EndpointHandler"]
