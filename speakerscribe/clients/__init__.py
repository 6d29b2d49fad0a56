"""What runs on the caller's side or from a terminal: :mod:`.cli` (``python -m speakerscribe.cli``), :mod:`.batch`
(many files through deployed endpoints), :mod:`.stream` and :mod:`.mic` (``python -m speakerscribe.stream``: a file or
the microphone to a live route), :mod:`.deploy` (``python -m speakerscribe.deploy``: create an Inference Endpoint).

A front door: may import anything below it; nothing in the package imports it.
"""
