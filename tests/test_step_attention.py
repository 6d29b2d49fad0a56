"""speakerscribe.asr.attention: a decoding step's single query by plain products, everything else by SDPA, the
same numbers as PyTorch's attention with the mask transformers would have built; used only where it is right."""

from __future__ import annotations

import pytest
import torch
from conftest import make_handler

from speakerscribe.asr.attention import (
    NAME,
    NAME_SDPA,
    SharedRows,
    sharing,
    single_queries_by_sdpa,
    step_attention,
    step_attention_sdpa,
)


class Module:
    def __init__(self, is_causal: bool):
        self.is_causal = is_causal


def reference(query, key, value, causal: bool, mask=None):
    """Attention written out: the queries are the LAST positions of the keys (a cache holds the ones before)."""
    q_len, kv_len = query.shape[-2], key.shape[-2]
    scores = (query @ key.transpose(-1, -2)) * query.shape[-1] ** -0.5
    if causal:
        allowed = torch.ones(q_len, kv_len, dtype=torch.bool).tril(kv_len - q_len)
        scores = scores.masked_fill(~allowed, float("-inf"))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ value).transpose(1, 2)


@pytest.mark.parametrize(
    ("q_len", "kv_len", "causal"),
    [
        (1, 9, True),  # a greedy step against its cache
        (1, 1500, False),  # a step's cross-attention over the encoder frames
        (7, 7, True),  # the prompt, or the teacher-forced scoring pass
        (4, 11, True),  # speculative decoding's verification: 4 new queries after 7 cached keys
        (6, 1500, False),  # cross-attention of several queries
        (1500, 1500, False),  # the encoder
    ],
)
@pytest.mark.parametrize("function", [step_attention, step_attention_sdpa])
def test_same_numbers_as_attention_written_out(q_len, kv_len, causal, function):
    g = torch.Generator().manual_seed(q_len * 1000 + kv_len)
    query, key, value = (torch.randn(2, 3, n, 16, generator=g) for n in (q_len, kv_len, kv_len))
    out, weights = function(Module(causal), query, key, value, None, scaling=16**-0.5)
    assert weights is None and out.shape == (2, q_len, 3, 16)
    torch.testing.assert_close(out, reference(query, key, value, causal), atol=2e-5, rtol=1e-4)


@pytest.mark.parametrize("function", [step_attention, step_attention_sdpa])
@pytest.mark.parametrize("q_len", [1, 3])
def test_rows_sharing_keys_attend_to_their_own_window(function, q_len):
    """Six query rows over three windows' keys, 1, 3 and 2 rows a window (ragged, as rows leave the batch): each
    row's output is its own attention over its window's keys; without a sharing that fits, a clear error."""
    g = torch.Generator().manual_seed(q_len)
    rows = [0, 1, 1, 1, 2, 2]
    query = torch.randn(6, 3, q_len, 16, generator=g)
    key, value = (torch.randn(3, 3, 40, 16, generator=g) for _ in range(2))
    with sharing(SharedRows.of(torch.tensor(rows))):
        out, _ = function(Module(False), query, key, value, None, scaling=16**-0.5)
    index = torch.tensor(rows)
    expected = reference(query, key.index_select(0, index), value.index_select(0, index), False)
    torch.testing.assert_close(out, expected, atol=2e-5, rtol=1e-4)
    with pytest.raises(ValueError, match="6 query rows against 3 key rows"):
        function(Module(False), query, key, value, None, scaling=16**-0.5)
    with sharing(SharedRows.of(torch.tensor([0, 1, 1, 2]))), pytest.raises(ValueError, match="no sharing that fits"):
        function(Module(False), query, key, value, None, scaling=16**-0.5)
    with sharing(SharedRows.of(index)), pytest.raises(ValueError, match="cross-attention"):
        function(Module(True), query, key, value, None, scaling=16**-0.5)
    for bad in ([1, 1, 2], [0, 2, 2], [0, 1, 0]):  # must start at 0, use every key row, keep windows together
        with pytest.raises(ValueError):
            SharedRows.of(torch.tensor(bad))


