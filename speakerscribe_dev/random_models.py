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

from speakerscribe.offline.pyannote_folder import write_pipeline_folder
from speakerscribe.offline.whisper_convert import cut_assistant, save_whisper_folder

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
    from speakerscribe.offline.whisper_convert import N_TIMESTAMP_TOKENS, generation_config_dict

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

    from speakerscribe.campplus import CAMPPlusEmbedding
    from speakerscribe.offline.pyannote_folder import lightning_checkpoint

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


# pyannote/speaker-diarization-community-1's config.yaml as published (pyannote.audio 4; the same values as
# SpeakerDiarization.default_parameters() for VBx): VBx clustering with a PLDA, WeSpeaker ResNet34 embeddings
COMMUNITY1_CONFIG = """version: 4.0.0
pipeline:
  name: pyannote.audio.pipelines.SpeakerDiarization
  params:
    clustering: VBxClustering
    segmentation: $model/segmentation
    segmentation_batch_size: 32
    embedding: $model/embedding
    embedding_batch_size: 32
    embedding_exclude_overlap: true
    plda: $model/plda
params:
  clustering:
    threshold: 0.6
    Fa: 0.07
    Fb: 0.8
  segmentation:
    min_duration_off: 0.0
"""


def random_resnet34_checkpoint(seed: int = 0) -> bytes:
    """``pytorch_model.bin`` bytes of pyannote's WeSpeaker ResNet34 at its real size (6.6 M parameters, 256-d),
    random weights, as pyannote/wespeaker-voxceleb-resnet34-LM and community-1's ``embedding/`` hold it."""
    import io

    import pyannote.audio
    import torch
    from pyannote.audio.core.task import Problem, Resolution, Specifications
    from pyannote.audio.models.embedding import WeSpeakerResNet34

    from speakerscribe.offline.pyannote_folder import lightning_checkpoint

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
    from speakerscribe.offline.pyannote_folder import write_identity_plda

    out = Path(out_dir)
    for sub in ("segmentation", "embedding"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / "segmentation" / "pytorch_model.bin").write_bytes(Path(segmentation).read_bytes())
    (out / "embedding" / "pytorch_model.bin").write_bytes(random_resnet34_checkpoint(seed))
    write_identity_plda(out / "plda", 256)
    (out / "config.yaml").write_text(COMMUNITY1_CONFIG)
    return out
