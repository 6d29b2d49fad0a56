"""Voices and the names of people: :mod:`.pieces` (short pieces of turns and their pooled embeddings),
:mod:`.voiceprints` (embeddings of reference clips and of diarized speakers), :mod:`.names` (known-speaker
references matched to diarized speakers).

Imports only the shared bottom of the package; diarization builds on it.
"""
