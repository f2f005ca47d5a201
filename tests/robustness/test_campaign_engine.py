"""Bad-input campaign, the model engine (kvlab.model.LLM): refused before anything changes.

Every row gives one bad input to a busy engine (a finished request left cached free blocks, a
running one holds blocks and a block-table row) and asserts: the error type, that the message
names what is allowed, and that the engine snapshot is exactly as before: the KV-cache
snapshot of the campaign (free-queue order and links, ref_cnt and block_hash of every block,
cached map, req_to_blocks, recorder replay == live), the scheduler's queues, the engine's live
requests, block-table rows, free rows and request counter. A tiny random-weight model (vocab 64)
keeps it fast; the rules are the same for SmolLM2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
from _robust_helpers import snapshot

from kvlab.model import Model
from kvlab.model.engine import LLM, SamplingParams
from kvlab.model.reference import random_weights, tiny_config

VOCAB = 64
GREEDY = SamplingParams(max_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def tiny() -> Model:
    torch.set_num_threads(1)
    config = tiny_config(num_layers=1, vocab_size=VOCAB, max_position_embeddings=512)
    return Model(config, random_weights(config, seed=2), tokenizer=None, attention_backend="torch")


def busy_engine(model: Model) -> LLM:
    """16 blocks of 4 tokens (max_model_len 60): "done" finished (its 2 full blocks cached and
    free), "live" runs (its first 2 blocks are hits on them) after one step."""
    llm = LLM(model, num_gpu_blocks=16, block_size=4, max_num_seqs=2)
    llm.generate([[3] * 9], SamplingParams(max_tokens=2, ignore_eos=True))
    llm.add_request([3] * 8 + [5] * 5, GREEDY, request_id="live")
    llm.step()
    assert llm.scheduler.get_request_counts() == (1, 0) and llm._live["live"].row is not None
    return llm


def engine_snapshot(llm: LLM) -> dict[str, Any]:
    """Everything a bad input could change in an engine (see the module docstring)."""
    sched = llm.scheduler
    rows = [(bt.get_numpy_array().copy().tolist(), bt.num_blocks_per_row.tolist())
            for bt in llm.block_table.block_tables]  # fmt: skip
    return {
        "kv": snapshot(llm.kv_cache_manager, llm.recorder),
        "waiting": [r.request_id for r in sched.waiting],
        "running": [r.request_id for r in sched.running],
        "requests": {rid: (r.status, r.num_computed_tokens, list(r.all_token_ids))
                     for rid, r in sched.requests.items()},  # fmt: skip
        "live": {rid: live.row for rid, live in llm._live.items()},
        "free_rows": list(llm._free_rows),
        "next_id": llm._next_id,
        "block_table": rows,
        "outputs": (len(llm.finished), len(llm.step_stats), len(llm.kv_events)),
    }


Row = tuple[str, Callable[[LLM, Model], Any], type[BaseException], str]
P = SamplingParams(max_tokens=2)

# (id, bad call, error type, regex the message must match: it names what is allowed)
ROWS: list[Row] = [
    # ---- token ids (add_request: refused before the request exists)
    ("add_request/negative id", lambda e, m: e.add_request([1, 2, -1], P), ValueError,
     r"prompt token id 2 is -1, outside the vocabulary: allowed 0..63"),
    ("add_request/id = vocab size", lambda e, m: e.add_request([1, VOCAB], P), ValueError,
     r"prompt token id 1 is 64, outside the vocabulary: allowed 0..63"),
    ("add_request/id 2**63", lambda e, m: e.add_request([2**63], P), ValueError,
     r"outside the vocabulary: allowed 0..63"),
    ("add_request/float id", lambda e, m: e.add_request([1, 2.0], P), TypeError,
     r"prompt token id 1 must be an int in 0..63, got 2.0 \(float\)"),
    ("add_request/str id", lambda e, m: e.add_request([1, "2"], P), TypeError,
     r"prompt token id 1 must be an int in 0..63, got '2' \(str\)"),
    ("add_request/None id", lambda e, m: e.add_request([None], P), TypeError,
     r"prompt token id 0 must be an int in 0..63, got None \(NoneType\)"),
    ("add_request/bool id", lambda e, m: e.add_request([True, 2], P), TypeError,
     r"prompt token id 0 must be an int in 0..63, got True \(bool\)"),
    ("add_request/numpy float ids", lambda e, m: e.add_request(np.array([1.0, 2.0]), P),
     TypeError, r"prompt token id 0 must be an int in 0..63, got .*float64"),
    # ---- prompts
    ("add_request/bare str prompt ids", lambda e, m: e.add_request("123", P), TypeError,
     r"this model has no tokenizer: give the prompt as token ids"),
    ("add_request/None prompt", lambda e, m: e.add_request(None, P), TypeError,
     r"a prompt must be a str or a sequence of int token ids, got NoneType"),
    ("add_request/int prompt", lambda e, m: e.add_request(5, P), TypeError,
     r"got int \(one token-id prompt goes in a list of its own"),
    ("add_request/bytes prompt", lambda e, m: e.add_request(b"\x01\x02", P), TypeError,
     r"a prompt must be a str or a sequence of int token ids, got bytes"),
    ("add_request/dict prompt", lambda e, m: e.add_request({0: 1}, P), TypeError,
     r"a prompt must be a str or a sequence of int token ids, got dict"),
    ("add_request/empty prompt", lambda e, m: e.add_request([], P), ValueError,
     r"the prompt is empty: give at least one token"),
    ("add_request/prompt of max_model_len", lambda e, m: e.add_request([3] * 60, P), ValueError,
     r"60 tokens; with at least 1 output token that is more than max_model_len 60 \(allowed "
     r"1..59 prompt tokens"),
    ("add_request/prompt over max_model_len", lambda e, m: e.add_request([3] * 61, P),
     ValueError, r"allowed 1..59 prompt tokens"),
    # ---- params and ids
    ("add_request/params a dict", lambda e, m: e.add_request([1], {"max_tokens": 2}), TypeError,
     r"params must be a SamplingParams, got dict"),
    ("add_request/int request_id", lambda e, m: e.add_request([1], P, request_id=7), TypeError,
     r"request_id must be a str, got int"),
    ("add_request/running request_id", lambda e, m: e.add_request([1], P, request_id="live"),
     ValueError, r"request_id 'live' is already running"),
    ("SamplingParams/max_tokens 0", lambda e, m: e.add_request([1], SamplingParams(max_tokens=0)),
     ValueError, r"max_tokens must be an int >= 1, got 0"),
    # ---- generate (the bad prompt is the only one: nothing is queued, nothing steps)
    ("generate/None", lambda e, m: e.generate(None), TypeError,
     r"prompts must be a str or a list of prompts \(str or token-id lists\), got NoneType"),
    ("generate/bare token-id list", lambda e, m: e.generate([1, 2, 3]), TypeError,
     r"got int \(one token-id prompt goes in a list of its own: generate\(\[\[1, 2, 3\]\]\)\)"),
    ("generate/float ids", lambda e, m: e.generate([[1.5, 2.5]]), TypeError,
     r"prompt token id 0 must be an int in 0..63, got 1.5 \(float\)"),
    ("generate/negative id", lambda e, m: e.generate([[3, -1]]), ValueError,
     r"allowed 0..63"),
    ("generate/params count", lambda e, m: e.generate([[1]], [P, P]), ValueError,
     r"got 2 SamplingParams for 1 prompts"),
    # ---- start-up (a second engine on the same model: the busy one is untouched)
    ("LLM/max_model_len 0", lambda e, m: LLM(m, max_model_len=0), ValueError,
     r"max_model_len must be an int >= 1, got 0"),
    ("LLM/max_model_len -3", lambda e, m: LLM(m, max_model_len=-3), ValueError,
     r"max_model_len must be an int >= 1, got -3"),
    ("LLM/max_model_len 10.5", lambda e, m: LLM(m, max_model_len=10.5), ValueError,
     r"max_model_len must be an int >= 1, got 10.5"),
    ("LLM/max_model_len '8'", lambda e, m: LLM(m, max_model_len="8"), ValueError,
     r"max_model_len must be an int >= 1, got '8'"),
    ("LLM/max_model_len over the context", lambda e, m: LLM(m, max_model_len=4096), ValueError,
     r"max_model_len 4096 exceeds the model's context length .*allowed 1..512"),
    ("LLM/max_model_len over the pool",
     lambda e, m: LLM(m, num_gpu_blocks=8, block_size=4, max_model_len=100), ValueError,
     r"needs 25 blocks for max_model_len 100, the pool has 7 .*lower max_model_len to <= 28"),
    ("LLM/attention_backend 'cuda-magic'", lambda e, m: LLM(m, attention_backend="cuda-magic"),
     ValueError, r"attention_backend must be one of auto, triton, torch, got 'cuda-magic'"),
    ("LLM/num_gpu_blocks 1", lambda e, m: LLM(m, num_gpu_blocks=1), ValueError,
     r"num_gpu_blocks \(one is the null block\) must be an int >= 2, got 1"),
    ("LLM/block_size True", lambda e, m: LLM(m, block_size=True), ValueError,
     r"block_size must be an int >= 1, got True"),
    ("LLM/max_num_seqs 0", lambda e, m: LLM(m, max_num_seqs=0), ValueError,
     r"max_num_seqs must be an int >= 1, got 0"),
    ("LLM/max_num_batched_tokens -1", lambda e, m: LLM(m, max_num_batched_tokens=-1), ValueError,
     r"max_num_batched_tokens must be an int >= 1, got -1"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "allowed"), [r[1:] for r in ROWS],
                         ids=[r[0] for r in ROWS])  # fmt: skip
def test_bad_input_is_refused_and_the_engine_is_unchanged(
    tiny: Model, call: Callable[[LLM, Model], Any], error: type[BaseException], allowed: str
) -> None:
    llm = busy_engine(tiny)
    before = engine_snapshot(llm)
    with pytest.raises(error, match=allowed):
        call(llm, tiny)
    assert engine_snapshot(llm) == before
    (out,) = llm.generate([[3] * 8 + [6]], SamplingParams(max_tokens=2, ignore_eos=True))
    assert out.num_cached_tokens == 8 and len(out.output_token_ids) == 2  # still caches, runs


def test_a_step_that_fails_mid_way_aborts_and_frees_its_request(tiny: Model) -> None:
    """The model raises in the step that prefills a new request: the request is aborted, every
    block comes back (free queue exactly as an abort after a good schedule leaves it), the
    blocks the step would have written leave the prefix cache (a later hit would read garbage
    KV), and the next generate gives the tokens of a fresh engine."""
    prompt = [7, 9, 11, 13, 15, 17, 19, 21, 23]
    fresh = LLM(tiny, num_gpu_blocks=16, block_size=4).generate([prompt], GREEDY)[0]
    twin = busy_engine(tiny)   # same history, the same request aborted after a good schedule
    twin.add_request(prompt, GREEDY, request_id="new")
    twin.scheduler.update_from_output(twin.scheduler.schedule(), {})
    twin.abort(["live", "new"])   # step() aborts in schedule order
    llm = busy_engine(tiny)
    llm.add_request(prompt, GREEDY, request_id="new")
    pool = llm.kv_cache_manager.block_pool

    def boom(*_args, **_kwargs):
        raise IndexError("index out of range in self")

    llm.model.forward = boom
    try:
        with pytest.raises(RuntimeError, match=r"step 3 failed \(IndexError: index out of range "
                                               r"in self\); its requests \['live', 'new'\] were "
                                               r"aborted and their blocks freed"):
            llm.step()
    finally:
        del llm.model.forward
    assert llm.scheduler.get_request_counts() == (0, 0) and llm._live == {}
    assert pool.get_num_free_blocks() == 15 and all(b.ref_cnt == 0 for b in pool.blocks[1:])
    free_order = [b.block_id for b in pool.free_block_queue.get_all_free_blocks()]
    twin_pool = twin.kv_cache_manager.block_pool
    assert free_order == [b.block_id for b in twin_pool.free_block_queue.get_all_free_blocks()]
    # "new"'s 2 full blocks were cached when the failed step was scheduled: evicted; the blocks
    # written in earlier steps ("done"'s 2, "live"'s 3rd) stay cached.
    assert len(twin_pool.cached_block_hash_to_block) - len(pool.cached_block_hash_to_block) == 2
    engine_snapshot(llm)  # recorder replay == live
    (out,) = llm.generate([prompt], GREEDY)
    assert out.num_cached_tokens == 0 and out.output_token_ids == fresh.output_token_ids
    (again,) = llm.generate([[3] * 8 + [5] * 5], GREEDY)
    assert again.num_cached_tokens == 12          # "live"'s blocks from before the failure


def test_a_second_engine_keeps_the_first_engines_prefix_hits(tiny: Model) -> None:
    """LLM() re-set the process-wide NONE_HASH (random without PYTHONHASHSEED): every prefix
    hit of an engine built earlier silently became a miss."""
    llm = busy_engine(tiny)
    LLM(tiny, num_gpu_blocks=4, block_size=4)
    (out,) = llm.generate([[3] * 8 + [6]], SamplingParams(max_tokens=2, ignore_eos=True))
    assert out.num_cached_tokens == 8


def test_the_campaign_covers_every_engine_entry_point() -> None:
    assert {r[0].split("/")[0] for r in ROWS} == {"add_request", "generate", "LLM",
                                                  "SamplingParams"}  # fmt: skip
