"""Speech recognition with Whisper: :mod:`.engine` (``WhisperEngine``: load, validate, transcribe planned
windows), :mod:`.greedy` (the decoding loop with timestamp rules), :mod:`.tokens` (token ids -> segments and words),
:mod:`.alignment` (word times from cross-attention), :mod:`.languages` (names and codes), :mod:`.coverage` (speech
the transcript missed, and the follow-up windows that decode it).

Imports the shared bottom and :mod:`speakerscribe.audio`; never diarization, the pipeline or a front door.
"""
