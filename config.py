"""Settings of the endpoint, as the original handler named them.

``ModelSettings`` reads the environment (``ASR_MODEL``, ``ASSISTANT_MODEL``, ``DIARIZATION_MODEL``, ``HF_TOKEN``, and
the deployment options documented in the README) when the handler is constructed. ``InferenceConfig`` validates a
request's ``parameters``. Both live in :mod:`speakerscribe.models.settings`; this module keeps the original import path.
"""

from speakerscribe.models.settings import InferenceConfig, ModelSettings, parse_parameters

__all__ = ["InferenceConfig", "ModelSettings", "parse_parameters"]
