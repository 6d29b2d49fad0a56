"""Whisper language names and codes: normalise what a caller sends to the code Whisper uses ("en", "yue", ...)."""

from __future__ import annotations

from functools import lru_cache

from ..errors import InputError


@lru_cache(maxsize=1)
def _tables() -> tuple[dict[str, str], dict[str, str]]:
    from transformers.models.whisper.tokenization_whisper import LANGUAGES, TO_LANGUAGE_CODE

    return dict(LANGUAGES), dict(TO_LANGUAGE_CODE)


def normalise_language(value: str, supported: frozenset[str] | None = None) -> str:
    """ "en", "EN", "english", "<|en|>" -> "en". Raises InputError naming the accepted values."""
    code_to_name, name_to_code = _tables()
    raw = value.strip()
    key = raw.lower().removeprefix("<|").removesuffix("|>").strip()
    code = key if key in code_to_name else name_to_code.get(key)
    if code is None and "-" in key:  # "en-US" -> "en"
        head = key.split("-", 1)[0]
        code = head if head in code_to_name else None
    if code is None:
        raise InputError(
            f"unknown language {value!r}: give an ISO-639-1 code such as 'en', 'de', 'fr', or an English "
            f"language name such as 'german'. Supported codes: {', '.join(sorted(supported or code_to_name))}."
        )
    if supported is not None and code not in supported:
        raise InputError(
            f"language {value!r} is not supported by the loaded ASR model; supported: {', '.join(sorted(supported))}."
        )
    return code
