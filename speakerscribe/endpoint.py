"""The Inference Endpoints handler class: parse the body, decode once, run the pipeline, answer the original shape.

``handler.py`` at the repository root re-exports :class:`EndpointHandler`, which is what the runtime loads.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .audio.decode import load_inputs, load_reference
from .cancel import CancelToken
from .errors import InputError, quote
from .models.loading import load_transcriber
from .models.settings import ModelSettings, parse_parameters
from .options import KnownSpeakers, RequestOptions
from .pipeline import Transcriber
from .records import Result
from .response import endpoint_response
from .speakers.names import MAX_REFERENCE_SECONDS, Reference


class EndpointHandler:
    """``EndpointHandler(path)`` reads its settings from the environment, as the Endpoints runtime builds it;
    ``settings=`` gives them directly: ``ModelSettings.given(...)`` (nothing read from the environment: tests,
    applications) or ``ModelSettings(...)`` (the environment for what is not given)."""

    def __init__(self, path: str = "", settings: ModelSettings | None = None):
        self.settings = settings if settings is not None else ModelSettings()
        self.transcriber = load_transcriber(self.settings, model_dir=path or None)

    @property
    def has_diarizer(self) -> bool:
        return self.transcriber.has_diarizer

    def check_parameters(self, parameters: Any) -> RequestOptions:
        """A request's ``parameters`` validated, translated into per-stage options, and checked against the loaded
        models (language, task, draft model); InputError otherwise. Cheap: the server calls it before a request
        queues."""
        options = parse_parameters(parameters).to_options()
        self.transcriber.check(options)
        return options

    def process(
        self, data: Any, cancel: CancelToken | None = None, consume: bool = False
    ) -> tuple[Result, RequestOptions]:
        """Request body -> (Result, the request's options). Raises InputError for anything the caller must fix.

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
        options = self.check_parameters(data.get("parameters"))
        inputs = data.pop("inputs") if consume else data["inputs"]
        samples_sent = isinstance(inputs, list)
        checkpoint = cancel.check if cancel is not None else None
        if checkpoint is not None:
            checkpoint()  # the deadline may have passed while the request was queued
        references, reference_warnings = self.references(options, checkpoint)
        audio = load_inputs(inputs, options.input.sampling_rate, self.transcriber.max_audio_seconds, checkpoint)
        del inputs
        result = self.transcriber.run(audio.waveform, options, cancel=cancel, references=references)
        native_rate = audio.native_rate
        if audio.warnings or reference_warnings:
            result = dataclasses.replace(result, warnings=(*audio.warnings, *reference_warnings, *result.warnings))
        requested = options.input
        if requested.sampling_rate_given and not samples_sent and requested.sampling_rate != native_rate:
            note = (
                f"sampling_rate={requested.sampling_rate} was not used: the audio file declares {native_rate} Hz "
                "(sampling_rate describes `inputs` sent as a list of samples)"
            )
            result = dataclasses.replace(result, warnings=(*result.warnings, note))
        return result, options

    def references(self, options: RequestOptions, checkpoint=None) -> tuple[tuple[Reference, ...], list[str]]:
        """The request's known-speaker clips decoded (before the main audio: a bad clip fails fast) and checked;
        with the decoding warnings, each naming its clip."""
        return known_references(self.transcriber, options.known, checkpoint)

    def __call__(self, data: dict[str, Any]) -> dict[str, Any]:
        result, options = self.process(data)
        return endpoint_response(result, words=options.attribution.show_words)


def known_references(
    transcriber: Transcriber, known: KnownSpeakers, checkpoint=None
) -> tuple[tuple[Reference, ...], list[str]]:
    """Known speakers' clips as sent (``known.clips``) decoded with the main audio's decoder and limits, their
    speech found and checked (:meth:`Transcriber.references`); with the decoding warnings, each naming its clip.
    Every front door (the handler, the CLI) takes its references from here."""
    if not known:
        return (), []
    clips, warnings = [], []
    for name, clip in zip(known.names, known.clips):
        decoded = load_reference(name, clip, MAX_REFERENCE_SECONDS, checkpoint)
        clips.append((name, decoded.waveform))
        warnings.extend(f"known speaker {name[:80]!r}, reference clip: {w}" for w in decoded.warnings)
    return transcriber.references(clips), warnings