def test_shared_rows_follow_rows_leaving_the_batch():
    groups = SharedRows.of(torch.tensor([0, 0, 1, 1, 1, 2]))
    assert groups.width == 3 and groups.windows == 3 and groups.first_rows().tolist() == [0, 2, 5]
    kept, used = groups.keep(torch.tensor([1, 5]))  # window 1's rows all left
    assert kept.rows.tolist() == [0, 1] and used.tolist() == [0, 2] and kept.width == 1


def test_single_queries_go_through_sdpa_only_in_bfloat16_on_amx():
    assert not single_queries_by_sdpa(torch.float32)
    assert single_queries_by_sdpa(torch.bfloat16) == bool(torch.cpu._is_amx_tile_supported())


def test_a_given_mask_is_applied_to_a_single_query_too():
    g = torch.Generator().manual_seed(5)
    query, key, value = (torch.randn(2, 3, n, 16, generator=g) for n in (1, 9, 9))
    mask = torch.ones(2, 1, 1, 9, dtype=torch.bool)
    mask[0, :, :, :4] = False  # the first row's first four keys are padding
    out, _ = step_attention(Module(True), query, key, value, mask, scaling=16**-0.5)
    torch.testing.assert_close(out, reference(query, key, value, False, mask), atol=2e-5, rtol=1e-4)
    unmasked, _ = step_attention(Module(True), query, key, value, None, scaling=16**-0.5)
    assert not torch.allclose(out[0], unmasked[0]) and torch.allclose(out[1], unmasked[1], atol=1e-6)


def test_used_on_the_cpu_with_the_dynamic_cache_only(random_models):
    plain = make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8")
    model = plain.transcriber.models.asr.model
    assert model.config._attn_implementation == (NAME_SDPA if single_queries_by_sdpa(model.dtype) else NAME)
    assert plain.transcriber.models.asr.shares_windows()
    single = make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8", TORCH_DTYPE="float32")
    assert single.transcriber.models.asr.model.config._attn_implementation == NAME
    static = make_handler(
        ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8", STATIC_CACHE="true", WARMUP_BATCH_SIZE="1"
    )
    assert static.transcriber.models.asr.model.config._attn_implementation == "sdpa"  # unfilled slots need a mask
    assert not static.transcriber.models.asr.shares_windows()
    eager = make_handler(ASR_MODEL=str(random_models.whisper_en), MAX_NEW_TOKENS="8", ATTN_IMPLEMENTATION="eager")
    assert eager.transcriber.models.asr.model.config._attn_implementation == "eager"  # the deployer's choice


@pytest.mark.slow
def test_real_tiny_en_writes_the_same_words_and_times_as_with_sdpa(real_models, speech_dir):
    """float32, so that only the attention differs: the festival meeting through the whole handler, the decoder
    switched back to transformers' SDPA for the second run."""
    from speakerscribe_dev.conversation import MEETING, synthesize

    conv = synthesize(MEETING, speech_dir, "meeting")
    handler = make_handler(ASR_MODEL=str(real_models / "whisper-tiny.en"), TORCH_DTYPE="float32")
    model = handler.transcriber.models.asr.model
    assert model.config._attn_implementation == NAME
    request = {"inputs": conv.wav.read_bytes(), "parameters": {"return_timestamps": "word"}}
    ours = handler(request)
    model.config._attn_implementation = "sdpa"
    try:
        sdpa = handler(request)
    finally:
        model.config._attn_implementation = NAME
    assert ours["text"] == sdpa["text"]
    words = [[w for c in out["chunks"] for w in c["words"]] for out in (ours, sdpa)]
    assert len(words[0]) == len(words[1]) >= 60
    for a, b in zip(*words):
        assert a["word"] == b["word"]
        assert abs(a["start"] - b["start"]) <= 0.021 and abs(a["end"] - b["end"]) <= 0.021, (a, b)  # a 20 ms frame
