"""Live transcription, independent of any wire protocol: :mod:`.session` (turn detection, partials, finals,
summary), :mod:`.agreement` (partials that never retract), :mod:`.online_speakers` (labels stable for a session).

A front door's engine room: imports the stages and the shared bottom; the WebSocket routes (:mod:`speakerscribe.serve`)
import it, never the other way round.
"""
