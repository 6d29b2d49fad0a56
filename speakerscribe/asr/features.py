"""Whisper's inputs: log-mel features of a batch of windows, the encoder, the language (detected from the longest
windows), and the decoder's prompt."""

from __future__ import annotations

import numpy as np

from ..records import SAMPLE_RATE, Span, Waveform

DETECT_WINDOWS = 8  # longest windows used to detect the language


def window_features(engine, waveform: Waveform, windows: list[Span]):
    slices = [waveform.samples[int(w.start * SAMPLE_RATE) : int(round(w.end * SAMPLE_RATE))] for w in windows]
    kwargs = {"device": engine.placement.device} if engine.placement.is_cuda else {}
    feats = engine.feature_extractor(
        slices, sampling_rate=SAMPLE_RATE, return_tensors="pt", padding="max_length", **kwargs
    ).input_features
    return feats.to(engine.placement.device, engine.placement.dtype)


def encode(engine, features):
    return engine.model.model.encoder(features)


def detect_language(engine, encoder_outputs, windows: list[Span]) -> tuple[str, float]:
    """Language from the first (longest) ``DETECT_WINDOWS`` encoded windows: their language probabilities
    averaged with weights = window duration. Returns (code, probability)."""
    import torch
    from transformers.modeling_outputs import BaseModelOutput

    longest = windows[:DETECT_WINDOWS]
    enc = BaseModelOutput(last_hidden_state=encoder_outputs.last_hidden_state[: len(longest)])
    with torch.inference_mode():
        sot = torch.full((len(longest), 1), engine.sot, device=engine.placement.device, dtype=torch.long)
        logits = engine.model(encoder_outputs=enc, decoder_input_ids=sot, use_cache=False).logits[:, 0].float()
    codes = list(engine.lang_to_id)
    ids = torch.tensor([engine.lang_to_id[c] for c in codes], device=logits.device)
    probs = torch.softmax(logits[:, ids], dim=-1).cpu().numpy()
    weights = np.array([w.end - w.start for w in longest])
    mean = (probs * weights[:, None]).sum(0) / weights.sum()
    k = int(np.argmax(mean))
    return codes[k], float(mean[k])


def prompt_ids(engine, language: str, task: str, text: str | None = None) -> list[int]:
    """Decoder prefix: [<|startofprev|> prompt tokens]? <|startoftranscript|> [language, task]."""
    head: list[int] = []
    if text and text.strip() and engine.prev_sot is not None:
        tokens = engine.tokenizer.encode(" " + text.strip(), add_special_tokens=False)
        limit = engine.model.config.max_target_positions // 2 - 1  # Whisper keeps the last 223 prompt tokens
        head = [engine.prev_sot, *tokens[-limit:]]
    if not engine.multilingual:
        return [*head, engine.sot]
    return [*head, engine.sot, engine.lang_to_id[language], int(engine.task_to_id[task])]
