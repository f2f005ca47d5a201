"""Request: token bookkeeping, block hashes kept in step with appended tokens, params semantics."""

from __future__ import annotations

import inspect

import pytest

from kvlab.core import kv_cache_utils as bh
from kvlab.core.kv_cache_utils import (
    get_request_block_hasher,
    hash_block_tokens,
    init_none_hash,
    sha256,
)
from kvlab.core.request import (
    ConstantList,
    LoRARequest,
    MultiModalFeatureSpec,
    PlaceholderRange,
    PoolingParams,
    Request,
    RequestStatus,
    SamplingParams,
)


@pytest.fixture(autouse=True)
def _none_hash():
    if not hasattr(bh, "NONE_HASH"):
        init_none_hash(sha256)


def test_constructor_keywords_match_vllm_request():
    names = list(inspect.signature(Request).parameters)
    assert names[:4] == ["request_id", "prompt_token_ids", "sampling_params", "pooling_params"]
    for kw in (
        "arrival_time",
        "prompt_embeds",
        "mm_features",
        "lora_request",
        "cache_salt",
        "priority",
        "block_hasher",
    ):
        assert kw in names


def test_tokens_and_block_hashes_stay_in_step():
    hasher = get_request_block_hasher(4, sha256)
    req = Request("r", [1, 2, 3, 4, 5, 6], SamplingParams(max_tokens=5), None, block_hasher=hasher)
    h0 = hash_block_tokens(sha256, None, [1, 2, 3, 4])
    assert req.block_hashes == [h0]
    assert (req.num_tokens, req.num_prompt_tokens, req.num_output_tokens, req.max_tokens) == (
        6,
        6,
        0,
        5,
    )
    req.append_output_token_ids(7)
    assert req.block_hashes == [h0]  # 7 tokens: still one full block
    req.append_output_token_ids([8, 9])
    assert req.block_hashes == [h0, hash_block_tokens(sha256, h0, [5, 6, 7, 8])]
    assert req.all_token_ids == [1, 2, 3, 4, 5, 6, 7, 8, 9] and req.output_token_ids == [7, 8, 9]
    assert req.all_token_ids[4:8] == [5, 6, 7, 8] and isinstance(req.all_token_ids[4:8], list)
    assert req.prompt_token_ids == [1, 2, 3, 4, 5, 6]  # the prompt list is not extended


def test_views_are_read_only():
    req = Request("r", [1, 2], SamplingParams(max_tokens=1), None)
    assert isinstance(req.all_token_ids, ConstantList)
    for mutate in (
        lambda: req.all_token_ids.append(3),
        lambda: req.output_token_ids.extend([1]),
        lambda: req.all_token_ids.__setitem__(0, 9),
        lambda: req.all_token_ids.pop(0),
    ):
        with pytest.raises(TypeError):
            mutate()
    assert req.all_token_ids == [1, 2] and req.block_hashes == []  # no hasher: no hashes


def test_skip_reading_prefix_cache_semantics():
    def req(sp=None, pp=None):
        return Request("r", [1], sp, pp)

    assert req(SamplingParams(max_tokens=1)).skip_reading_prefix_cache is False
    assert req(SamplingParams(max_tokens=1, prompt_logprobs=0)).skip_reading_prefix_cache is True
    assert (
        req(SamplingParams(max_tokens=1, prompt_logprobs=True)).sampling_params.prompt_logprobs == 1
    )
    assert (
        req(
            SamplingParams(max_tokens=1, prompt_logprobs=2, skip_reading_prefix_cache=False)
        ).skip_reading_prefix_cache
        is False
    )
    pooled = req(pp=PoolingParams(task="token_embed", skip_reading_prefix_cache=True))
    assert pooled.skip_reading_prefix_cache is True and pooled.max_tokens == 1
    assert req(pp=PoolingParams()).skip_reading_prefix_cache is False


def test_kv_transfer_params_and_bad_params():
    sp = SamplingParams(max_tokens=2, extra_args={"kv_transfer_params": {"remote": 1}})
    assert Request("r", [1], sp, None).kv_transfer_params == {"remote": 1}
    with pytest.raises(ValueError, match="can't both be unset"):
        Request("r", [1], None, None)
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="Neither prompt_token_ids nor prompt_embeds"):
        Request("r", None, SamplingParams(), None)
    with pytest.raises(ValueError, match="different lengths"):
        Request("r", [1, 2], SamplingParams(), None, prompt_embeds=[[0.0]])


def test_lora_mm_salt_and_status():
    lora = LoRARequest("ad", 4)
    assert (lora.name, lora.adapter_id) == ("ad", 4)
    with pytest.raises(ValueError, match="id must be > 0"):
        LoRARequest("ad", 0)
    mm = [MultiModalFeatureSpec(identifier="img", mm_position=PlaceholderRange(offset=1, length=3))]
    req = Request(
        "r",
        [1] * 8,
        SamplingParams(max_tokens=1),
        None,
        mm_features=mm,
        lora_request=lora,
        cache_salt="s",
        block_hasher=get_request_block_hasher(4, sha256),
    )
    h0 = hash_block_tokens(sha256, None, [1] * 4, ("ad", ("img", 1), "s"))
    assert req.block_hashes[0] == h0
    assert req.block_hashes[1] == hash_block_tokens(sha256, h0, [1] * 4, ("ad",))
    assert req.has_encoder_inputs and req.get_num_encoder_embeds(0) == 3
    with pytest.raises(IndexError):
        req.get_num_encoder_embeds(1)
    assert req.status is RequestStatus.WAITING and not req.is_finished()
    req.status = RequestStatus.FINISHED_ABORTED
    assert req.is_finished() and str(req.status) == "FINISHED_ABORTED"


def test_priority_order():
    a = Request("a", [1], SamplingParams(), None, priority=1, arrival_time=5.0)
    b = Request("b", [1], SamplingParams(), None, priority=0, arrival_time=9.0)
    c = Request("c", [1], SamplingParams(), None, priority=0, arrival_time=1.0)
    d = Request("d", [1], SamplingParams(), None, priority=0, arrival_time=1.0)
    assert [r.request_id for r in sorted([a, b, d, c])] == ["c", "d", "b", "a"]
