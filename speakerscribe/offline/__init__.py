"""Former home of the offline model preparation (now :mod:`speakerscribe.models`); kept for
``python -m speakerscribe.offline.prepare``."""
