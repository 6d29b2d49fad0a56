"""Audio in: the request's bytes decoded once into float32 mono 16 kHz (:mod:`.decode`), speech detection with
Silero VAD (:mod:`.vad`), and the windows Whisper decodes, planned over the speech (:mod:`.windows`).

Imports only the shared bottom of the package (records, options, errors, runtime, intervals).
"""
