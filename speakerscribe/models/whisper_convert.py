"""Turn a CTranslate2 Whisper model (faster-whisper layout) into a transformers model folder.

The folder holds what ``WhisperForConditionalGeneration.from_pretrained``, ``WhisperProcessor.from_pretrained`` and
``AutoTokenizer.from_pretrained`` need: ``config.json``, ``generation_config.json``, ``model.safetensors``,
``tokenizer.json`` (+ config), ``preprocessor_config.json``. A draft model for speculative decoding can be cut from it
(:func:`cut_assistant`): a ``WhisperForCausalLM`` made of the main decoder's first layers.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from .ct2 import CT2Model

logger = logging.getLogger(__name__)

# Whisper's timestamp tokens: <|0.00|> ... <|30.00|> in steps of 0.02 s.
N_TIMESTAMP_TOKENS = 1501


def _count_layers(model: CT2Model, side: str) -> int:
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in model.variables:
        n += 1
    if n == 0:
        raise ValueError(f"no {side} layers found in the CTranslate2 model")
    return n


def _added_token_ids(tokenizer: dict[str, Any]) -> dict[str, int]:
    return {tok["content"]: tok["id"] for tok in tokenizer.get("added_tokens", [])}


def state_dict_from_ct2(model: CT2Model) -> dict[str, np.ndarray]:
    """Map CTranslate2 variable names onto ``WhisperForConditionalGeneration`` parameter names."""
    sd: dict[str, np.ndarray] = {}
    get = model.get

    def linear(dst: str, src: str, bias: bool = True) -> None:
        sd[f"{dst}.weight"] = get(f"{src}/weight")
        if bias:
            sd[f"{dst}.bias"] = get(f"{src}/bias")

    def norm(dst: str, src: str) -> None:
        sd[f"{dst}.weight"] = get(f"{src}/gamma")
        sd[f"{dst}.bias"] = get(f"{src}/beta")

    def fused(dst_prefix: str, names: list[str], src: str) -> None:
        weights = np.split(get(f"{src}/weight"), len(names), axis=0)
        biases = np.split(get(f"{src}/bias"), len(names), axis=0)
        for name, w, b in zip(names, weights, biases):
            sd[f"{dst_prefix}.{name}.weight"] = w
            if name != "k_proj":  # transformers' Whisper k_proj has no bias
                sd[f"{dst_prefix}.{name}.bias"] = b

    for side in ("encoder", "decoder"):
        root = f"model.{side}"
        sd[f"{root}.embed_positions.weight"] = get(f"{side}/position_encodings/encodings")
        norm(f"{root}.layer_norm", f"{side}/layer_norm")
        for i in range(_count_layers(model, side)):
            dst, src = f"{root}.layers.{i}", f"{side}/layer_{i}"
            fused(f"{dst}.self_attn", ["q_proj", "k_proj", "v_proj"], f"{src}/self_attention/linear_0")
            linear(f"{dst}.self_attn.out_proj", f"{src}/self_attention/linear_1")
            norm(f"{dst}.self_attn_layer_norm", f"{src}/self_attention/layer_norm")
            linear(f"{dst}.fc1", f"{src}/ffn/linear_0")
            linear(f"{dst}.fc2", f"{src}/ffn/linear_1")
            norm(f"{dst}.final_layer_norm", f"{src}/ffn/layer_norm")
            if side == "decoder":
                linear(f"{dst}.encoder_attn.q_proj", f"{src}/attention/linear_0")
                fused(f"{dst}.encoder_attn", ["k_proj", "v_proj"], f"{src}/attention/linear_1")
                linear(f"{dst}.encoder_attn.out_proj", f"{src}/attention/linear_2")
                norm(f"{dst}.encoder_attn_layer_norm", f"{src}/attention/layer_norm")
    for conv in ("conv1", "conv2"):
        linear(f"model.encoder.{conv}", f"encoder/{conv}")
    sd["model.decoder.embed_tokens.weight"] = get("decoder/embeddings/weight")
    return sd


def whisper_config_dict(model: CT2Model, tokenizer: dict[str, Any]) -> dict[str, Any]:
    """The ``WhisperConfig`` fields implied by the weights' shapes and the tokenizer's special tokens."""
    ids = _added_token_ids(tokenizer)
    embed = model.get("decoder/embeddings/weight")
    return {
        "vocab_size": int(embed.shape[0]),
        "d_model": int(embed.shape[1]),
        "num_mel_bins": int(model.get("encoder/conv1/weight").shape[1]),
        "encoder_layers": _count_layers(model, "encoder"),
        "decoder_layers": _count_layers(model, "decoder"),
        "encoder_attention_heads": model.scalar("encoder/num_heads"),
        "decoder_attention_heads": model.scalar("decoder/num_heads"),
        "encoder_ffn_dim": int(model.get("encoder/layer_0/ffn/linear_0/weight").shape[0]),
        "decoder_ffn_dim": int(model.get("decoder/layer_0/ffn/linear_0/weight").shape[0]),
        "max_source_positions": int(model.get("encoder/position_encodings/encodings").shape[0]),
        "max_target_positions": int(model.get("decoder/position_encodings/encodings").shape[0]),
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": True,
        "scale_embedding": False,
        "activation_function": "gelu",
    }


def generation_config_dict(
    ct2_config: dict[str, Any], tokenizer: dict[str, Any], vocab_size: int, multilingual: bool | None = None
) -> dict[str, Any]:
    """Whisper's generation settings: special ids, suppression lists, alignment heads, languages, tasks.

    ``multilingual`` defaults to Whisper's own rule: multilingual checkpoints have 51865+ tokens.
    """
    ids = _added_token_ids(tokenizer)
    id_to_token = {v: k for k, v in ids.items()}
    if multilingual is None:
        multilingual = vocab_size >= 51865
    gen: dict[str, Any] = {
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "is_multilingual": multilingual,
        "suppress_tokens": [int(t) for t in ct2_config.get("suppress_ids", [])],
        "begin_suppress_tokens": [int(t) for t in ct2_config.get("suppress_ids_begin", [])],
        "alignment_heads": [[int(a), int(b)] for a, b in ct2_config.get("alignment_heads", [])],
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "return_timestamps": False,
    }
    if multilingual:
        gen["lang_to_id"] = {id_to_token[i]: int(i) for i in ct2_config.get("lang_ids", [])}
        gen["task_to_id"] = {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]}
    return gen


def tokenizer_with_timestamps(tokenizer: dict[str, Any], vocab_size: int) -> dict[str, Any]:
    """Add the timestamp tokens (<|0.00|> ... <|30.00|>) as added, non-special tokens, as Hub checkpoints do."""
    out = json.loads(json.dumps(tokenizer))
    added = out.setdefault("added_tokens", [])
    present = {tok["content"] for tok in added}
    first = max(tok["id"] for tok in added) + 1
    n = min(N_TIMESTAMP_TOKENS, vocab_size - first)
    for k in range(n):
        content = f"<|{k * 0.02:.2f}|>"
        if content in present:
            continue
        added.append(
            {
                "id": first + k,
                "content": content,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": False,
            }
        )
    return out


def save_whisper_folder(
    out_dir: str | Path,
    config_fields: dict[str, Any],
    generation_fields: dict[str, Any],
    tokenizer: dict[str, Any],
    state_dict: dict[str, np.ndarray] | None = None,
    seed: int = 0,
) -> Path:
    """Write model, generation config, tokenizer and feature extractor; random weights when no ``state_dict``."""
    import torch
    from tokenizers import Tokenizer
    from transformers import (
        GenerationConfig,
        WhisperConfig,
        WhisperFeatureExtractor,
        WhisperForConditionalGeneration,
        WhisperTokenizerFast,
    )

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = WhisperConfig(**config_fields)
    config.architectures = ["WhisperForConditionalGeneration"]
    if state_dict is None:
        torch.manual_seed(seed)
        hf_model = WhisperForConditionalGeneration(config)
    else:
        with torch.device("meta"):
            hf_model = WhisperForConditionalGeneration(config)
        state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state_dict.items()}
        missing, unexpected = hf_model.load_state_dict(state, strict=False, assign=True)
        missing = [m for m in missing if m != "proj_out.weight"]  # tied to the token embeddings
        if missing or unexpected:
            raise ValueError(f"weight mapping incomplete: missing={missing[:5]} unexpected={unexpected[:5]}")
        hf_model.tie_weights()
    hf_model.generation_config = GenerationConfig(**generation_fields)
    hf_model.save_pretrained(out)

    full_tok = tokenizer_with_timestamps(tokenizer, config_fields["vocab_size"])
    tok = WhisperTokenizerFast(  # the tokenizers-backed class in transformers 4 and 5 alike
        tokenizer_object=Tokenizer.from_str(json.dumps(full_tok)),
        unk_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        eos_token="<|endoftext|>",
        pad_token="<|endoftext|>",
    )
    tok.save_pretrained(out)
    WhisperFeatureExtractor(feature_size=config_fields["num_mel_bins"]).save_pretrained(out)
    return out


def write_transformers_folder(
    model: CT2Model,
    ct2_config: dict[str, Any],
    tokenizer: dict[str, Any],
    out_dir: str | Path,
) -> Path:
    """Write a complete transformers Whisper folder for a CTranslate2 model to ``out_dir``."""
    fields = whisper_config_dict(model, tokenizer)
    gen = generation_config_dict(ct2_config, tokenizer, fields["vocab_size"])
    return save_whisper_folder(out_dir, fields, gen, tokenizer, state_dict_from_ct2(model))


def cut_assistant(main_dir: str | Path, out_dir: str | Path, decoder_layers: int) -> Path:
    """Cut a ``WhisperForCausalLM`` draft model from a Whisper folder: the first ``decoder_layers`` layers.

    Greedy speculative decoding with any draft model yields exactly the main model's greedy output; a cut draft
    shares the main encoder (as distil-Whisper does), so it is a valid, if weak, assistant.
    """
    import torch
    from transformers import WhisperConfig, WhisperForCausalLM, WhisperForConditionalGeneration

    main = WhisperForConditionalGeneration.from_pretrained(main_dir, dtype=torch.float16)
    if not 1 <= decoder_layers <= main.config.decoder_layers:
        raise ValueError(f"decoder_layers must be in 1..{main.config.decoder_layers}, got {decoder_layers}")
    cfg = WhisperConfig(**{**main.config.to_dict(), "decoder_layers": decoder_layers})
    cfg.architectures = ["WhisperForCausalLM"]
    cfg.is_encoder_decoder = False
    draft = WhisperForCausalLM(cfg).to(torch.float16)
    src = main.model.decoder.state_dict()
    keep = {k: v for k, v in src.items() if not k.startswith("layers.") or int(k.split(".")[1]) < decoder_layers}
    draft.model.decoder.load_state_dict(keep, strict=True)
    draft.tie_weights()
    draft.generation_config = main.generation_config
    out = Path(out_dir)
    draft.save_pretrained(out)
    return out
