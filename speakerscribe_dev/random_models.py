"""Tiny random-weight models for plumbing tests: they load through the same ``from_pretrained`` paths as real
ones, in seconds, with nothing downloaded. They say nothing about accuracy.

* Whisper: a real Whisper architecture (2+2 layers, d_model 64) with a small byte-level BPE tokenizer trained here
  on a fixed corpus, Whisper's special tokens in Whisper's order, and the 1501 timestamp tokens.
* A draft model cut from it (first decoder layer), as for real weights.
* A pyannote pipeline: a small PyanNet segmentation model and a random CAM++ embedding.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from speakerscribe.models.pyannote_folder import write_pipeline_folder
from speakerscribe.models.whisper_convert import cut_assistant, save_whisper_folder

from .hub_pipelines import CONFIG_3_1, CONFIG_COMMUNITY_1

_CORPUS = """
the quick brown fox jumps over the lazy dog while the speaker talks about the weather today
good morning everyone thanks for joining the call we will review the budget and the plan
hello there how are you doing i am fine thank you and you yes we are all well here
one two three four five six seven eight nine ten eleven twelve percent of the revenue
speech recognition turns audio into text and diarization tells who spoke when in a meeting
""".split("\n")

RANDOM_LANGUAGES = ("en", "de", "fr", "es")


def small_tokenizer_json(languages: tuple[str, ...] = RANDOM_LANGUAGES, vocab_size: int = 400) -> dict[str, Any]:
    """A byte-level BPE tokenizer in Whisper's layout: text ids first, then <|endoftext|> and the specials."""
    import json

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator([line for line in _CORPUS if line.strip()] * 4, trainer)
    data = json.loads(tok.to_str())
    n_text = len(data["model"]["vocab"])
    specials = [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *[f"<|{lang}|>" for lang in languages],
        "<|translate|>",
        "<|transcribe|>",
        "<|startoflm|>",
        "<|startofprev|>",
        "<|nospeech|>",
        "<|notimestamps|>",
    ]
    data["added_tokens"] = [
        {
            "id": n_text + i,
            "content": content,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for i, content in enumerate(specials)
    ]
    return data


def write_random_whisper(
    out_dir: str | Path, multilingual: bool = False, seed: int = 0, d_model: int = 64, layers: int = 2, heads: int = 2
) -> Path:
    from speakerscribe.models.whisper_convert import N_TIMESTAMP_TOKENS, generation_config_dict

    languages = RANDOM_LANGUAGES if multilingual else ("en",)
    tokenizer = small_tokenizer_json(languages)
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    vocab_size = max(ids.values()) + 1 + N_TIMESTAMP_TOKENS
    fields = {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "num_mel_bins": 80,
        "encoder_layers": layers,
        "decoder_layers": layers,
        "encoder_attention_heads": heads,
        "decoder_attention_heads": heads,
        "encoder_ffn_dim": 4 * d_model,
        "decoder_ffn_dim": 4 * d_model,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    space = tokenizer["model"]["vocab"].get("Ġ")
    pseudo_ct2 = {
        "suppress_ids": [],
        "suppress_ids_begin": [i for i in (space, ids["<|endoftext|>"]) if i is not None],
        "alignment_heads": [[layers - 1, h] for h in range(heads)],
        "lang_ids": [ids[f"<|{lang}|>"] for lang in languages],
    }
    gen = generation_config_dict(pseudo_ct2, tokenizer, vocab_size, multilingual=multilingual)
    return save_whisper_folder(out_dir, fields, gen, tokenizer, state_dict=None, seed=seed)


def write_random_draft(main_dir: str | Path, out_dir: str | Path) -> Path:
    return cut_assistant(main_dir, out_dir, decoder_layers=1)


def write_random_pipeline(out_dir: str | Path, seed: int = 0, embedding: str = "campplus") -> Path:
    """A pyannote SpeakerDiarization folder with a small random PyanNet and a random CAM++ embedding
    (``embedding="wespeaker"``: pyannote's own WeSpeaker ResNet34, for the paths that other embeddings take)."""
    import io

    import pyannote.audio
    import torch
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.segmentation import PyanNet

    from speakerscribe.diarization.campplus import CAMPPlusEmbedding
    from speakerscribe.models.pyannote_folder import lightning_checkpoint

    torch.manual_seed(seed)
    seg = PyanNet(
        lstm={"hidden_size": 16, "num_layers": 1, "bidirectional": True, "monolithic": True},
        linear={"hidden_size": 16, "num_layers": 1},
    )
    seg.specifications = Specifications(
        problem=Problem.MONO_LABEL_CLASSIFICATION,
        resolution=Resolution.FRAME,
        duration=10.0,
        classes=["speaker#1", "speaker#2", "speaker#3"],
        powerset_max_classes=2,
        permutation_invariant=True,
    )
    seg.setup()
    buf = io.BytesIO()
    torch.save(lightning_checkpoint(seg, pyannote.audio.__version__), buf)
    if embedding == "wespeaker":
        from pyannote.audio.models.embedding import WeSpeakerResNet34

        model = WeSpeakerResNet34()
        model.specifications = Specifications(
            problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=10.0
        )
    else:
        model = CAMPPlusEmbedding()
    return write_pipeline_folder(
        out_dir,
        buf.getvalue(),
        model,
        clustering_threshold=0.9,
        segmentation_step=0.5,
        embedding_batch_size=8,
        segmentation_batch_size=8,
    )


# pyannote/speaker-diarization-community-1's config.yaml as published (VBx clustering with a PLDA, WeSpeaker
# ResNet34 embeddings): one copy, in hub_pipelines
COMMUNITY1_CONFIG = CONFIG_COMMUNITY_1


def random_resnet34_checkpoint(seed: int = 0) -> bytes:
    """``pytorch_model.bin`` bytes of pyannote's WeSpeaker ResNet34 at its real size (6.6 M parameters, 256-d),
    random weights, as pyannote/wespeaker-voxceleb-resnet34-LM and community-1's ``embedding/`` hold it."""
    import io

    import pyannote.audio
    import torch
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import WeSpeakerResNet34

    from speakerscribe.models.pyannote_folder import lightning_checkpoint

    torch.manual_seed(seed)
    model = WeSpeakerResNet34()
    model.specifications = Specifications(problem=Problem.REPRESENTATION, resolution=Resolution.CHUNK, duration=10.0)
    buf = io.BytesIO()
    torch.save(lightning_checkpoint(model, pyannote.audio.__version__), buf)
    return buf.getvalue()


def write_community1_pipeline(out_dir: str | Path, segmentation: str | Path, seed: int = 0) -> Path:
    """A folder laid out as pyannote/speaker-diarization-community-1 (``config.yaml``, ``segmentation/``,
    ``embedding/``, ``plda/``): its config, the segmentation checkpoint at ``segmentation`` (a
    ``pytorch_model.bin``; models/diarization has the real segmentation-3.0), a random ResNet34 and a neutral PLDA
    (identity transforms: VBx runs, its clusters say nothing)."""
    from speakerscribe.models.pyannote_folder import write_identity_plda

    out = Path(out_dir)
    for sub in ("segmentation", "embedding"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / "segmentation" / "pytorch_model.bin").write_bytes(Path(segmentation).read_bytes())
    (out / "embedding" / "pytorch_model.bin").write_bytes(random_resnet34_checkpoint(seed))
    write_identity_plda(out / "plda", 256)
    (out / "config.yaml").write_text(COMMUNITY1_CONFIG)
    return out


# pyannote/speaker-diarization-3.1's config.yaml as published (agglomerative clustering, no PLDA): one copy, in
# hub_pipelines
PIPELINE_31_CONFIG = CONFIG_3_1

# Hub repositories laid out by write_production_repos, by id
WHISPER_SHAPES = {
    "openai/whisper-large-v3": {"decoder_layers": 2, "seed": 3},
    "openai/whisper-large-v3-turbo": {"decoder_layers": 1, "seed": 4},
    "distil-whisper/distil-large-v3": {"decoder_layers": 1, "seed": 5},
}


def large_v3_tokenizer_json(base_tokenizer: str | Path) -> dict[str, Any]:
    """Whisper large-v3's tokenizer from the multilingual base tokenizer (``tokenizer.json`` of whisper-base):
    the same 50,257 text tokens, ``<|yue|>`` inserted after ``<|su|>`` (so ``<|translate|>`` and every later
    special id move up by one), ``<|nocaptions|>`` renamed ``<|nospeech|>`` as large-v3 names it, the timestamps
    dropped (:func:`speakerscribe.models.whisper_convert.tokenizer_with_timestamps` adds them after the specials,
    from 50365, to 51865)."""
    import json
    import re

    data = json.loads(Path(base_tokenizer).read_text())
    specials = []
    for token in sorted(data["added_tokens"], key=lambda t: t["id"]):
        if re.fullmatch(r"<\|\d+\.\d\d\|>", token["content"]):
            continue
        if token["content"] == "<|nocaptions|>":
            token = {**token, "content": "<|nospeech|>"}
        specials.append(token)
        if token["content"] == "<|su|>":
            specials.append({**token, "content": "<|yue|>"})
    first = specials[0]["id"]
    data["added_tokens"] = [{**t, "id": first + i} for i, t in enumerate(specials)]
    ids = {t["content"]: t["id"] for t in data["added_tokens"]}
    for entry in (data.get("post_processor") or {}).get("special_tokens", {}).values():
        entry["ids"] = [ids[t] for t in entry["tokens"]]
    return data


def large_v3_generation_fields(tokenizer: dict[str, Any], base_generation: dict[str, Any], layers: int, heads: int):
    """large-v3's generation config from its tokenizer: the special ids, the 100 languages, base's suppression
    list moved with the ids (every id from 50358 up by one), alignment heads inside the reduced decoder."""
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    shift = ids["<|translate|>"] - base_generation["task_to_id"]["translate"]
    moved = base_generation["task_to_id"]["translate"]
    languages = {k: v for k, v in ids.items() if ids["<|startoftranscript|>"] < v < ids["<|translate|>"]}
    return {
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "no_timestamps_token_id": ids["<|notimestamps|>"],
        "prev_sot_token_id": ids["<|startofprev|>"],
        "is_multilingual": True,
        "suppress_tokens": [t + shift if t >= moved else t for t in base_generation["suppress_tokens"]],
        "begin_suppress_tokens": base_generation["begin_suppress_tokens"],
        "alignment_heads": [[layers - 1, h] for h in range(heads)],
        "max_initial_timestamp_index": 50,
        "max_length": 448,
        "return_timestamps": False,
        "lang_to_id": languages,
        "task_to_id": {"transcribe": ids["<|transcribe|>"], "translate": ids["<|translate|>"]},
    }


def write_large_v3_shaped(
    out_dir: str | Path, base: str | Path, decoder_layers: int = 2, seed: int = 0, d_model: int = 64, heads: int = 2
) -> Path:
    """A Whisper folder in large-v3's layout and vocabulary (128 mel bins, 51,866 ids, large-v3's tokenizer and
    generation config) with a reduced, random network (``d_model``, 2 encoder layers, ``decoder_layers``).
    ``base`` is a multilingual Whisper folder (models/whisper-base) whose tokenizer it starts from."""
    import json

    from speakerscribe.models.whisper_convert import N_TIMESTAMP_TOKENS, save_whisper_folder

    base = Path(base)
    tokenizer = large_v3_tokenizer_json(base / "tokenizer.json")
    ids = {t["content"]: t["id"] for t in tokenizer["added_tokens"]}
    vocab_size = max(ids.values()) + 1 + N_TIMESTAMP_TOKENS
    fields = {
        "vocab_size": vocab_size,
        "d_model": d_model,
        "num_mel_bins": 128,
        "encoder_layers": 2,
        "decoder_layers": decoder_layers,
        "encoder_attention_heads": heads,
        "decoder_attention_heads": heads,
        "encoder_ffn_dim": 4 * d_model,
        "decoder_ffn_dim": 4 * d_model,
        "max_source_positions": 1500,
        "max_target_positions": 448,
        "decoder_start_token_id": ids["<|startoftranscript|>"],
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|endoftext|>"],
        "pad_token_id": ids["<|endoftext|>"],
    }
    base_generation = json.loads((base / "generation_config.json").read_text())
    gen = large_v3_generation_fields(tokenizer, base_generation, decoder_layers, heads)
    return save_whisper_folder(out_dir, fields, gen, tokenizer, state_dict=None, seed=seed)


def write_pipeline_31_repos(root: str | Path, segmentation: str | Path, seed: int = 0) -> dict[str, Path]:
    """The three repositories pyannote/speaker-diarization-3.1 loads, as folders under ``root`` by id: its
    ``config.yaml``; pyannote/segmentation-3.0 (the checkpoint at ``segmentation``); and
    pyannote/wespeaker-voxceleb-resnet34-LM (a random ResNet34)."""
    root = Path(root)
    repos = {
        "pyannote/speaker-diarization-3.1": root / "speaker-diarization-3.1",
        "pyannote/segmentation-3.0": root / "segmentation-3.0",
        "pyannote/wespeaker-voxceleb-resnet34-LM": root / "wespeaker-voxceleb-resnet34-LM",
    }
    for folder in repos.values():
        folder.mkdir(parents=True, exist_ok=True)
    (repos["pyannote/speaker-diarization-3.1"] / "config.yaml").write_text(PIPELINE_31_CONFIG)
    (repos["pyannote/segmentation-3.0"] / "pytorch_model.bin").write_bytes(Path(segmentation).read_bytes())
    (repos["pyannote/wespeaker-voxceleb-resnet34-LM"] / "pytorch_model.bin").write_bytes(
        random_resnet34_checkpoint(seed)
    )
    return repos


def put_in_hub_cache(cache: str | Path, repo_id: str, folder: str | Path, revision: str = "0" * 40) -> Path:
    """Copy ``folder`` into a Hugging Face cache as ``repo_id`` at ``revision`` (``models--org--name/snapshots/
    <revision>/`` and ``refs/main``), where ``from_pretrained(repo_id)`` finds it with ``HF_HUB_OFFLINE=1``."""
    import shutil

    repo = Path(cache) / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / revision
    shutil.copytree(folder, snapshot, dirs_exist_ok=True)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return snapshot


def write_production_cache(cache: str | Path, models: str | Path, work: str | Path) -> Path:
    """A Hugging Face cache holding, from random weights in their published layouts, the repositories a
    deployment names: openai/whisper-large-v3, -large-v3-turbo, distil-whisper/distil-large-v3 and
    pyannote/speaker-diarization-community-1. ``models`` is the offline folder (whisper-base's tokenizer, the real
    segmentation-3.0); ``work`` a scratch folder."""
    models, work = Path(models), Path(work)
    for i, (repo_id, shape) in enumerate(WHISPER_SHAPES.items()):
        folder = write_large_v3_shaped(work / f"whisper-{i}", models / "whisper-base", **shape)
        put_in_hub_cache(cache, repo_id, folder, revision=f"{i + 1:040x}")
    community = write_community1_pipeline(work / "community-1", models / "diarization/segmentation/pytorch_model.bin")
    put_in_hub_cache(cache, "pyannote/speaker-diarization-community-1", community, revision="c" * 40)
    return Path(cache)


def write_31_cache(cache: str | Path, models: str | Path, work: str | Path) -> Path:
    """A Hugging Face cache holding pyannote/speaker-diarization-3.1 and the two repositories its config names,
    and nothing else (a token for 3.1 reaches exactly these)."""
    segmentation = Path(models) / "diarization" / "segmentation" / "pytorch_model.bin"
    for j, (repo_id, folder) in enumerate(write_pipeline_31_repos(Path(work) / "pyannote-3.1", segmentation).items()):
        put_in_hub_cache(cache, repo_id, folder, revision=f"{j + 10:040x}")
    return Path(cache)
