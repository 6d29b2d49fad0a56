"""Former path of CAM++ (now :mod:`speakerscribe.diarization.campplus`), kept because diarization folders
prepared before the move name ``speakerscribe.campplus.CAMPPlusEmbedding`` in their embedding checkpoint, and
pyannote imports the class from that path when it loads them."""

from .diarization.campplus import CAMPPlusEmbedding

__all__ = ["CAMPPlusEmbedding"]
