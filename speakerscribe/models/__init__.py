"""Deployment settings and models: :mod:`.settings` (env vars and per-request parameters, validated once),
:mod:`.loading` (settings -> loaded models -> a ``Transcriber``), and the offline preparation of the default models
from PyPI packages (:mod:`.prepare`, :mod:`.ct2`, :mod:`.whisper_convert`, :mod:`.pyannote_folder`).

Sits above the pipeline (loading builds one); the front doors and the handler import it.
"""
