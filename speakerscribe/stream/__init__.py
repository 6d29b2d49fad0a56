"""Former home of live transcription, kept for ``python -m speakerscribe.stream``: the session is now
:mod:`speakerscribe.live`, the client :mod:`speakerscribe.clients.stream`."""
