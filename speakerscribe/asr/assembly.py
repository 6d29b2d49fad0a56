"""Decoded windows -> :class:`~speakerscribe.records.Chunk` and :class:`~speakerscribe.records.Word` records at
absolute times: segments clamped to the window and kept monotonic, words grouped from tokens (:mod:`.tokens`) and
timed by the scoring pass."""

from __future__ import annotations

import numpy as np

from ..options import AsrOptions
from ..records import Chunk, Word
from .decoded import Decoded
from .tokens import group_words


def window_chunks(
    engine, d: Decoded, duration: float, language: str, opts: AsrOptions, with_words: bool
) -> list[Chunk]:
    if not d.segments or d.is_silence(opts):
        return []
    w0 = d.window.start
    wlen = d.window.end - d.window.start
    chunks = []
    position = 0  # index into the window's generated-token list of the segment's first token
    gen_positions = d.text_positions
    floor = 0.0  # segments never start before the previous one ended: times stay monotonic
    for seg in d.segments:
        text = engine.tokenizer.decode(list(seg.token_ids), skip_special_tokens=True)
        start = min(max(seg.start, floor), wlen)
        end = min(seg.end if seg.end is not None else wlen, wlen)
        end = max(end, start)
        floor = end
        words: tuple[Word, ...] = ()
        if with_words and gen_positions:
            seg_pos = gen_positions[position : position + len(seg.token_ids)]
            words = segment_words(engine, list(seg.token_ids), seg_pos, d.token_times, start, end, w0, language)
            if seg.end is None and words:  # never closed (a cut loop, the token limit): end at its last word
                end = floor = max(start, words[-1].end - w0)
        position += len(seg.token_ids)
        if not text.strip():
            continue
        chunks.append(
            Chunk(
                start=round(w0 + start, 3),
                end=round(min(w0 + end, duration), 3),
                text=text,
                words=words,
                avg_logprob=round(d.avg_logprob, 4),
                no_speech_prob=round(d.no_speech_prob, 4),
            )
        )
    return chunks


def segment_words(
    engine,
    token_ids: list[int],
    positions: list[int],
    times: dict[int, float],
    seg_start: float,
    seg_end: float,
    offset: float,
    language: str,
) -> tuple[Word, ...]:
    words = []
    all_positions = sorted(times)
    for text, a, b in group_words(token_ids, engine.tokenizer, language):
        start_pos = positions[a]
        end_pos = positions[b] if b < len(positions) else _next(all_positions, positions[b - 1])
        start = min(max(times.get(start_pos, seg_start), seg_start), seg_end)
        end = min(max(times.get(end_pos, seg_end), start), seg_end)
        words.append(Word(text=text, start=round(offset + start, 3), end=round(offset + end, 3)))
    return tuple(words)


def _next(sorted_positions: list[int], pos: int) -> int:
    i = int(np.searchsorted(sorted_positions, pos, side="right"))
    return sorted_positions[i] if i < len(sorted_positions) else pos
