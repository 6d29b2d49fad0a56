"""speakerscribe: who said what, when. Whisper transcribes, pyannote finds the speakers, the two are merged.

Walk it in the order a request flows (the README's "Layout" has the table):

* the shared bottom: :mod:`.records` (typed records between stages), :mod:`.options` (what a request asks of each
  stage), :mod:`.errors`, :mod:`.runtime`, :mod:`.timing`, :mod:`.cancel`, :mod:`.intervals`;
* the stages: :mod:`.audio` (bytes -> waveform, speech, windows), :mod:`.asr` (Whisper), :mod:`.speakers` (voices
  and names), :mod:`.diarization` (who spoke when);
* :mod:`.merge` (words -> speakers), :mod:`.pipeline` (the stages as named steps), :mod:`.models` (settings and
  loading), :mod:`.response` and :mod:`.formats` (the answer), :mod:`.endpoint` (the handler class);
* the front doors: :mod:`.live` (live sessions), :mod:`.serve` (the HTTP service), :mod:`.clients` (CLI, batch,
  streaming client, deploy).

Imports point down that list only (``tests/test_layers.py``). :mod:`.server`, :mod:`.cli`, :mod:`.deploy`,
:mod:`.stream`, :mod:`.offline` and :mod:`.campplus` are former paths kept as shims. Nothing happens at import.
"""
