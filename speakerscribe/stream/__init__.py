"""Live transcription: a protocol-independent session (:mod:`.session`) with turn detection, partials that never
retract (:mod:`.agreement`) and session-wide speaker labels (:mod:`.online_speakers`); the WebSocket routes are in
:mod:`speakerscribe.http.realtime` and :mod:`speakerscribe.http.ws`, the command-line client in :mod:`.client`
(``python -m speakerscribe.stream FILE``, or ``--mic`` with :mod:`.mic`)."""
