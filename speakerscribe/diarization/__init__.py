"""Who spoke when: :mod:`.diarizer` (``SpeakerDiarizer``: a pyannote pipeline fed the decoded waveform),
:mod:`.pyannote_loading` (Hub id, folder or config.yaml -> pipeline), :mod:`.pyannote_pipeline` (pyannote's pipeline
with shared frames and bounded clustering), :mod:`.shared_frames` / :mod:`.resnet_frames` (speaker embeddings from
frames computed once per file), :mod:`.bounded_clustering`, :mod:`.constrained_clustering` (voices heard at once
kept apart), :mod:`.recluster` (the second clustering pass), :mod:`.speaker_folding` (stray and alike speakers folded
once the turns are known), :mod:`.campplus` (the CAM++ embedding model).

Imports the shared bottom and :mod:`speakerscribe.speakers`; never ASR, the pipeline or a front door.
"""
