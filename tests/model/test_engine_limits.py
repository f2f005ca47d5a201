"""The engine never hangs and never wedges: the pool must hold one max_model_len request (vLLM's
start-up check), max_model_len is derived from the pool when not given, a prompt that can never
fit is refused at add_request, bad token ids are refused, a failing step aborts its requests,
and a step that schedules nothing while requests wait is an error. Tiny random-weight models
keep these fast; the issue's SmolLM2 commands are in tests/cli/test_cli_errors.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvlab.model import Model
from kvlab.model.engine import LLM, SamplingParams
from kvlab.model.engine_checks import blocks_for_max_model_len, fit_max_model_len
from kvlab.model.reference import random_weights, tiny_config

VOCAB = 64


@pytest.fixture(scope="module")
def tiny() -> Model:
    torch.set_num_threads(1)
    config = tiny_config(num_layers=1, vocab_size=VOCAB, max_position_embeddings=512)
    return Model(config, random_weights(config, seed=2), tokenizer=None, attention_backend="torch")


@pytest.fixture(scope="module")
def tiny_hybrid() -> Model:
    """Full attention + a sliding window of 6 tokens: two KV-cache groups."""
    config = tiny_config(num_layers=2, sliding_window=(6, None), vocab_size=VOCAB)
    return Model(config, random_weights(config, seed=4), tokenizer=None, attention_backend="torch")


def _free_blocks(llm: LLM) -> int:
    return llm.kv_cache_manager.block_pool.get_num_free_blocks()


def _assert_idle(llm: LLM) -> None:
    """Nothing queued, every block but the null block free, every block-table row free."""
    assert llm.scheduler.get_request_counts() == (0, 0)
    assert llm.scheduler.requests == {}
    assert _free_blocks(llm) == llm.kv_cache_config.num_blocks - 1
    assert llm._live == {}
    assert sorted(llm._free_rows) == list(range(llm.scheduler.max_num_running_reqs))


# ------------------------------------------------------------------------------ start-up
def test_max_model_len_is_derived_from_the_pool(tiny: Model) -> None:
    # 7 usable blocks of 4 tokens: one request holds at most 28 tokens.
    assert LLM(tiny, num_gpu_blocks=8, block_size=4).max_model_len == 28
    assert LLM(tiny, num_gpu_blocks=16, block_size=16).max_model_len == 240
    # 63 usable blocks of 16 tokens would hold 1008: capped by the model's context (512 tokens)
    assert LLM(tiny, num_gpu_blocks=64, block_size=16).max_model_len == 512
    assert LLM(tiny, num_gpu_blocks=2, block_size=16).max_model_len == 16


def test_a_max_model_len_the_pool_cannot_hold_is_refused_in_vllm_terms(tiny: Model) -> None:
    with pytest.raises(ValueError) as err:
        LLM(tiny, num_gpu_blocks=8, block_size=4, max_model_len=100)
    msg = str(err.value)
    assert "needs 25 blocks for max_model_len 100, the pool has 7" in msg
    assert "lower max_model_len to <= 28 or raise num_gpu_blocks to >= 26" in msg
    assert LLM(tiny, num_gpu_blocks=8, block_size=4, max_model_len=28).max_model_len == 28


def test_sizing_helpers_count_blocks_like_vllm(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    specs = [g.kv_cache_spec for g in llm.kv_cache_config.kv_cache_groups]
    assert [blocks_for_max_model_len(specs, n, 512) for n in (1, 4, 5, 28, 29)] == [1, 1, 2, 7, 8]
    assert fit_max_model_len(specs, 7, 4096, 512) == 28
    assert fit_max_model_len(specs, 0, 4096, 512) == 0


def test_sliding_window_pool_check_counts_the_window() -> None:
    """A sliding-window group holds at most cdiv(window - 1 + batch, block_size) + 1 blocks."""
    config = tiny_config(num_layers=2, sliding_window=(8, None), vocab_size=VOCAB)
    model = Model(config, random_weights(config), tokenizer=None, attention_backend="torch")
    llm = LLM(model, num_gpu_blocks=20, block_size=4, max_num_batched_tokens=8)
    specs = [g.kv_cache_spec for g in llm.kv_cache_config.kv_cache_groups]
    # full group: cdiv(M, 4); window group: cdiv(min(8 - 1 + 8, M), 4) + 1 = 5 blocks at most
    assert blocks_for_max_model_len(specs, 56, 8) == 14 + 5
    assert llm.max_model_len == 56
    (out,) = llm.generate([[3] * 50], SamplingParams(max_tokens=20, ignore_eos=True))
    assert len(out.output_token_ids) == 6 and out.finish_reason == "length"
    _assert_idle(llm)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"max_model_len": 0}, "max_model_len must be an int >= 1, got 0"),
    ({"max_model_len": -3}, "max_model_len must be an int >= 1"),
    ({"max_model_len": 10.5}, "max_model_len must be an int >= 1, got 10.5"),
    ({"max_model_len": 4096}, "exceeds the model's context length .* allowed 1..512"),
    ({"attention_backend": "cuda-magic"}, "attention_backend must be one of auto, triton, torch"),
    ({"num_gpu_blocks": 1}, "num_gpu_blocks .* must be an int >= 2, got 1"),
    ({"num_gpu_blocks": "8"}, "num_gpu_blocks .* must be an int >= 2, got '8'"),
    ({"block_size": 0}, "block_size must be an int >= 1, got 0"),
    ({"block_size": True}, "block_size must be an int >= 1, got True"),
    ({"max_num_seqs": 0}, "max_num_seqs must be an int >= 1"),
    ({"max_num_batched_tokens": -1}, "max_num_batched_tokens must be an int >= 1"),
])
def test_bad_engine_settings_are_refused(tiny: Model, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LLM(tiny, **kwargs)


def test_bad_backend_is_refused_before_loading_a_model() -> None:
    # model=None would load SmolLM2 (seconds); the check comes first, so this is instant.
    with pytest.raises(ValueError, match="attention_backend must be one of"):
        LLM(None, attention_backend="cuda-magic")


# ------------------------------------------------------------------------------ admission
@pytest.mark.parametrize(("prompt", "error", "match"), [
    ([1, 2, -1], ValueError, "token id 2 is -1, outside the vocabulary: allowed 0..63"),
    ([1, VOCAB], ValueError, "token id 1 is 64, outside the vocabulary: allowed 0..63"),
    ([1, 2.0], TypeError, r"token id 1 must be an int in 0..63, got 2.0 \(float\)"),
    ([1, "2"], TypeError, r"token id 1 must be an int in 0..63, got '2' \(str\)"),
    ([None], TypeError, r"token id 0 must be an int in 0..63, got None"),
    ([True, 2], TypeError, "token id 0 must be an int"),
    (None, TypeError, "a prompt must be a str or a sequence of int token ids, got NoneType"),
    (5, TypeError, "a prompt must be a str or a sequence of int token ids, got int"),
    ("text", TypeError, "no tokenizer: give the prompt as token ids"),
    ([], ValueError, "the prompt is empty"),
    ([3] * 29, ValueError, r"29 tokens; with at least 1 output token that is more than "
                           r"max_model_len 28 \(allowed 1..27 prompt tokens, as in vLLM"),
    ([3] * 28, ValueError, r"28 tokens; with at least 1 output token .* \(allowed 1..27"),
])
def test_bad_prompts_are_refused_and_change_nothing(tiny: Model, prompt, error, match) -> None:
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    events = len(llm.recorder)
    with pytest.raises(error, match=match):
        llm.add_request(prompt)
    with pytest.raises(error, match=match):
        llm.generate([[5, 6], prompt])          # the good prompt queued before it is aborted
    _assert_idle(llm)
    assert llm._next_id == 1                     # only the aborted good prompt took an id
    assert len(llm.recorder) >= events
    (out,) = llm.generate([[5, 6]], SamplingParams(max_tokens=2, ignore_eos=True))
    assert len(out.output_token_ids) == 2


def test_bad_prompt_lists_are_refused(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    with pytest.raises(TypeError, match="prompts must be a str or a list of prompts .* got NoneType"):
        llm.generate(None)
    with pytest.raises(TypeError, match=r"got int \(one token-id prompt goes in a list of its own"):
        llm.generate([1, 2, 3])
    with pytest.raises(ValueError, match="got 2 SamplingParams for 1 prompts"):
        llm.generate([[1]], [SamplingParams(), SamplingParams()])
    _assert_idle(llm)
    assert llm.generate([]) == []


def test_numpy_token_ids_and_the_longest_prompt_are_accepted(tiny: Model) -> None:
    """The longest prompt is max_model_len - 1 tokens (vLLM's input processor: one output token
    must fit), and it stops after that one token (check_stop: num_tokens >= max_model_len)."""
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    (a, b) = llm.generate([np.array([4, 5, 6]), [7] * 27],
                          SamplingParams(max_tokens=3, ignore_eos=True))
    assert a.prompt_token_ids == [4, 5, 6] and len(a.output_token_ids) == 3
    assert len(b.output_token_ids) == 1 and b.finish_reason == "length"
    _assert_idle(llm)


def test_a_chunked_prompt_just_under_max_model_len_finishes(tiny: Model) -> None:
    """A prompt of max_model_len tokens used to be admitted and, prefilled in chunks, stall at
    max_model_len - 1 computed tokens forever (the running cap); now the longest admitted
    prompt (max_model_len - 1) prefills in chunks and gets its one token."""
    llm = LLM(tiny, num_gpu_blocks=7, block_size=8, max_num_batched_tokens=6, max_num_seqs=1)
    assert llm.max_model_len == 48
    with pytest.raises(ValueError, match=r"48 tokens; with at least 1 output token"):
        llm.generate([[3] * 48], SamplingParams(max_tokens=4, ignore_eos=True))
    steps = []
    (out,) = llm.generate([[3] * 47], SamplingParams(max_tokens=4, ignore_eos=True),
                          callback=lambda _llm, _f: steps.append(1))
    assert len(out.output_token_ids) == 1 and len(steps) == 8    # cdiv(47, 6) prefill steps
    _assert_idle(llm)


def test_bad_params_and_request_ids_are_refused(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    with pytest.raises(TypeError, match="params must be a SamplingParams, got dict"):
        llm.add_request([1, 2], {"max_tokens": 3})
    with pytest.raises(TypeError, match="request_id must be a str, got int"):
        llm.add_request([1, 2], request_id=7)
    with pytest.raises(ValueError, match="max_tokens must be an int >= 1, got 0"):
        SamplingParams(max_tokens=0)
    _assert_idle(llm)


# ------------------------------------------------------------------------------ never wedged
def test_a_failing_step_aborts_its_requests_and_frees_their_blocks(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=16, block_size=4)
    calls = {"n": 0}
    real_forward = tiny.forward

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 2:
            raise IndexError("index out of range in self")
        return real_forward(*args, **kwargs)

    llm.model.forward = flaky
    try:
        with pytest.raises(RuntimeError, match=r"step 1 failed \(IndexError: index out of range "
                                               r"in self\); its requests \['req-0', 'req-1'\] "
                                               "were aborted"):
            llm.generate([[3] * 9, [4] * 6], SamplingParams(max_tokens=4, ignore_eos=True))
        _assert_idle(llm)
        (out,) = llm.generate([[3] * 9], SamplingParams(max_tokens=4, ignore_eos=True))
    finally:
        del llm.model.forward
    assert len(out.output_token_ids) == 4 and out.num_cached_tokens == 8   # cache survived


def test_ctrl_c_mid_step_leaves_the_engine_usable(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=16, block_size=4)

    def interrupted(*_args, **_kwargs):
        raise KeyboardInterrupt

    llm.model.forward = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            llm.generate([[3] * 9, [4] * 6], SamplingParams(max_tokens=4, ignore_eos=True))
    finally:
        del llm.model.forward
    _assert_idle(llm)
    (out,) = llm.generate([[3] * 9], SamplingParams(max_tokens=4, ignore_eos=True))
    assert len(out.output_token_ids) == 4


def test_a_step_that_schedules_nothing_while_requests_wait_is_an_error(tiny: Model) -> None:
    """The start-up and admission checks make this unreachable; the guard still stands: a prompt
    slipped past them (max_model_len forced up) must end in an error, not a spin."""
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    llm.max_model_len = llm.scheduler.max_model_len = 64
    llm.kv_cache_manager.max_model_len = 64
    with pytest.raises(RuntimeError, match=r"scheduled nothing while 1 request\(s\) wait and none "
                                           r"runs: 'req-0' \(40 tokens, 10 blocks of 4\) cannot "
                                           r"be admitted with 7 free blocks"):
        llm.generate([[3] * 40], SamplingParams(max_tokens=2))
    _assert_idle(llm)


def test_abort_frees_a_running_request(tiny: Model) -> None:
    llm = LLM(tiny, num_gpu_blocks=8, block_size=4)
    llm.add_request([3] * 9, SamplingParams(max_tokens=5, ignore_eos=True), request_id="x")
    llm.step()
    assert _free_blocks(llm) < 7
    assert llm.abort("x") == ["x"] and llm.abort(["x", "ghost"]) == []
    _assert_idle(llm)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(num_gpu_blocks=st.integers(2, 12), block_size=st.sampled_from([1, 2, 4, 8]),
       lengths=st.lists(st.integers(1, 60), min_size=1, max_size=4),
       max_tokens=st.integers(1, 24), batch=st.integers(1, 40), seqs=st.integers(1, 3),
       caching=st.booleans(), hybrid=st.booleans())
def test_generate_always_terminates(tiny: Model, tiny_hybrid: Model, num_gpu_blocks: int,
                                    block_size: int, lengths: list[int], max_tokens: int,
                                    batch: int, seqs: int, caching: bool, hybrid: bool) -> None:
    """Any small pool, any prompt lengths, full attention or full + sliding window: generate
    finishes every prompt that fits (within a bounded number of steps) or refuses the batch at
    once; the engine is idle afterwards."""
    model = tiny_hybrid if hybrid else tiny
    try:
        llm = LLM(model, num_gpu_blocks=num_gpu_blocks, block_size=block_size,
                  max_num_batched_tokens=batch, max_num_seqs=seqs, enable_prefix_caching=caching,
                  record=False)
    except ValueError as exc:
        # only a sliding window's minimum (its window in blocks) can exceed a pool of >= 2
        assert hybrid and "needs" in str(exc) and "for max_model_len 1, the pool has" in str(exc)
        return
    prompts = [[3 + (i % 5)] * n for i, n in enumerate(lengths)]
    limit = 50 * (sum(lengths) + len(lengths) * max_tokens) + 100
    steps = {"n": 0}

    def bounded(_llm, _finished) -> None:
        steps["n"] += 1
        assert steps["n"] < limit, "generate is spinning"

    params = SamplingParams(max_tokens=max_tokens, ignore_eos=True)
    if max(lengths) >= llm.max_model_len:
        with pytest.raises(ValueError, match="more than max_model_len"):
            llm.generate(prompts, params, callback=bounded)
    else:
        outs = llm.generate(prompts, params, callback=bounded)
        for n, out in zip(lengths, outs):
            # vLLM's check_stop: stop once num_tokens >= max_model_len or max_tokens are out
            assert len(out.output_token_ids) == min(max_tokens, llm.max_model_len - n)
            assert out.finish_reason == "length"
    _assert_idle(llm)
