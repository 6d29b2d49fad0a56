"""Whisper output token ids -> timestamped segments, and segment tokens -> words.

Whisper timestamps a segment by surrounding its text with timestamp tokens: ``<|t0|> text <|t1|><|t1|> text <|t2|>``.
Ids at or above ``timestamp_begin`` (the id after ``<|notimestamps|>``) are times in steps of 0.02 s; ids below
``eos`` are text; ids in between are other special tokens. A last segment whose closing timestamp never came has
``end=None``: the caller closes it at the window's end, so no text is dropped.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

TIME_PRECISION = 0.02
# Scripts written without spaces between words: split words at character boundaries instead.
NO_SPACE_LANGUAGES = frozenset({"zh", "ja", "th", "lo", "my", "yue"})
_PUNCTUATION = set("\"'“”‘’«»¿¡.,!?:;…、。，！？：；)]}》」』%")


@dataclass(frozen=True, slots=True)
class RawSegment:
    """A segment inside one window; times are seconds from the window start."""

    start: float
    end: float | None
    token_ids: tuple[int, ...]


def split_segments(ids: np.ndarray | list[int], timestamp_begin: int, eos: int) -> list[RawSegment]:
    segments: list[RawSegment] = []
    text: list[int] = []
    open_start: float | None = None
    last_time = 0.0
    for tok in (int(t) for t in ids):
        if tok == eos:
            break
        if tok >= timestamp_begin:
            t = (tok - timestamp_begin) * TIME_PRECISION
            if text:
                start = last_time if open_start is None else open_start
                segments.append(RawSegment(start, max(t, start), tuple(text)))
                text = []
                open_start = None
            else:
                open_start = t
            last_time = t
        elif tok < eos:
            text.append(tok)
    if text:
        segments.append(RawSegment(last_time if open_start is None else open_start, None, tuple(text)))
    return segments


def text_token_ids(ids: np.ndarray | list[int], eos: int) -> list[int]:
    """The text tokens of a sequence, in order, up to the first ``eos``."""
    out: list[int] = []
    for tok in (int(t) for t in ids):
        if tok == eos:
            break
        if tok < eos:
            out.append(tok)
    return out


def group_words(token_ids: list[int], tokenizer, language: str | None) -> list[tuple[str, int, int]]:
    """Group consecutive text tokens into words: ``(text, first_token_index, end_token_index)`` (end exclusive).

    A word starts at a token that begins with a space; punctuation attaches to the word before it. For languages
    written without spaces every complete character sequence is its own word. Tokens that hold part of a UTF-8
    character stay with their neighbours until the bytes decode cleanly.
    """
    if not token_ids:
        return []
    pieces = tokenizer.convert_ids_to_tokens(token_ids)
    no_space = language in NO_SPACE_LANGUAGES
    groups: list[list[int]] = []
    for i, piece in enumerate(pieces):
        starts_word = no_space or piece.startswith("Ġ") or not groups
        if groups and starts_word:
            current = tokenizer.decode([token_ids[k] for k in groups[-1]])
            if "\ufffd" in current:  # an incomplete UTF-8 character: keep collecting bytes
                starts_word = False
            elif not no_space:
                bare = tokenizer.decode([token_ids[i]]).strip()
                if bare and all(ch in _PUNCTUATION for ch in bare):
                    starts_word = False
        if starts_word or not groups:
            groups.append([i])
        else:
            groups[-1].append(i)
    words = []
    for g in groups:
        text = tokenizer.decode([token_ids[k] for k in g])
        if text.strip():
            words.append((text, g[0], g[-1] + 1))
    return words


def compression_ratio(text: str) -> float:
    """UTF-8 length over zlib-compressed length: above ~2.4 the text repeats itself (Whisper's loop signal)."""
    raw = text.encode("utf-8")
    return len(raw) / max(1, len(zlib.compress(raw)))


# ------------------------------------------------------------------------------------------ repetition loops
MAX_LOOP_PERIOD = 24  # longest repeated token block recognised as a loop
MIN_LOOP_REPEATS = 4
MIN_LOOP_TOKENS = 12  # a loop repeats at least this many tokens in all ("yeah," x 6, "ha" x 12)


def _repeats_needed(period: int) -> int:
    return max(MIN_LOOP_REPEATS, -(-MIN_LOOP_TOKENS // period))


def find_loop(tokens: list[int] | tuple[int, ...]) -> tuple[int, int] | None:
    """Earliest ``(start, period)`` where a block of ``period`` text tokens repeats itself back to back at least
    ``max(4, 12 / period)`` times; None when the tokens never loop. ``tokens[: start + period]`` keeps the text
    before the loop and one copy of the repeated block."""
    n = len(tokens)
    if n < MIN_LOOP_TOKENS:
        return None
    arr = np.asarray(tokens, dtype=np.int64)
    best: tuple[int, int] | None = None
    for period in range(1, min(MAX_LOOP_PERIOD, n // MIN_LOOP_REPEATS) + 1):
        need = (_repeats_needed(period) - 1) * period  # consecutive positions k with tokens[k] == tokens[k + p]
        if need + period > n:
            continue
        same = np.concatenate([[False], arr[period:] == arr[:-period], [False]])
        edges = np.flatnonzero(np.diff(same.astype(np.int8)))
        starts, ends = edges[::2], edges[1::2]
        long_runs = starts[(ends - starts) >= need]
        if long_runs.size and (best is None or long_runs[0] < best[0]):
            best = (int(long_runs[0]), period)
    return best


def ends_in_loop(tokens: list[int]) -> bool:
    """Whether the last tokens are a loop in :func:`find_loop`'s sense (cheap: checked at every decoding step)."""
    n = len(tokens)
    for period in range(1, MAX_LOOP_PERIOD + 1):
        span = _repeats_needed(period) * period
        if span > n:
            continue
        if tokens[n - span + period :] == tokens[n - span : n - period]:
            return True
    return False
